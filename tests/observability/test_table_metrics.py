"""TableCollector on a real table, scraped over HTTP from a MetricsServer: versions, files and bytes per
bucket and level, compaction and clustering runs, commit conflicts."""
from __future__ import annotations

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from metrics_scrape import scrape, value
from tidelake.observability.server import MetricsServer
from tidelake.observability.table_collector import TableCollector
from tidelake.table import CommitConflict, Table


@pytest.fixture
def served_table(tmp_path):
    t = Table.create(str(tmp_path / "orders"), pa.schema([("id", pa.int64()), ("amount", pa.int64())]), ["id"],
                     {"write.bucket.num": "2", "clustering.auto": "false"}, maintenance="inline")
    registry = CollectorRegistry()
    registry.register(TableCollector(t))
    server = MetricsServer("127.0.0.1", 0, registry).start()
    try:
        yield t, server.url
    finally:
        server.stop()
        t.close()


def files(samples, **labels) -> float:
    want = {k: str(v) for k, v in labels.items()}
    return sum(v for (name, ls), v in samples.items() if name == "tidelake_table_files"
               and want.items() <= dict(ls).items())


def test_files_versions_and_maintenance_runs(served_table):
    t, url = served_table
    assert value(scrape(url), "tidelake_table_version", table="orders") == 0
    for i in range(3):
        with t.transaction() as tx:
            tx.upsert(pa.table({"id": list(range(i * 10, i * 10 + 10)), "amount": [i] * 10}))
    samples = scrape(url)
    assert value(samples, "tidelake_table_version", table="orders") == 3
    assert files(samples, kind="delta", level=0) == 6  # 3 commits x 2 buckets
    assert files(samples, kind="base") == 0
    delta_bytes = sum(v for (name, ls), v in samples.items() if name == "tidelake_table_size_bytes")
    assert delta_bytes > 0
    assert value(samples, "tidelake_table_maintenance_runs_total", table="orders", operation="cluster") == 0

    t.maintenance.cluster()
    samples = scrape(url)
    assert files(samples, kind="delta", level=0) == 0 and files(samples, kind="delta", level=1) == 2
    assert value(samples, "tidelake_table_maintenance_runs_total", table="orders", operation="cluster") == 1
    assert value(samples, "tidelake_table_maintenance_duration_seconds_count", table="orders",
                 operation="cluster") == 1

    t.maintenance.compact()
    samples = scrape(url)
    assert value(samples, "tidelake_table_version", table="orders") == 5
    assert files(samples, kind="delta") == 0 and files(samples, kind="base", bucket=0) == 1
    assert files(samples, kind="base", bucket=1) == 1
    assert value(samples, "tidelake_table_file_rows", table="orders", bucket=0, level=0, kind="base") + value(
        samples, "tidelake_table_file_rows", table="orders", bucket=1, level=0, kind="base") == 30
    assert value(samples, "tidelake_table_maintenance_runs_total", table="orders", operation="compact") == 1


def test_commit_conflicts_are_counted(served_table):
    t, url = served_table
    read_version = t.version
    staged = t.stage_files(pa.table({"id": [1, 2], "amount": [1, 2]}))
    other = Table.open(t.path)
    other.commit_staged(other.stage_files(pa.table({"id": [3], "amount": [3]})), operation="insert",
                        read_version=read_version)
    other.close()
    with pytest.raises(CommitConflict):  # insert into vs insert into, committed after this one read
        t.commit_staged(staged, operation="insert", read_version=read_version)
    samples = scrape(url)
    assert value(samples, "tidelake_table_commit_conflicts_total", table="orders") == 1
    assert value(samples, "tidelake_table_commit_retries_total", table="orders") == 0
