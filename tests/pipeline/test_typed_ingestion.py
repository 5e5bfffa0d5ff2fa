"""Typed ingestion end to end (issue 25): Confluent's own serializers (AvroSerializer, ProtobufSerializer,
JSONSerializer) produce to tidelake's broker with tidelake's schema registry; the pipeline decodes the wire
format on Spark's executors into a tidelake table it creates from the registered schema; Debezium-shaped Avro
change events, exactly once; schema evolution; bad records."""
from __future__ import annotations

import datetime
import decimal
import json
import struct
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2, wrappers_pb2

from schema_registry_fixtures import BROKER_CONFIG, start_registry
from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.broker import EmbeddedBroker
from tidelake.spark.decode_errors import RegistryUnavailable
from tidelake.spark.pipeline_config import PipelineConfigError
from tidelake.spark.runner import Pipeline, PoisonRecord
from tidelake.table import Table
from tests.pipeline.dead_letter_topic import dlq_records

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import pipeline_avro_vs_json as avro_bench  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(bootstrap servers, registry URL): one broker holding the topics and the registry's ``_schemas``."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), config=BROKER_CONFIG) as broker:
        with start_registry(broker.bootstrap_servers) as registry:
            yield broker.bootstrap_servers, registry.url


def make_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, value, key=key, partition=partition)
    assert producer.flush(30) == 0


def pipeline(spark, cluster, topic, tmp_path, fmt, sink=None, source=None, **extra) -> Pipeline:  # noqa: F811
    bootstrap, registry = cluster
    config = {"source": {"bootstrap_servers": bootstrap, "topic": topic, "group_id": f"g-{topic}", **(source or {})},
              "schema_registry": {"url": registry},
              "sink": {"table": str(tmp_path / "table"), "format": fmt, "buckets": 2, **(sink or {})}, **extra}
    return Pipeline(config, spark=spark)


def ctx(topic: str, field=MessageField.VALUE) -> SerializationContext:
    return SerializationContext(topic, field)


# ------------------------------------------------------------------------------------------------- Avro
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}},
]}
ORDER_KEY = {"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}
AT = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)


def order(i: int, **more) -> dict:
    return {"id": i, "note": None if i % 2 else f"n{i}", "price": decimal.Decimal(f"{i}.25"),
            "day": datetime.date(2026, 1, 1) + datetime.timedelta(days=i), "at": AT, "ref": str(uuid.UUID(int=i)),
            "address": {"city": f"c{i}"}, **more}


def avro_records(client, topic, schema, rows, key_schema=ORDER_KEY):
    value = AvroSerializer(client, json.dumps(schema))
    key = AvroSerializer(client, json.dumps(key_schema))
    return [(key({"id": r["id"]}, ctx(topic, MessageField.KEY)), value(r, ctx(topic))) for r in rows]


def test_avro_creates_the_table_from_the_registered_schema_keyed_by_the_record_key(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    make_topic(bootstrap, "orders-avro")
    produce(bootstrap, "orders-avro", avro_records(client, "orders-avro", ORDER_V1, [order(i) for i in range(30)]
                                                   + [order(3, note="again")]))
    summary = pipeline(spark, cluster, "orders-avro", tmp_path, "avro").run(once=True)
    assert summary.records == 31
    table = Table.open(str(tmp_path / "table"))
    assert table.primary_key == ["id"]   # from subject orders-avro-key
    assert table.schema.field("price").type == pa.decimal128(10, 2)
    assert table.schema.field("day").type == pa.date32()
    assert table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("ref").type == pa.string()
    assert table.schema.field("address").type == pa.struct([("city", pa.string())])
    rows = {r["id"]: r for r in table.scan().to_pylist()}
    assert len(rows) == 30
    assert rows[3]["note"] == "again" and rows[4]["note"] == "n4" and rows[5]["note"] is None
    assert rows[7]["price"] == decimal.Decimal("7.25") and rows[7]["day"] == datetime.date(2026, 1, 8)
    assert rows[7]["at"] == AT and rows[7]["ref"] == str(uuid.UUID(int=7)) and rows[7]["address"] == {"city": "c7"}


# ------------------------------------------------------------------------------------- Debezium Avro
def debezium_schema(value: dict) -> dict:
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.mysql", "fields": [
        {"name": "db", "type": "string"}, {"name": "table", "type": ["null", "string"], "default": None}]}
    return {"type": "record", "name": "Envelope", "namespace": "shop.orders", "fields": [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", value["name"]], "default": None},
        {"name": "source", "type": source},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None}]}


ROW = {"type": "record", "name": "Value", "namespace": "shop.orders", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "long"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}}]}


def change(op: str, row: dict | None) -> dict:
    before, after = (row, None) if op == "d" else (None, row)
    return {"before": before, "after": after, "op": op, "ts_ms": 1, "source": {"db": "shop", "table": "orders"}}


def test_debezium_avro_change_events_exactly_once(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    topic = "dbz-orders"
    make_topic(bootstrap, topic, partitions=2)
    value = AvroSerializer(client, json.dumps(debezium_schema(ROW)))
    key = AvroSerializer(client, json.dumps({"type": "record", "name": "Key", "namespace": "shop.orders",
                                             "fields": [{"name": "id", "type": "long"}]}))
    state: dict[int, int] = {}
    produced = 0
    producer = Producer({"bootstrap.servers": bootstrap})
    for step in range(120):
        k = step % 25
        if k in state and step % 7 == 0:
            event, _ = change("d", {"id": k, "amount": state.pop(k), "price": decimal.Decimal("0.00")}), None
        else:
            event = change("u" if k in state else "c", {"id": k, "amount": step, "price": decimal.Decimal("1.50")})
            state[k] = step
        producer.produce(topic, value(event, ctx(topic)), key=key({"id": k}, ctx(topic, MessageField.KEY)),
                         partition=k % 2)
        produced += 1
        if event["op"] == "d":   # Debezium's tombstone after a delete
            producer.produce(topic, None, key=key({"id": k}, ctx(topic, MessageField.KEY)), partition=k % 2)
            produced += 1
    assert producer.flush(30) == 0
    source = {"max_rate_per_partition": 10, "batch_interval": 1}
    # an interruption mid-way (two batches of 10 records per partition), then a restart to completion
    interrupted = pipeline(spark, cluster, topic, tmp_path, "debezium-avro", source=source).run(max_batches=2)
    assert interrupted.records == 40
    rest = pipeline(spark, cluster, topic, tmp_path, "debezium-avro").run(once=True)
    assert interrupted.records + rest.records == produced   # nothing read twice, nothing left out
    table = Table.open(str(tmp_path / "table"))
    assert table.primary_key == ["id"] and table.schema.names == ["id", "amount", "price"]
    assert {r["id"]: r["amount"] for r in table.scan().to_pylist()} == state


# ------------------------------------------------------------------------------------------- Protobuf
def order_message_class():
    pool = descriptor_pool.DescriptorPool()
    for dependency in (timestamp_pb2, wrappers_pb2):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(dependency.DESCRIPTOR.serialized_pb))
    f = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3",
                                           dependency=["google/protobuf/timestamp.proto",
                                                       "google/protobuf/wrappers.proto"])
    T = descriptor_pb2.FieldDescriptorProto
    m = f.message_type.add(name="Order")
    m.field.add(name="id", number=1, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    m.field.add(name="at", number=2, type=T.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=1)
    m.field.add(name="note", number=3, type=T.TYPE_MESSAGE, type_name=".google.protobuf.StringValue", label=1)
    m.field.add(name="tags", number=4, type=T.TYPE_STRING, label=T.LABEL_REPEATED)
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_with_well_known_types(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    Order = order_message_class()
    topic = "orders-proto"
    make_topic(bootstrap, topic)
    serialize = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    records = []
    for i in range(12):
        message = Order(id=i, tags=["t"] * (i % 3))
        if i % 2:
            message.note.value = f"n{i}"
        message.at.FromDatetime(AT.replace(tzinfo=None))
        records.append((None, serialize(message, ctx(topic))))
    produce(bootstrap, topic, records)
    pipeline(spark, cluster, topic, tmp_path, "protobuf", {"primary_key": ["id"]}).run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("note").type == pa.string()
    rows = {r["id"]: r for r in table.scan().to_pylist()}
    assert len(rows) == 12
    assert rows[3] == {"id": 3, "at": AT, "note": "n3", "tags": []}
    assert rows[4] == {"id": 4, "at": AT, "note": None, "tags": ["t"]}


# ----------------------------------------------------------------------------------------- JSON Schema
def test_json_schema(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "amount": {"type": "number"},
                             "day": {"type": "string", "format": "date"},
                             "note": {"type": ["null", "string"]}},
              "required": ["id"]}
    topic = "orders-json-schema"
    make_topic(bootstrap, topic)
    serialize = JSONSerializer(json.dumps(schema), client)
    produce(bootstrap, topic, [(None, serialize({"id": i, "amount": i / 2, "day": "2026-01-02",
                                                 "note": None if i % 2 else "x"}, ctx(topic))) for i in range(10)])
    pipeline(spark, cluster, topic, tmp_path, "json-schema", {"primary_key": ["id"]}).run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.schema.field("id").type == pa.int64() and table.schema.field("day").type == pa.date32()
    rows = {r["id"]: r for r in table.scan().to_pylist()}
    assert rows[3] == {"id": 3, "amount": 1.5, "day": datetime.date(2026, 1, 2), "note": None}
    assert rows[4]["note"] == "x" and len(rows) == 10


# ------------------------------------------------------------------------------------------- evolution
def test_a_compatible_version_adds_its_column_in_the_commit_that_first_carries_it(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    topic = "orders-evolve"
    make_topic(bootstrap, topic)
    v1 = {"type": "record", "name": "O", "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "long"}]}
    produce(bootstrap, topic, avro_records(client, topic, v1, [{"id": i, "amount": i} for i in range(5)]))
    p = pipeline(spark, cluster, topic, tmp_path, "avro", {"schema_evolution": "add-columns"})
    p.run(once=True)
    table = Table.open(str(tmp_path / "table"))
    before = table.version
    assert table.schema.names == ["id", "amount"]
    v2 = {**v1, "fields": v1["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}]}
    # v2 registered, but this batch's records are all v1: the column is not added yet
    client.register_schema(f"{topic}-value", Schema(json.dumps(v2), "AVRO"))
    produce(bootstrap, topic, avro_records(client, topic, v1, [{"id": 8, "amount": 8}]))
    pipeline(spark, cluster, topic, tmp_path, "avro", {"schema_evolution": "add-columns"}).run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.version == before + 1 and table.schema.names == ["id", "amount"]
    before = table.version
    # one batch with v1 and v2 records: the column comes with it, null for the v1 rows
    produce(bootstrap, topic, avro_records(client, topic, v1, [{"id": 9, "amount": 9}])
            + avro_records(client, topic, v2, [{"id": i, "amount": i, "currency": "USD"} for i in range(3, 8)]))
    pipeline(spark, cluster, topic, tmp_path, "avro", {"schema_evolution": "add-columns"}).run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.version == before + 1   # one commit: the rows and the column
    assert table.schema_at(before).names == ["id", "amount"]
    assert table.schema.field("currency").type == pa.string()
    rows = {r["id"]: r["currency"] for r in table.scan().to_pylist()}
    assert rows == {0: None, 1: None, 2: None, 3: "USD", 4: "USD", 5: "USD", 6: "USD", 7: "USD", 8: None, 9: None}
    before = table.version

    # an incompatible version (a field's type changed) is refused by the registry when the producer
    # registers it: nothing reaches the topic, the table stays as it is
    v3 = {**v1, "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "string"}]}
    with pytest.raises(SchemaRegistryError) as e:
        AvroSerializer(client, json.dumps(v3))({"id": 1, "amount": "x"}, ctx(topic))
    assert e.value.http_status_code == 409
    assert Table.open(str(tmp_path / "table")).version == before


def test_without_add_columns_a_new_column_fails_the_batch_whole(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    topic = "orders-no-evolve"
    make_topic(bootstrap, topic)
    v1 = {"type": "record", "name": "O", "fields": [{"name": "id", "type": "long"}]}
    produce(bootstrap, topic, avro_records(client, topic, v1, [{"id": 1}]))
    pipeline(spark, cluster, topic, tmp_path, "avro").run(once=True)
    v2 = {**v1, "fields": v1["fields"] + [{"name": "note", "type": ["null", "string"], "default": None}]}
    produce(bootstrap, topic, avro_records(client, topic, v2, [{"id": 2, "note": "x"}]))
    with pytest.raises(PipelineConfigError, match="carry column.*note.*schema_evolution: add-columns"):
        pipeline(spark, cluster, topic, tmp_path, "avro").run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.schema.names == ["id"] and table.scan().column("id").to_pylist() == [1]


# ------------------------------------------------------------------------------------------ bad records
def test_unknown_schema_id_is_a_bad_record_naming_topic_partition_offset_and_id(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    topic = "orders-unknown-id"
    make_topic(bootstrap, topic)
    good = avro_records(client, topic, ORDER_V1, [order(i) for i in range(4)])
    unknown = (None, b"\x00" + struct.pack(">I", 987654) + b"\x02")
    not_framed = (None, b'{"id": 1}')
    produce(bootstrap, topic, good[:2] + [unknown] + good[2:] + [not_framed])
    with pytest.raises(PoisonRecord) as e:
        pipeline(spark, cluster, topic, tmp_path, "avro").run(once=True)
    assert str(e.value).startswith(f"{topic} partition 0 offset 2: schema id 987654 is not in the schema registry")
    assert not (tmp_path / "table" / "_log").exists() or Table.open(str(tmp_path / "table")).scan().num_rows == 0
    summary = pipeline(spark, cluster, topic, tmp_path, "avro", on_error="skip").run(once=True)
    assert summary.skipped == 2
    assert sorted(Table.open(str(tmp_path / "table")).scan().column("id").to_pylist()) == [0, 1, 2, 3]
    # dead-letter: both copied as they were, Kafka Connect's headers naming where and why (the schema id)
    summary = pipeline(spark, cluster, topic, tmp_path / "dlq", "avro", on_error="dead-letter",
                       dead_letter_topic=f"{topic}.dlq").run(once=True)
    assert summary.dead_lettered == 2
    dead = dlq_records(bootstrap, f"{topic}.dlq")
    assert [m.value() for m in dead] == [unknown[1], not_framed[1]]
    headers = [dict(m.headers()) for m in dead]
    assert [h["__connect.errors.offset"] for h in headers] == [b"2", b"5"]
    assert headers[0]["__connect.errors.exception.message"] == b"schema id 987654 is not in the schema registry"
    assert b"magic byte" in headers[1]["__connect.errors.exception.message"]


def test_a_registry_that_is_down_fails_fast_with_one_line(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, _ = cluster
    topic = "orders-no-registry"
    make_topic(bootstrap, topic)
    p = pipeline(spark, (bootstrap, "http://127.0.0.1:9"), topic, tmp_path, "avro")
    with pytest.raises(RegistryUnavailable) as e:
        p.run(once=True)
    assert "schema registry http://127.0.0.1:9 unreachable" in str(e.value) and "\n" not in str(e.value)


def debezium_message_class():
    """A Debezium-shaped Protobuf envelope: Value, Source, then Envelope (message index [2])."""
    f = descriptor_pb2.FileDescriptorProto(name="shop/orders_envelope.proto", package="shop.orders", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="Value")
    value.field.add(name="id", number=1, type=T.TYPE_INT64, label=1)
    value.field.add(name="amount", number=2, type=T.TYPE_INT64, label=1)
    source = f.message_type.add(name="Source")
    source.field.add(name="db", number=1, type=T.TYPE_STRING, label=1)
    envelope = f.message_type.add(name="Envelope")
    envelope.field.add(name="before", number=1, type=T.TYPE_MESSAGE, type_name=".shop.orders.Value", label=1)
    envelope.field.add(name="after", number=2, type=T.TYPE_MESSAGE, type_name=".shop.orders.Value", label=1)
    envelope.field.add(name="source", number=3, type=T.TYPE_MESSAGE, type_name=".shop.orders.Source", label=1)
    envelope.field.add(name="op", number=4, type=T.TYPE_STRING, label=1)
    envelope.field.add(name="ts_ms", number=5, type=T.TYPE_INT64, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.orders.Envelope"))


def test_debezium_protobuf_change_events(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    Envelope = debezium_message_class()
    topic = "dbz-orders-proto"
    make_topic(bootstrap, topic)
    serialize = ProtobufSerializer(Envelope, client, {"use.deprecated.format": False})
    Value = message_factory.GetMessageClass(Envelope.DESCRIPTOR.fields_by_name["after"].message_type)

    def event(op, row):
        e = Envelope(op=op, ts_ms=1)
        e.source.db = "shop"
        (e.before if op == "d" else e.after).CopyFrom(Value(**row))
        return serialize(e, ctx(topic))
    produce(bootstrap, topic, [(None, event("c", {"id": i, "amount": i})) for i in range(6)]
            + [(None, event("u", {"id": 2, "amount": 20})), (None, event("d", {"id": 3, "amount": 3}))])
    pipeline(spark, cluster, topic, tmp_path, "debezium-protobuf", {"primary_key": ["id"]}).run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.schema.names == ["id", "amount"]   # the envelope's Value, not the envelope
    assert {r["id"]: r["amount"] for r in table.scan().to_pylist()} == {0: 0, 1: 1, 2: 20, 4: 4, 5: 5}


def test_a_writer_schema_that_does_not_fit_the_table_is_never_half_applied(spark, cluster, tmp_path):  # noqa: F811
    """With the subject's compatibility NONE an incompatible version registers; its records do not fit the
    table's columns: bad records (fail names them; skip leaves them out), the table keeps its schema."""
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    topic = "orders-misfit"
    make_topic(bootstrap, topic)
    v1 = {"type": "record", "name": "O", "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "long"}]}
    produce(bootstrap, topic, avro_records(client, topic, v1, [{"id": 1, "amount": 1}]))
    pipeline(spark, cluster, topic, tmp_path, "avro").run(once=True)
    client.set_compatibility(f"{topic}-value", "NONE")
    v2 = {**v1, "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "string"}]}
    produce(bootstrap, topic, avro_records(client, topic, v1, [{"id": 2, "amount": 2}])
            + avro_records(client, topic, v2, [{"id": 3, "amount": "three"}]))
    with pytest.raises(PoisonRecord) as e:
        pipeline(spark, cluster, topic, tmp_path, "avro").run(once=True)
    assert f"{topic} partition 0 offset 2: schema id" in str(e.value)
    assert "amount is" in str(e.value) and "int64" in str(e.value)
    table = Table.open(str(tmp_path / "table"))
    assert table.scan().column("id").to_pylist() == [1] and table.schema.field("amount").type == pa.int64()
    summary = pipeline(spark, cluster, topic, tmp_path, "avro", on_error="skip").run(once=True)
    assert summary.skipped == 1
    assert sorted(Table.open(str(tmp_path / "table")).scan().column("id").to_pylist()) == [1, 2]


@pytest.mark.parametrize("envelope", [True, False])
def test_the_avro_benchmark_pipelines_fill_the_same_table(spark, cluster, tmp_path, envelope):  # noqa: F811
    """benchmarks/pipeline_avro_vs_json.py compares like with like: its JSON and Avro topics hold the same
    records, and both pipelines end with the same rows."""
    bootstrap, url = cluster
    json_topic, avro_topic, size_ratio = avro_bench.produce(bootstrap, url, 200, envelope, f"check-{envelope}")
    assert size_ratio < 0.5   # Avro is the smaller encoding
    formats = ("debezium-json", "debezium-avro") if envelope else ("json", "avro")
    for topic, fmt in zip((json_topic, avro_topic), formats):
        avro_bench.run(spark, bootstrap, url, topic, fmt, tmp_path / fmt, 30, 200)
    tables = [Table.open(str(tmp_path / fmt)).scan().sort_by("id") for fmt in formats]
    assert tables[0].to_pylist() == tables[1].to_pylist() and tables[0].num_rows == 100


def test_key_fields_the_value_lacks_come_from_the_record_key(spark, cluster, tmp_path):  # noqa: F811
    """A key record (customer_id) and a value without it: the table is keyed by the key schema's field, taken
    from each record's key (Kafka Connect's JDBC sink, pk.mode=record_key)."""
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    topic = "customers"
    make_topic(bootstrap, topic)
    key_schema = {"type": "record", "name": "CustomerKey", "fields": [{"name": "customer_id", "type": "long"}]}
    value_schema = {"type": "record", "name": "Customer", "fields": [
        {"name": "name", "type": "string"}, {"name": "visits", "type": "int"}]}
    key = AvroSerializer(client, json.dumps(key_schema))
    value = AvroSerializer(client, json.dumps(value_schema))
    records = [(key({"customer_id": i % 4}, ctx(topic, MessageField.KEY)),
                value({"name": f"c{i % 4}", "visits": i}, ctx(topic))) for i in range(10)]
    produce(bootstrap, topic, records + [(None, value({"name": "nobody", "visits": 0}, ctx(topic)))])
    with pytest.raises(PoisonRecord, match=f"{topic} partition 0 offset 10: record without a key"):
        pipeline(spark, cluster, topic, tmp_path, "avro").run(once=True)
    pipeline(spark, cluster, topic, tmp_path, "avro", on_error="skip").run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.primary_key == ["customer_id"] and table.schema.names == ["customer_id", "name", "visits"]
    assert sorted(table.scan().to_pylist(), key=lambda r: r["customer_id"]) == [
        {"customer_id": 0, "name": "c0", "visits": 8}, {"customer_id": 1, "name": "c1", "visits": 9},
        {"customer_id": 2, "name": "c2", "visits": 6}, {"customer_id": 3, "name": "c3", "visits": 7}]


def test_debezium_json_schema_change_events(spark, cluster, tmp_path):  # noqa: F811
    bootstrap, url = cluster
    client = SchemaRegistryClient({"url": url})
    row = {"type": "object", "properties": {"id": {"type": "integer"}, "amount": {"type": "integer"}},
           "required": ["id"]}
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Envelope", "type": "object",
              "properties": {"before": {"oneOf": [{"type": "null"}, row]},
                             "after": {"oneOf": [{"type": "null"}, row]},
                             "op": {"type": "string"}, "ts_ms": {"type": "integer"}},
              "required": ["op"]}
    topic = "dbz-orders-json-schema"
    make_topic(bootstrap, topic)
    serialize = JSONSerializer(json.dumps(schema), client)
    events = [change("c", {"id": i, "amount": i}) for i in range(5)] + [change("u", {"id": 1, "amount": 10}),
                                                                        change("d", {"id": 2, "amount": 2})]
    for e in events:
        e.pop("source")
    produce(bootstrap, topic, [(None, serialize(e, ctx(topic))) for e in events])
    pipeline(spark, cluster, topic, tmp_path, "debezium-json-schema", {"primary_key": ["id"]}).run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.schema.names == ["id", "amount"]
    assert {r["id"]: r["amount"] for r in table.scan().to_pylist()} == {0: 0, 1: 10, 3: 3, 4: 4}
