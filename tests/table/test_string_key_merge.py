"""A string primary key merged across several delta files: each file's dictionary differs."""
from __future__ import annotations

import pyarrow as pa

from tidelake.table import Table


def test_three_deltas_of_string_keys_merge(tmp_path):
    t = Table.create(str(tmp_path / "t"), pa.schema([("k", pa.string()), ("v", pa.int64())]), ["k"],
                     {"write.bucket.num": "1"})
    t.upsert(pa.table({"k": ["a", "b"], "v": [1, 2]}))
    t.upsert(pa.table({"k": ["b", "a"], "v": [3, 4]}))
    t.upsert(pa.table({"k": ["a"], "v": [5]}))
    t.upsert(pa.table({"k": ["c", "b"], "v": [6, 7]}))
    assert sorted(t.scan().to_pylist(), key=lambda r: r["k"]) == [
        {"k": "a", "v": 5}, {"k": "b", "v": 7}, {"k": "c", "v": 6}]
