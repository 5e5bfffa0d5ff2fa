"""``clustering.keep.every.row=false``: clustering keeps each key's newest row (deletes included), and the table
reads as the same table clustered with every row kept, at every version, by snapshot and by change feed, with
deletion vectors and without."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tidelake.table import Table
from tidelake.table.scan import ScanPlanner

KEYS = 40


def _table(path, keep_every_row: bool, vectors: bool) -> Table:
    return Table.create(str(path), pa.schema([("id", pa.int64()), ("amount", pa.int64())]), ["id"], {
        "write.bucket.num": "2", "clustering.l0.num": "3", "clustering.l1.num": "2", "maintenance.mode": "inline",
        "clustering.keep.every.row": str(keep_every_row).lower(), "deletion-vectors.enabled": str(vectors).lower()})


def _rows(t: Table, version: int) -> list[dict]:
    return t.scan(version=version).sort_by("id").to_pylist()


def _clustered_rows(t: Table) -> list[tuple[int, int, int]]:
    """(level, rows, distinct keys) of each live clustered file."""
    md = t.metadata
    out = []
    for plan in ScanPlanner(md).snapshot(md.version):
        for fe in plan.deltas:
            if fe.file.level > 0:
                ids = t.reader.read_file(fe.file, ["id"], md.schema, ops=False).column("id")
                out.append((fe.file.level, ids.length(), len(ids.unique())))
    return out


@pytest.mark.parametrize("vectors", [False, True])
def test_newest_rows_only_read_as_every_row(tmp_path, vectors):
    every, newest = _table(tmp_path / "every", True, vectors), _table(tmp_path / "newest", False, vectors)
    rng = np.random.default_rng(5)
    for step in range(16):
        ids = np.unique(rng.integers(0, KEYS, 12))
        for t in (every, newest):
            if step % 5 == 4:
                t.delete(pa.table({"id": ids[:4]}))
            else:
                t.upsert(pa.table({"id": ids, "amount": ids * 100 + step}))
            if step == 10:
                t.compact()
        assert newest.version == every.version
    clustered = _clustered_rows(newest)
    assert clustered and all(rows == keys for _, rows, keys in clustered)   # one row per key in every one
    assert any(rows > keys for _, rows, keys in _clustered_rows(every))       # (the default keeps the others)
    assert sum(r for _, r, _ in clustered) < sum(r for _, r, _ in _clustered_rows(every))
    for v in range(1, every.version + 1):
        assert _rows(newest, v) == _rows(every, v), f"version {v}"
    changes = [t.changes(start_version=0, end_version=t.version).drop_columns(["_commit_time"])   # (commit clocks)
               .sort_by([("_commit_version", "ascending"), ("id", "ascending")]).to_pylist() for t in (every, newest)]
    assert changes[0] == changes[1]
    for t in (every, newest):
        t.close()
