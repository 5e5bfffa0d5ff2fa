"""Reads by deletion vectors (reader._filter_by_vectors): the kept positions of a file are its vector's complement,
a table of a base of several row groups, upserts and deletes reads by them as the key merge reads it, and a vectors
file marking a row past the end of its data file fails the read in one line naming both (and `table check`
names it)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap

from tidelake.table import CorruptDataFile, Table
from tidelake.table.check import check_table
from tidelake.table.deletion_vectors import kept_positions, write_vectors
from tidelake.table.reader import MergeOnReadReader
from tidelake.table.scan import ScanPlanner

ROWS = 300_000   # more than one row group of a data file (128 Ki rows)


def test_kept_positions_are_the_complement_of_the_vector():
    marked = [0, 5, 6, 99]
    assert kept_positions(BitMap(marked), 100).tolist() == [i for i in range(100) if i not in marked]
    assert kept_positions(BitMap(), 3).tolist() == [0, 1, 2]
    assert kept_positions(BitMap(range(4)), 4).tolist() == []


def test_a_read_by_vectors_is_the_key_merge_s_read(tmp_path):
    t = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("amount", pa.int64()),
                                                       ("category", pa.string())]), ["id"],
                     {"write.bucket.num": "1", "clustering.auto": "false", "deletion-vectors.enabled": "true"})
    ids = np.arange(ROWS, dtype=np.int64)
    t.insert_into(pa.table({"id": ids, "amount": ids, "category": pa.array([f"c{i % 7}" for i in range(ROWS)])}))
    t.compact()
    changed = ids[::3]
    t.upsert(pa.table({"id": changed, "amount": -changed, "category": pa.array(["new"] * len(changed))}))
    t.delete(pa.table({"id": ids[:10]}))
    md = t.metadata
    plans = ScanPlanner(md).snapshot(md.version)
    assert [p.vectors is not None for p in plans] == [True]
    by_key = MergeOnReadReader(t.storage, md.primary_key).read_snapshot(
        [replace(p, vectors=None) for p in plans], md.schema, md.schema.names, None, None)
    got = t.scan()
    assert got.num_rows == ROWS - 10
    assert got.sort_by("id").equals(by_key.sort_by("id"))
    assert got.filter(pa.compute.equal(got.column("id"), 12)).column("amount").to_pylist() == [-12]
    t.close()


def test_a_vector_marking_a_row_past_its_file_fails_the_read_naming_both(tmp_path):
    t = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("amount", pa.int64())]), ["id"],
                     {"write.bucket.num": "1", "clustering.auto": "false", "deletion-vectors.enabled": "true"})
    t.upsert(pa.table({"id": np.arange(100), "amount": np.zeros(100, np.int64)}))
    t.upsert(pa.table({"id": np.arange(0, 100, 2), "amount": np.ones(50, np.int64)}))
    plan = ScanPlanner(t.metadata).snapshot(t.version)[0]
    first = plan.files[0].file
    damaged = write_vectors(t.storage, 0, [fe.file.path for fe in plan.files], {first.path: BitMap([1, 100])})
    t.storage.write(plan.vectors.path, t.storage.read(damaged.path))   # (the file the log names, now damaged)
    with pytest.raises(CorruptDataFile, match=f"{plan.vectors.path}: it marks row 100 of {first.path}, which has "
                                              f"100 rows"):
        t.scan()
    problems = check_table(t.path).problems
    assert [p.path.endswith(plan.vectors.path) and f"row 100 of {first.path}, which has 100 rows" in p.problem
            for p in problems] == [True]
    t.close()
