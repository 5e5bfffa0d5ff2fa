"""The net change an incremental step reads: each changed key's before- and after-image over (start, end],
from one read of the change feed with before-images (not a scan of the start snapshot)."""
from __future__ import annotations

import os

import pyarrow as pa

from tidelake.spark.increment import net_change
from tidelake.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.int64())])


def _by_id(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def test_net_change_nets_out_the_versions_inside_the_range(tmp_path):
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"write.bucket.num": "2"})
    start = t.upsert(pa.table({"id": [1, 2, 3, 4], "region": list("abcd"), "amount": [10, 20, 30, 40]}))
    t.upsert(pa.table({"id": [1, 5], "region": ["a", "e"], "amount": [11, 50]}))
    t.upsert(pa.table({"id": [1, 6], "region": ["a", "f"], "amount": [12, 60]}))
    t.delete(pa.table({"id": [2, 6, 9]}))
    end = t.upsert(pa.table({"id": [2, 3], "region": ["b", "c"], "amount": [21, 31]}))
    net = net_change(t, start, end)
    # 1 updated twice, 2 deleted and back, 3 updated, 5 new, 6 new and deleted (before none, after none)
    assert _by_id(net.before) == [{"id": 1, "region": "a", "amount": 10}, {"id": 2, "region": "b", "amount": 20},
                                  {"id": 3, "region": "c", "amount": 30}]
    assert _by_id(net.after) == [{"id": 1, "region": "a", "amount": 12}, {"id": 2, "region": "b", "amount": 21},
                                 {"id": 3, "region": "c", "amount": 31}, {"id": 5, "region": "e", "amount": 50}]
    assert sorted(net.keys.column("id").to_pylist()) == [1, 2, 3, 5, 6]
    assert net.changes == 8   # every upsert and every delete of a live key (2 + 2 + 2 + 2)


def test_with_stored_change_files_the_start_snapshot_is_not_read(tmp_path):
    """A ``changelog.producer=lookup`` table's commits wrote the images: the net change reads those, not the
    table's files as of the range start (so its cost follows the change, not the table)."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"write.bucket.num": "1", "changelog.producer": "lookup",
                                                          "clustering.auto": "false"})
    start = t.insert_into(pa.table({"id": list(range(100)), "region": ["r"] * 100, "amount": list(range(100))},
                                   schema=SCHEMA))
    older = [fe.file.path for fe in t.metadata.files.values()]
    end = t.upsert(pa.table({"id": [7, 1000], "region": ["s", "s"], "amount": [70, 1]}, schema=SCHEMA))
    for path in older:   # the start snapshot's only file, gone: a read of it would fail
        os.remove(os.path.join(t.path, path))
    net = net_change(t, start, end)
    assert net.before.to_pylist() == [{"id": 7, "region": "r", "amount": 7}]
    assert _by_id(net.after) == [{"id": 7, "region": "s", "amount": 70}, {"id": 1000, "region": "s", "amount": 1}]
