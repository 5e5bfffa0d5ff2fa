"""The exactly-once pipeline's driver reads the sink table's metadata log once per batch (its ``refresh()``)
plus what the commit's optimistic check must read: the batch id, the dead-letter totals and the fencing check
are answered from the metadata that refresh and the commit left, counted through the table's storage."""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from counting_storage import CountingStorage, log_reads
from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.broker import EmbeddedBroker
from tidelake.spark.runner import Pipeline
from tidelake.table import Table

pytestmark = pytest.mark.spark

PARTITIONS, PER_BATCH, BATCHES = 2, 5, 4


class CountedPipeline(Pipeline):
    """The pipeline with its sink table opened through a CountingStorage, and the storage calls made up to the
    end of each pass of its loop (``run``'s progress callback comes after each batch's commit and check)."""

    def open_table(self) -> Table:
        super().open_table().close()   # created as the pipeline creates it
        self.storage = CountingStorage(Table.open(self.config.sink.table).storage)
        return Table.open(self.storage)

    def marks(self) -> list[int]:
        self.ends: list[int] = []
        return self.ends

    def progress(self, _done: int, _total: int) -> None:
        self.ends.append(len(self.storage.calls))


def test_an_exactly_once_batch_reads_the_table_log_once_plus_its_commit(spark, tmp_path):  # noqa: F811
    with EmbeddedBroker(tmp_path / "broker") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for f in admin.create_topics([NewTopic("reads", PARTITIONS, 1)]).values():
            f.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(PARTITIONS * PER_BATCH * BATCHES):
            producer.produce("reads", json.dumps({"id": i, "amount": i}).encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        del producer
        pipeline = CountedPipeline({
            "source": {"bootstrap_servers": broker.bootstrap_servers, "topic": "reads", "group_id": "g-reads",
                       "max_rate_per_partition": PER_BATCH, "batch_interval": 1.0},
            "sink": {"table": str(tmp_path / "table"), "format": "json", "primary_key": ["id"],
                     "schema": "id long, amount long", "buckets": 1,
                     # maintenance in the commit: its reads counted with the batch they follow, not beside another
                     "properties": {"maintenance.mode": "inline", "clustering.auto": "false",
                                    "retention.auto": "false"}}}, spark=spark)
        pipeline.marks()
        summary = pipeline.run(once=True, progress=pipeline.progress)
    assert len(summary.batches) == BATCHES and summary.records == PARTITIONS * PER_BATCH * BATCHES
    calls = pipeline.storage.calls
    per_batch = [log_reads(calls[a:b]) for a, b in zip(pipeline.ends, pipeline.ends[1:])]
    for reads in per_batch:
        # refresh(): the next version looked for (absent) and the one after it (a gap check); the commit: the same
        # two lookups (its optimistic check), one listing before it publishes; then the table's maintenance after
        # the commit looks again (inline here, so that it falls in the batch it follows)
        assert [op for op, _ in reads] == ["read", "exists", "read", "exists", "list", "read", "exists"], reads
