"""Pinned versions and pickling: a Snapshot (or a Table) shipped to another process reads buckets and
stages files without reading the metadata log again; per-bucket scans."""
from __future__ import annotations

import os
import pickle

import pyarrow as pa

from tidelake.table import Snapshot, Table, bucket_ids

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64())])


def rows(ids, amount=0):
    return pa.table({"id": pa.array(ids, pa.int64()), "amount": pa.array([amount] * len(ids), pa.int64())})


def as_dict(t):
    return {r["id"]: r["amount"] for r in t.to_pylist()}


def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"write.bucket.num": "4", "clustering.auto": "false"})
    t.upsert(rows(range(40), 1))
    t.delete([3, 4])
    t.upsert(rows(range(30, 50), 2))
    return t


def test_scan_by_bucket(tmp_path):
    t = table(tmp_path)
    whole = as_dict(t.scan())
    parts = {b: as_dict(t.scan(buckets={b})) for b in range(4)}
    assert sum(len(p) for p in parts.values()) == len(whole) and {k: v for p in parts.values() for k, v in p.items()} == whole
    for b, p in parts.items():
        keys = pa.table({"id": pa.array(list(p), pa.int64())})
        assert set(bucket_ids(keys, ["id"], 4).tolist()) <= {b}
    assert as_dict(t.scan(version=1, buckets={0, 1})) == {k: 1 for k in range(40) if bucket_ids(rows([k]), ["id"], 4)[0] in (0, 1)}
    assert as_dict(t.scan(version=t.version, buckets={2})) == parts[2]


def test_snapshot_pickles_small_and_needs_no_log(tmp_path):
    t = table(tmp_path)
    snap = t.snapshot(version=2)
    blob = pickle.dumps(snap)
    os.rename(os.path.join(t.path, "_tidelake_log"), os.path.join(t.path, "_moved"))   # no log reachable
    copy = pickle.loads(blob)
    assert isinstance(copy, Snapshot) and copy.version == 2 and copy.schema == t.schema
    assert as_dict(copy.scan(buckets={1})) == as_dict(snap.scan(buckets={1}))
    assert as_dict(copy.scan()) == {k: 1 for k in range(40) if k not in (3, 4)}
    assert {p.bucket for p in copy.plan(filter={"id": 7})} == set(bucket_ids(rows([7]), ["id"], 4).tolist())
    staged = copy.stage_files(rows([100, 101], 5))
    assert staged and all(os.path.exists(os.path.join(t.path, f.path)) for f in staged)
    os.rename(os.path.join(t.path, "_moved"), os.path.join(t.path, "_tidelake_log"))
    v = t.commit_staged(staged, read_version=snap.version)
    assert as_dict(t.scan())[100] == 5 and t.version == v
    assert len(blob) < len(pickle.dumps(t))      # only the files live at that version


def test_table_pickles_with_its_metadata(tmp_path):
    t = table(tmp_path)
    copy = pickle.loads(pickle.dumps(t))
    assert copy.path == t.path and copy.primary_key == ["id"]
    assert as_dict(copy.scan(version=2, buckets={0})) == as_dict(t.scan(version=2, buckets={0}))
    copy.upsert(rows([7], 9))                     # a working table: commits, and t sees them once it refreshes
    t.refresh()
    assert as_dict(t.scan())[7] == 9
