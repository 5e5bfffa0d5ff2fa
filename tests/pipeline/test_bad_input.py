"""Records that are not change events (on_error: fail | skip), decimals that do not fit, and a sink table
that does not match the pipeline config — with real Spark, tidelake's broker and a real table."""
from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.broker import EmbeddedBroker
from tidelake.spark.changes import BadChangeEvent, parse_changes_located
from tidelake.spark.value_formats import value_format
from tidelake.spark.pipeline_config import PipelineConfigError
from tidelake.spark import runner
from tidelake.spark.runner import Pipeline, PoisonRecord
from tidelake.table import Table
from tests.pipeline.dead_letter_topic import dlq_records

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b.bootstrap_servers


def topic_with(bootstrap: str, topic: str, values: list[bytes]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(30) == 0


def pipeline(spark, bootstrap, topic, tmp_path, schema="id long, amount long", fmt="json",  # noqa: F811
             **extra) -> Pipeline:
    config = {"source": {"bootstrap_servers": bootstrap, "topic": topic, "group_id": f"g-{topic}"},
              "sink": {"table": str(tmp_path / "table"), "format": fmt, "primary_key": ["id"],
                       "schema": schema, "buckets": 2}, **extra}
    return Pipeline(config, spark=spark)


GOOD = [json.dumps({"id": i, "amount": i}).encode() for i in range(5)]


def test_bad_record_fails_the_batch_naming_topic_partition_offset(spark, broker, tmp_path):  # noqa: F811
    topic_with(broker, "poison-fail", GOOD[:3] + [b"this is not json"] + GOOD[3:])
    with pytest.raises(PoisonRecord) as e:
        pipeline(spark, broker, "poison-fail", tmp_path).run(once=True)
    message = str(e.value)
    assert message.startswith("poison-fail partition 0 offset 3: value is not a JSON object"), message
    assert "\n" not in message
    assert Table.open(str(tmp_path / "table")).scan().num_rows == 0   # nothing of the batch committed


def test_skip_leaves_bad_records_out_and_counts_them(spark, broker, tmp_path):  # noqa: F811
    values = GOOD[:2] + [b"{not json", json.dumps({"amount": 7}).encode(),   # no key
                         json.dumps({"id": 9, "amount": "many"}).encode()] + GOOD[2:]
    topic_with(broker, "poison-skip", values)
    summary = pipeline(spark, broker, "poison-skip", tmp_path, on_error="skip").run(once=True)
    assert summary.skipped == 3 and summary.records == len(values)
    got = Table.open(str(tmp_path / "table")).scan().sort_by("id")
    assert got.column("id").to_pylist() == list(range(5))


def test_dead_letter_copies_bad_records_once_even_across_a_crash(spark, broker, tmp_path, monkeypatch):  # noqa: F811
    values = GOOD[:2] + [b"{not json", json.dumps({"op": "x"}).encode()] + GOOD[2:] + [b"[1]"]
    topic_with(broker, "poison-dlq", values)
    with pytest.raises(PipelineConfigError, match="needs dead_letter_topic"):
        pipeline(spark, broker, "poison-dlq", tmp_path, on_error="dead-letter")
    # the first attempt dies after writing the DLQ, before its table commit
    real_publish = runner.publish

    def crash(*args, **kwargs):
        raise RuntimeError("killed before the table commit")
    monkeypatch.setattr(runner, "publish", crash)
    with pytest.raises(RuntimeError, match="killed"):
        pipeline(spark, broker, "poison-dlq", tmp_path, on_error="dead-letter",
                 dead_letter_topic="poison-dlq.dlq").run(once=True)
    assert len(dlq_records(broker, "poison-dlq.dlq")) == 3
    monkeypatch.setattr(runner, "publish", real_publish)
    summary = pipeline(spark, broker, "poison-dlq", tmp_path, on_error="dead-letter",
                       dead_letter_topic="poison-dlq.dlq").run(once=True)
    assert summary.skipped == 3 and summary.dead_lettered == 3
    dead = dlq_records(broker, "poison-dlq.dlq")
    assert len(dead) == 3   # the replayed batch wrote nothing twice
    headers = [dict(m.headers()) for m in dead]
    assert sorted(int(h["__connect.errors.offset"]) for h in headers) == [2, 3, 7]
    assert all(h["__connect.errors.topic"] == b"poison-dlq" and h["__connect.errors.partition"] == b"0"
               for h in headers)
    assert {m.value() for m in dead} == {b"{not json", json.dumps({"op": "x"}).encode(), b"[1]"}
    assert Table.open(str(tmp_path / "table")).scan().sort_by("id").column("id").to_pylist() == list(range(5))
    state = Table.open(str(tmp_path / "table")).app_state("pipeline:g-poison-dlq:poison-dlq")
    assert state["extra"]["dead_lettered_total"] == 3 and state["extra"]["skipped_total"] == 3


def test_decimal_that_does_not_fit_is_an_error_never_rounded():
    schema = pa.schema([("id", pa.int64()), ("price", pa.decimal128(5, 2))])
    rows = pa.table({"value": [b'{"id":1,"price":123.45}', b'{"id":2,"price":123.456}', b'{"id":3,"price":1.5}'],
                     "partition": [0, 0, 0], "offset": [10, 11, 12]})
    with pytest.raises(BadChangeEvent) as e:
        parse_changes_located(rows, schema, value_format("json"), ["id"])
    assert (e.value.partition, e.value.offset) == (0, 11) and "precision" in str(e.value)
    changes, skipped = parse_changes_located(rows, schema, value_format("json"), ["id"], skip_bad=True)
    assert [(p, o) for p, o, _ in skipped] == [(0, 11)]
    assert changes.column("price").to_pylist() == [Decimal("123.45"), Decimal("1.50")]


def test_existing_table_with_another_schema_or_key_is_an_error(spark, broker, tmp_path):  # noqa: F811
    topic_with(broker, "schema-check", GOOD)
    Table.create(str(tmp_path / "table"), pa.schema([("id", pa.int64()), ("amount", pa.int32())]), ["id"])
    with pytest.raises(PipelineConfigError) as e:
        pipeline(spark, broker, "schema-check", tmp_path).run(once=True)
    assert "column amount is int32 in the table, int64 in the config" in str(e.value)
    other = tmp_path / "other"
    other.mkdir()
    Table.create(str(other / "table"), pa.schema([("id", pa.int64()), ("amount", pa.int64())]), ["amount"])
    with pytest.raises(PipelineConfigError, match=r"primary key is \(amount\), the config says \(id\)"):
        pipeline(spark, broker, "schema-check", other).run(once=True)


def test_adding_a_nullable_column_only_when_asked(spark, broker, tmp_path):  # noqa: F811
    topic_with(broker, "schema-evolve", [json.dumps({"id": i, "amount": i, "note": f"n{i}"}).encode()
                                         for i in range(3)])
    Table.create(str(tmp_path / "table"), pa.schema([("id", pa.int64()), ("amount", pa.int64())]), ["id"])
    wider = "id long, amount long, note string"
    with pytest.raises(PipelineConfigError, match="column note .*schema_evolution: add-columns"):
        pipeline(spark, broker, "schema-evolve", tmp_path, schema=wider).run(once=True)
    p = pipeline(spark, broker, "schema-evolve", tmp_path, schema=wider)
    p.config.sink.schema_evolution = "add-columns"
    p.run(once=True)
    t = Table.open(str(tmp_path / "table"))
    assert t.schema.names == ["id", "amount", "note"]
    assert t.scan().sort_by("id").column("note").to_pylist() == ["n0", "n1", "n2"]


def debezium(op: str, row: dict | None = None) -> bytes:
    before, after = (row, None) if op == "d" else (None, row)
    return json.dumps({"before": before, "after": after, "op": op, "ts_ms": 1}).encode()


def test_debezium_truncate_empties_the_table_in_the_batch_commit(spark, broker, tmp_path):  # noqa: F811
    topic_with(broker, "cdc-truncate", [debezium("c", {"id": i, "amount": i}) for i in range(5)])
    p = pipeline(spark, broker, "cdc-truncate", tmp_path, fmt="debezium-json")
    p.run(once=True)
    table = Table.open(str(tmp_path / "table"))
    assert table.scan().num_rows == 5
    # one batch: changes before the truncate (gone with it), the truncate, changes after it (kept)
    producer = Producer({"bootstrap.servers": broker})
    for v in [debezium("u", {"id": 1, "amount": 100}), debezium("c", {"id": 7, "amount": 7}), debezium("t"),
              debezium("c", {"id": 10, "amount": 10}), debezium("u", {"id": 10, "amount": 11}),
              debezium("c", {"id": 12, "amount": 12})]:
        producer.produce("cdc-truncate", v, partition=0)
    assert producer.flush(30) == 0
    summary = p.run(once=True)
    assert len(summary.batches) == 1
    rows = sorted((r["id"], r["amount"]) for r in Table.open(str(tmp_path / "table")).scan().to_pylist())
    assert rows == [(10, 11), (12, 12)]
    history = Table.open(str(tmp_path / "table")).history()
    assert history[-1]["operation"] == "overwrite"
    state = Table.open(str(tmp_path / "table")).app_state(p.config.app_id)
    assert state["extra"]["offsets"] == {"0": 11}   # the truncating batch's offsets are in its commit
