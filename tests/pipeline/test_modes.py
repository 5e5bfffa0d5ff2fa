"""Each offset mode's semantics (SPEC P2, seed 001) with real Spark, tidelake's broker and a real table.

A topic of 4 partitions x 40 records (ids 0..159, plain JSON upserts); the pipeline reads 10 records per
partition per batch (max rate 20/s x interval 0.5 s). A graceful interruption after 2 batches, then a
restart to completion (``once``), as in the paper's experiments. What reached the sink is counted with the
table's incremental read over its whole history: every change row, so a re-processed record shows twice.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.broker import EmbeddedBroker
from tidelake.spark.offset_stores import BrokerOffsets, ClientOffsetFile
from tidelake.spark import runner
from tidelake.spark.runner import Pipeline
from tidelake.table import Table

pytestmark = pytest.mark.spark

PARTITIONS, PER_PARTITION = 4, 40
RATE, INTERVAL = 20, 0.5
BATCH = PARTITIONS * int(RATE * INTERVAL)  # records per full batch: the paper's partitions x interval x rate


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b.bootstrap_servers


def make_topic(bootstrap: str, topic: str, records: int = PER_PARTITION, first_id: int = 0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(30)
    produce(bootstrap, topic, range(first_id, first_id + records * PARTITIONS))


def produce(bootstrap: str, topic: str, ids) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in ids:
        producer.produce(topic, json.dumps({"id": i, "amount": i * 10}).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def pipeline(spark, bootstrap, topic, mode, tmp_path, reader="auto", fmt="json", **extra) -> Pipeline:  # noqa: F811
    config = {"source": {"bootstrap_servers": bootstrap, "topic": topic, "group_id": f"g-{topic}",
                         "max_rate_per_partition": RATE, "batch_interval": INTERVAL, "reader": reader},
              "offsets": mode, "seo_dir": str(tmp_path / "gtoffset"),
              "sink": {"table": str(tmp_path / "table"), "format": fmt, "primary_key": ["id"],
                       "schema": "id long, amount long", "buckets": 2}, **extra}
    return Pipeline(config, spark=spark)


def sink_counts(table_path) -> tuple[int, int, Counter]:
    """(distinct ids, change rows, per-id count) over the table's whole history."""
    ids = Table.open(str(table_path)).changes(start_version=0).column("id").to_pylist()
    per_id = Counter(ids)
    return len(per_id), len(ids), per_id


def committed(bootstrap, topic):
    with BrokerOffsets(bootstrap, topic, f"g-{topic}") as b:
        return b.committed(), b.watermarks()[1]


def test_auto_commit_loses_unprocessed_records(spark, broker, tmp_path):  # noqa: F811
    make_topic(broker, "auto1")
    first = pipeline(spark, broker, "auto1", "auto", tmp_path).run(max_batches=2)
    assert first.records == 2 * BATCH
    group, latest = committed(broker, "auto1")
    # The paper's figure 6: CURRENT-OFFSET already at LOG-END-OFFSET while most data is unprocessed.
    assert group == latest == {p: PER_PARTITION for p in range(PARTITIONS)}
    second = pipeline(spark, broker, "auto1", "auto", tmp_path).run(once=True)
    assert second.records == 0  # nothing left to read after the restart: the rest is lost
    distinct, rows, _ = sink_counts(tmp_path / "table")
    assert (distinct, rows) == (2 * BATCH, 2 * BATCH)
    assert PARTITIONS * PER_PARTITION - distinct == 80  # lost


def test_commit_after_duplicates_one_batch(spark, broker, tmp_path):  # noqa: F811
    make_topic(broker, "after1")
    first = pipeline(spark, broker, "after1", "commit-after", tmp_path).run(max_batches=2)
    assert first.records == 2 * BATCH
    group, _ = committed(broker, "after1")
    assert group == {p: 10 for p in range(PARTITIONS)}  # commitAsync: batch 2's commit was still queued
    pipeline(spark, broker, "after1", "commit-after", tmp_path).run(once=True)
    distinct, rows, per_id = sink_counts(tmp_path / "table")
    assert distinct == PARTITIONS * PER_PARTITION  # nothing lost
    assert rows - distinct == BATCH  # duplicates = partitions x interval x rate (the paper's Table 1)
    assert sorted({n for n in per_id.values()}) == [1, 2]
    group, latest = committed(broker, "after1")
    assert group == latest  # a finished --once run commits what it did


def test_seo_graceful_restart_and_out_of_range_correction(spark, broker, tmp_path):  # noqa: F811
    """Also the runner's fallback reader (confluent-kafka in the executors instead of the data source)."""
    make_topic(broker, "seo1")
    gtoffset = ClientOffsetFile(tmp_path / "gtoffset", "g-seo1", "seo1")
    assert gtoffset.read() is None  # no file: start from earliest
    pipeline(spark, broker, "seo1", "seo", tmp_path, reader="direct").run(max_batches=2)
    assert gtoffset.read() == {p: 20 for p in range(PARTITIONS)}
    pipeline(spark, broker, "seo1", "seo", tmp_path, reader="direct").run(once=True)
    distinct, rows, _ = sink_counts(tmp_path / "table")
    assert distinct == rows == PARTITIONS * PER_PARTITION  # no loss, no duplicate (the paper's Table 2)
    assert gtoffset.read() == {p: PER_PARTITION for p in range(PARTITIONS)}
    assert committed(broker, "seo1")[0] == gtoffset.read()  # lag visible in the group too

    # High out-of-range: the file says more than the log holds -> corrected to the latest N, nothing read.
    gtoffset.write({p: 10_000 for p in range(PARTITIONS)})
    high = pipeline(spark, broker, "seo1", "seo", tmp_path, reader="direct").run(once=True)
    assert {c.kind for c in high.corrections} == {"high"}
    assert high.start_offsets == {p: PER_PARTITION for p in range(PARTITIONS)} and high.records == 0

    # Low out-of-range: retention (DeleteRecords) moved the log start past the file -> corrected to M.
    produce(broker, "seo1", range(1000, 1000 + 4 * 8))  # 8 more per partition: offsets 40..47
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.delete_records([TopicPartition("seo1", p, 44) for p in range(PARTITIONS)]).values():
        f.result(30)
    gtoffset.write({p: 5 for p in range(PARTITIONS)})
    low = pipeline(spark, broker, "seo1", "seo", tmp_path, reader="direct").run(once=True)
    assert {(c.kind, c.corrected) for c in low.corrections} == {("low", 44)}
    assert low.records == 4 * 4  # offsets 44..47 of each partition
    new_ids = set(Table.open(str(tmp_path / "table")).changes(start_version=Table.open(
        str(tmp_path / "table")).version - 1).column("id").to_pylist())
    assert new_ids == {1000 + i for i in range(32) if i // 4 >= 4}


def test_exactly_once_graceful_restart_resumes_from_table(spark, broker, tmp_path):  # noqa: F811
    """The first run reads through the ``tidelake-kafka`` data source, the restart inside the parsing tasks:
    the same reader either way."""
    make_topic(broker, "eo1")
    p = pipeline(spark, broker, "eo1", "exactly-once", tmp_path, reader="datasource")
    p.run(max_batches=2)
    table = Table.open(str(tmp_path / "table"))
    state = table.app_state(p.config.app_id)
    assert state["batch_id"] == 1 and state["extra"]["offsets"] == {str(p): 20 for p in range(PARTITIONS)}
    # The group's committed offsets do not matter for the restart: rewind them, the table wins.
    with BrokerOffsets(broker, "eo1", "g-eo1") as b:
        b.commit({p: 0 for p in range(PARTITIONS)})
    second = pipeline(spark, broker, "eo1", "exactly-once", tmp_path).run(once=True)
    assert second.start_offsets == {p: 20 for p in range(PARTITIONS)}
    distinct, rows, _ = sink_counts(tmp_path / "table")
    assert distinct == rows == PARTITIONS * PER_PARTITION
    table.refresh()  # the second run committed through its own table object
    assert table.app_state(p.config.app_id)["batch_id"] == 1 + len(second.batches)
    group, latest = committed(broker, "eo1")
    assert group == latest  # lag visible: the group is at the log end too
    assert sorted(table.scan().column("amount").to_pylist()) == [i * 10 for i in range(PARTITIONS * PER_PARTITION)]


@pytest.mark.parametrize("one_task_max_records", [runner.ONE_TASK_MAX_RECORDS, 0], ids=["one-task", "several-tasks"])
def test_debezium_changes_across_batches_fold_to_the_source_state(spark, broker, tmp_path, monkeypatch,  # noqa: F811
                                                                  one_task_max_records):
    """Creates, updates and deletes of the same keys spread over several batches (and within one batch):
    the table ends in the source database's state; events keyed by id as Debezium does. Small batches are
    one task; larger ones are read, parsed and staged by several tasks (each key in one of them): both plans."""
    monkeypatch.setattr(runner, "ONE_TASK_MAX_RECORDS", one_task_max_records)
    topic = f"dbz-{one_task_max_records}"
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker})
    source: dict[int, int] = {}
    events = []
    for step in range(120):
        key = (step * 7) % 30
        if key in source and step % 5 == 0:
            events.append((key, {"op": "d", "before": {"id": key, "amount": source.pop(key)}, "after": None}))
            events.append((key, None))  # the tombstone Debezium writes after a delete
        else:
            op = "u" if key in source else "c"
            source[key] = step
            events.append((key, {"op": op, "before": None, "after": {"id": key, "amount": step}}))
    for key, event in events:
        producer.produce(topic, None if event is None else json.dumps({"schema": {}, "payload": event}).encode(),
                         key=json.dumps({"id": key}).encode(), partition=key % PARTITIONS)
    assert producer.flush(30) == 0
    p = pipeline(spark, broker, topic, "exactly-once", tmp_path, fmt="debezium-json")
    summary = p.run(once=True)
    assert summary.records == len(events) and len(summary.batches) >= 3
    assert sum(b.deletes for b in summary.batches) > 0
    got = {r["id"]: r["amount"] for r in Table.open(str(tmp_path / "table")).scan().to_pylist()}
    assert got == source
