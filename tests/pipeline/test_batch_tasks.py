"""A pipeline batch's executor work is one Python task per group of offset ranges (read, parse, stage), with a
shuffle by key only when a key's records are in two tasks' ranges; real Spark, tidelake's broker, a real table.

The Spark jobs a run starts are counted with Spark's status tracker (the run's jobs in their own job group).
"""
from __future__ import annotations

import json
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.broker import EmbeddedBroker
from tidelake.spark import runner
from tidelake.spark.runner import Pipeline
from tidelake.table import Table

pytestmark = pytest.mark.spark

PARTITIONS = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b.bootstrap_servers


def make_topic(bootstrap: str, topic: str, records: list[tuple[int, dict]]) -> None:
    """``records``: (partition, value) in produce order."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, value in records:
        producer.produce(topic, json.dumps(value).encode(), partition=partition)
    assert producer.flush(30) == 0


def run_once(spark, bootstrap, topic, tmp_path, mode="upsert"):  # noqa: F811
    """Run the pipeline to the end of the topic; (the summary, the Spark stages of each job it ran)."""
    config = {"source": {"bootstrap_servers": bootstrap, "topic": topic, "group_id": f"g-{topic}"},
              "offsets": "exactly-once",
              "sink": {"table": str(tmp_path / "table"), "format": "json", "primary_key": ["id"], "mode": mode,
                       "schema": "id long, amount long", "buckets": 2}}
    context = spark.sparkContext
    context.setJobGroup(f"run-{topic}", "the pipeline's jobs")
    try:
        summary = Pipeline(config, spark=spark).run(once=True)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    stages = [len(tracker.getJobInfo(j).stageIds) for j in sorted(tracker.getJobIdsForGroup(f"run-{topic}"))]
    return summary, stages


def test_a_batch_of_several_tasks_is_one_stage_when_every_key_is_in_one_partition(spark, broker, tmp_path,  # noqa: F811
                                                                                   monkeypatch):
    """Keys partitioned as producers partition them (one partition per key): the batch is read by several tasks,
    each of which stages what it read; no shuffle stage, and each version holds every key once."""
    monkeypatch.setattr(runner, "ONE_TASK_MAX_RECORDS", 0)   # several tasks however small the batch
    records = [(i % PARTITIONS, {"id": i % 40, "amount": i}) for i in range(160)]
    make_topic(broker, "keyed", records)
    summary, stages = run_once(spark, broker, "keyed", tmp_path)
    assert summary.records == 160 and len(summary.batches) == 1
    assert stages == [1]   # read, parse and stage in the same tasks: one stage, no shuffle
    table = Table.open(str(tmp_path / "table"))
    assert {r["id"]: r["amount"] for r in table.scan().to_pylist()} == {k: 120 + k for k in range(40)}
    ids = table.changes(start_version=0).column("id").to_pylist()
    assert Counter(ids) == Counter(range(40))


def test_a_key_in_two_partitions_is_staged_by_one_task(spark, broker, tmp_path, monkeypatch):  # noqa: F811
    """The same keys in every partition: staging each task's records apart would put two changes of one key in
    one version (an incremental reader would see both); the batch is staged again after a shuffle by key, and
    the last change of each key in (partition, offset) order wins, as with one task."""
    monkeypatch.setattr(runner, "ONE_TASK_MAX_RECORDS", 0)
    records = [(p, {"id": k, "amount": 100 * p + k}) for k in range(20) for p in range(PARTITIONS)]
    make_topic(broker, "unkeyed", records)
    summary, stages = run_once(spark, broker, "unkeyed", tmp_path)
    assert summary.records == len(records) and len(summary.batches) == 1
    # the one-stage job found the shared keys; the shuffled staging's job(s) followed (with adaptive query
    # execution the shuffle's map stage is a job of its own)
    assert stages[0] == 1 and len(stages) > 1 and max(stages) > 1
    table = Table.open(str(tmp_path / "table"))
    assert {r["id"]: r["amount"] for r in table.scan().to_pylist()} == {k: 300 + k for k in range(20)}
    versions = Counter((r["_commit_version"], r["id"]) for r in table.changes(start_version=0).to_pylist())
    assert set(versions.values()) == {1}   # every key changed once per version
    assert len(table.storage.list("data/")) == len([f for f in table.plan()])  # the first staging's files are gone


def test_appends_of_several_tasks_need_no_shuffle(spark, broker, tmp_path, monkeypatch):  # noqa: F811
    """Append mode keeps no last change per key across tasks: one stage whatever the keys."""
    monkeypatch.setattr(runner, "ONE_TASK_MAX_RECORDS", 0)
    records = [(p, {"id": 10 * p + k, "amount": k}) for k in range(10) for p in range(PARTITIONS)]
    make_topic(broker, "appends", records)
    summary, stages = run_once(spark, broker, "appends", tmp_path, mode="append")
    assert summary.records == len(records) and stages == [1]
    assert Table.open(str(tmp_path / "table")).scan().num_rows == len(records)
