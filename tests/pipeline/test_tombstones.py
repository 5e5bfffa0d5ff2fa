"""A Kafka tombstone (a null value) in a pipeline: no change by default (``sink.tombstones: ignore``), or with
``sink.tombstones: delete`` a delete of the row its record key names — real Spark, tidelake's broker, a real
table."""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.broker import EmbeddedBroker
from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError
from tidelake.spark.runner import Pipeline, PoisonRecord
from tidelake.table import Table

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b.bootstrap_servers


def key(i: int, wrapped: bool = False) -> bytes:
    k = {"id": i}  # the JSON converter's schemas.enable=true wraps it: {"schema": ..., "payload": {...}}
    return json.dumps({"schema": {"type": "struct"}, "payload": k} if wrapped else k).encode()


def row(i: int, amount: int) -> bytes:
    return json.dumps({"id": i, "amount": amount}).encode()


# (key, value) in Kafka order, one partition: 0-4 inserted; 1 and 2 (wrapped key) deleted; 3 deleted and written
# again; 4 updated
RECORDS = [(key(i), row(i, i)) for i in range(5)] + [
    (key(1), None), (key(2, wrapped=True), None), (key(3), None), (key(3), row(3, 33)), (key(4), row(4, 44))]


@pytest.fixture(scope="module")
def topic(broker):
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic("tombstones", 1, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker})
    for k, v in RECORDS:
        producer.produce("tombstones", v, key=k, partition=0)
    assert producer.flush(30) == 0
    return "tombstones"


def run(spark, broker, topic, tmp_path, **sink) -> dict[int, int]:  # noqa: F811
    config = {"source": {"bootstrap_servers": broker, "topic": topic, "group_id": f"g-{tmp_path.name}"},
              "sink": {"table": str(tmp_path / "table"), "format": "json", "primary_key": ["id"],
                       "schema": "id long, amount long", "buckets": 2, **sink}}
    summary = Pipeline(config, spark=spark).run(once=True)
    assert summary.records == len(RECORDS)
    return {r["id"]: r["amount"] for r in Table.open(str(tmp_path / "table")).scan().to_pylist()}


def test_a_tombstone_is_no_change_by_default(spark, broker, topic, tmp_path):  # noqa: F811
    assert run(spark, broker, topic, tmp_path) == {0: 0, 1: 1, 2: 2, 3: 33, 4: 44}


def test_with_tombstones_delete_a_tombstone_deletes_its_keys_row(spark, broker, topic, tmp_path):  # noqa: F811
    assert run(spark, broker, topic, tmp_path, tombstones="delete") == {0: 0, 3: 33, 4: 44}


def test_a_tombstone_without_a_key_names_its_offset(spark, broker, tmp_path):  # noqa: F811
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic("keyless-tombstone", 1, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker})
    producer.produce("keyless-tombstone", row(0, 0), key=key(0), partition=0)
    producer.produce("keyless-tombstone", None, partition=0)
    assert producer.flush(30) == 0
    with pytest.raises(PoisonRecord, match=r"^keyless-tombstone partition 0 offset 1: tombstone \(sink.tombstones: "
                                           r"delete\): record without a key"):
        run(spark, broker, "keyless-tombstone", tmp_path, tombstones="delete")


@pytest.mark.parametrize("sink, message", [
    ({"tombstones": "remove"}, "sink.tombstones must be ignore or delete"),
    ({"tombstones": "delete", "mode": "append"}, "sink.tombstones: delete needs sink.mode upsert"),
])
def test_the_setting_is_checked(sink, message):
    raw = {"source": {"bootstrap_servers": "127.0.0.1:9092", "topic": "t", "group_id": "g"},
           "sink": {"table": "t", "format": "json", "primary_key": ["id"], "schema": "id long", **sink}}
    with pytest.raises(PipelineConfigError, match=message):
        PipelineConfig.from_dict(raw)
