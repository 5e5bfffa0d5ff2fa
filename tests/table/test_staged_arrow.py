"""Staged files as typed Arrow values (how a Spark task hands the files it staged to the driver), and key hashes."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from tidelake.table import DataFile, Table
from tidelake.table.writer import CHANGES, key_hashes, staged_file_type, staged_files_array, staged_files_from_arrow


def test_staged_files_go_through_arrow_unchanged(tmp_path):
    schema = pa.schema([("region", pa.string()), ("id", pa.int64()), ("amount", pa.float64())])
    table = Table.create(str(tmp_path / "t"), schema, ["region", "id"], {"write.bucket.num": "4"})
    rows = pa.table({"region": ["eu", "us", "eu", "ap"], "id": [1, 2, 3, 4], "amount": [1.5, 2.0, None, 4.0],
                     "_op": pa.array([0, 0, 1, 0], pa.int8())})
    files = table.writer.stage_files(rows, CHANGES, table.schema)
    assert len(files) > 1 and any(f.deletes for f in files)
    key_fields = [table.schema.field(k) for k in table.primary_key]
    array = staged_files_array(files, key_fields)
    assert array.type == staged_file_type(key_fields)
    assert array.type.field("key_min").type == pa.struct([("region", pa.string()), ("id", pa.int64())])
    assert staged_files_from_arrow(array) == files
    # as a list column of a task's row, several tasks' rows flattened (what the driver collects)
    column = pa.chunked_array([pa.ListArray.from_arrays(pa.array([0, len(files)], pa.int32()), array)] * 2)
    assert staged_files_from_arrow(column.combine_chunks().flatten()) == files + files
    # the files commit as they were staged
    table.commit_staged(staged_files_from_arrow(array))
    assert sorted(table.scan().column("id").to_pylist()) == [1, 2, 4]


def test_files_without_key_bounds_keep_none():
    files = [DataFile("data/bucket-00000/a.parquet", "delta", 0, 0, 3, 10, key_min=None, key_max=None,
                      changes="data/bucket-00000/change-a.parquet")]
    assert staged_files_from_arrow(staged_files_array(files, [pa.field("t", pa.timestamp("us"))])) == files


def test_equal_keys_have_equal_hashes_and_others_differ():
    keys = pa.table({"k": ["a", "b", "a", "c"], "n": [1, 1, 1, 1]})
    h = key_hashes(keys, ["k", "n"])
    assert h.dtype == np.uint64 and h[0] == h[2] and len(set(h.tolist())) == 3
    assert int(h.max()) < 1 << 63
