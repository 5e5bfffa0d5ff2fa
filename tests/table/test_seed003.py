"""Seed 003's worked examples, in the seed's terms: files d1, d2, d3 (deltas) and b1, b2 (bases)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from tidelake.table import Table
from tests.table.manual_clock import ManualClock


SCHEMA = pa.schema([("pk", pa.int64()), ("val", pa.string())])


def rows(t: pa.Table) -> list[tuple]:
    return sorted((r["pk"], r["val"]) for r in t.to_pylist())


def names(plan, files: dict[str, str]) -> list[str]:
    """Map planned file paths to the seed's names."""
    inv = {p: n for n, p in files.items()}
    return sorted(inv[f.path] for f in plan)


def new_paths(table: Table, before: set[str]) -> list[str]:
    return [f.path for f in table.plan() if f.path not in before]


@pytest.fixture
def seed_table(tmp_path):
    clock = ManualClock(0)
    t = Table.create(str(tmp_path / "tt2"), SCHEMA, ["pk"],
                     {"write.bucket.num": "1", "clustering.auto": "false"}, clock=clock)
    return t, clock


def test_time_travel_example(seed_table):
    """t2 and t4 run compaction producing b1 and b2; b1 drops (2,a) and keeps (2,b). Reading t1 reads
    d1; reading t2 reads b1 (three rows); reading t3 reads b1 + d3."""
    t, clock = seed_table
    files: dict[str, str] = {}
    clock.now = 1000                                  # t1
    t.upsert(pa.table({"pk": [1, 2], "val": ["a", "a"]}))
    files["d1"] = new_paths(t, set())[0]
    clock.now = 1500
    before = {f.path for f in t.plan()}
    t.upsert(pa.table({"pk": [2, 3], "val": ["b", "a"]}))
    files["d2"] = new_paths(t, before)[0]
    clock.now = 2000                                  # t2: compaction -> b1
    t.compact()
    files["b1"] = [f.path for f in t.plan() if f.kind == "base"][0]
    clock.now = 3000                                  # t3: d3
    before = {f.path for f in t.plan()}
    t.upsert(pa.table({"pk": [3, 4], "val": ["c", "a"]}))
    files["d3"] = new_paths(t, before)[0]
    clock.now = 4000                                  # t4: compaction -> b2
    t.compact()
    files["b2"] = [f.path for f in t.plan() if f.kind == "base"][0]

    assert names(t.plan(timestamp=1000), files) == ["d1"]
    assert rows(t.scan(timestamp=1000)) == [(1, "a"), (2, "a")]
    assert names(t.plan(timestamp=2000), files) == ["b1"]
    assert rows(t.scan(timestamp=2000)) == [(1, "a"), (2, "b"), (3, "a")]   # (2,a) eliminated in b1
    assert names(t.plan(timestamp=3000), files) == ["b1", "d3"]
    assert rows(t.scan(timestamp=3000)) == [(1, "a"), (2, "b"), (3, "c"), (4, "a")]
    assert names(t.plan(timestamp=4000), files) == ["b2"]
    assert rows(t.scan(timestamp=4000)) == rows(t.scan(timestamp=3000))
    # between commits a timestamp reads the version current then
    assert names(t.plan(timestamp=1999), files) == ["d1", "d2"]
    # b1 holds merged state only: one row per key, no delete/op column
    import pyarrow.parquet as pq
    b1 = pq.read_table(f"{t.path}/{files['b1']}")
    assert b1.column_names == ["pk", "val"] and b1.num_rows == 3
    # get_latest_version / get_latest_timestamp, n-th latest
    assert t.latest_version() == t.version == 5
    assert t.latest_version(2) == 4 and t.latest_timestamp(2) == 3000
    assert t.latest_timestamp() == 4000


def test_incremental_example(seed_table):
    """(t1-1, t1] reads d1; (t1-1, t2] reads d1 and d2; (t1, t2-1] is empty. Files written by
    clustering or compaction are never read by an incremental query."""
    t, clock = seed_table
    files: dict[str, str] = {}
    t1, t2 = 1000, 2000
    clock.now = t1
    t.upsert(pa.table({"pk": [1, 2], "val": ["a", "a"]}))
    files["d1"] = new_paths(t, set())[0]
    clock.now = t2
    before = {f.path for f in t.plan()}
    t.upsert(pa.table({"pk": [2], "val": ["b"]}))
    files["d2"] = new_paths(t, before)[0]
    clock.now = 2500
    t.cluster()                                   # d1 + d2 -> one L1 file
    clustered = [f for f in t.plan() if f.level == 1]
    assert len(clustered) == 1
    files["c1"] = clustered[0].path
    clock.now = 2600
    t.compact()                                   # -> base
    files["b1"] = [f.path for f in t.plan() if f.kind == "base"][0]

    assert names(t.plan(start_timestamp=t1 - 1, end_timestamp=t1), files) == ["d1"]
    assert rows(t.changes(start_timestamp=t1 - 1, end_timestamp=t1)) == [(1, "a"), (2, "a")]
    assert names(t.plan(start_timestamp=t1 - 1, end_timestamp=t2), files) == ["d1", "d2"]
    ch = t.changes(start_timestamp=t1 - 1, end_timestamp=t2)
    assert [(r["pk"], r["val"], r["_op"]) for r in ch.to_pylist()] == [(1, "a", "upsert"), (2, "a", "upsert"), (2, "b", "upsert")]
    assert ch.column("_commit_version").to_pylist() == [1, 1, 2]
    assert t.plan(start_timestamp=t1, end_timestamp=t2 - 1) == []
    assert t.changes(start_timestamp=t1, end_timestamp=t2 - 1).num_rows == 0
    # over the whole history: still only d1, d2 (not c1, not b1), although both are live now
    assert names(t.plan(start_version=0), files) == ["d1", "d2"]
    assert {f.path for f in t.plan()} == {files["b1"]}
    # by version, same (begin, end] semantics
    assert rows(t.changes(start_version=1, end_version=2)) == [(2, "b")]
    assert t.changes(start_version=2, end_version=4).num_rows == 0   # clustering and compaction add no rows
