"""The registry-backed decoders on their own (no Spark): Confluent's AvroSerializer framing decoded by
AvroDecoder through tidelake's schema registry — the batch path and the datum-by-datum path agree, trailing
bytes never shift a neighbour, schema ids interleave, an unknown id is named."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from schema_registry_fixtures import BROKER_CONFIG, start_registry
from typed_samples import ORDER, order
from tidelake.broker import EmbeddedBroker
from tidelake.spark.avro_decoder import AvroDecoder
from tidelake.spark.avro_types import record_schema
from tidelake.spark.decode_errors import BadChangeEvent
from tidelake.spark.registered_schemas import RegisteredSchemas, SchemaRegistryConfig


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), config=BROKER_CONFIG) as broker:
        with start_registry(broker.bootstrap_servers) as registry:
            yield registry.url


def serialize(url: str, topic: str, schema: dict, records: list[dict]) -> list[bytes]:
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))
    return [serializer(r, SerializationContext(topic, MessageField.VALUE)) for r in records]


def decoder(url: str) -> AvroDecoder:
    return AvroDecoder(RegisteredSchemas(SchemaRegistryConfig(url)))


WITH_MAP = {**ORDER, "name": "OrderWithMap", "fields": ORDER["fields"] + [
    {"name": "attributes", "type": {"type": "map", "values": "long"}, "default": {}}]}


def test_batch_and_datum_by_datum_agree(registry_url):
    records = [{**order(i), "attributes": {"k": i}} for i in range(40)]
    values = serialize(registry_url, "agree", WITH_MAP, records)
    schema = record_schema(WITH_MAP)
    batch = decoder(registry_url).decode(pa.array(values, pa.binary()), schema)
    few = [decoder(registry_url).decode(pa.array(values[i:i + 3], pa.binary()), schema).table
           for i in range(0, 40, 3)]
    assert batch.table.to_pylist() == pa.concat_tables(few).to_pylist()
    assert batch.table.column("attributes").to_pylist()[5] == [("k", 5)]
    assert len(batch.schema_ids) == 1


def test_trailing_bytes_do_not_shift_the_next_datum(registry_url):
    values = serialize(registry_url, "trailing", ORDER, [order(i) for i in range(30)])
    values[4] += b"\x02\x02"
    got = decoder(registry_url).decode(pa.array(values, pa.binary()), record_schema(ORDER)).table
    assert got.column("id").to_pylist() == list(range(30))
    assert got.column("address").to_pylist()[5] == {"city": "c5"}


def test_interleaved_schema_versions_keep_kafka_order(registry_url):
    v1 = {"type": "record", "name": "O", "fields": [{"name": "id", "type": "long"}]}
    v2 = {**v1, "fields": v1["fields"] + [{"name": "note", "type": ["null", "string"], "default": None}]}
    one = serialize(registry_url, "versions", v1, [{"id": i} for i in range(20)])
    two = serialize(registry_url, "versions", v2, [{"id": 100 + i, "note": f"n{i}"} for i in range(20)])
    values = [v for pair in zip(one, two) for v in pair]
    got = decoder(registry_url).decode(pa.array(values, pa.binary()), record_schema(v2))
    assert len(got.schema_ids) == 2
    rows = got.table.to_pylist()
    assert [r["id"] for r in rows] == [x for i in range(20) for x in (i, 100 + i)]
    assert rows[0]["note"] is None and rows[1]["note"] == "n0"


def test_unknown_schema_id_is_named(registry_url):
    with pytest.raises(BadChangeEvent, match="schema id 424242 is not in the schema registry"):
        decoder(registry_url).decode(pa.array([b"\x00\x00\x06\x79\x32\x02"], pa.binary()), pa.schema([("id", pa.int64())]))
