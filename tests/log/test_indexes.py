"""OffsetIndex, TimeIndex and TransactionIndex: lookups, lazy files, validation on load, rename."""
from __future__ import annotations

import struct
from pathlib import Path

from tidelake.log.offset_index import OffsetIndex
from tidelake.log.time_index import TimeIndex
from tidelake.log.transaction_index import AbortedTxn, TransactionIndex


def test_offset_index_lookup_flush_and_load(tmp_path: Path):
    idx = OffsetIndex(tmp_path / "x.index", base_offset=100)
    assert idx.lookup(150) is None and idx.last_position == 0
    idx.append(104, 476)
    idx.append(104, 900)  # not past the last entry: ignored
    idx.append(110, 1200)
    assert len(idx) == 2 and idx.last_position == 1200
    assert idx.lookup(103) is None
    assert idx.lookup(104) == (4, 476) and idx.lookup(109) == (4, 476) and idx.lookup(200) == (10, 1200)
    assert not idx.path.exists()  # written lazily
    idx.flush()
    assert struct.unpack(">iiii", idx.path.read_bytes()) == (4, 476, 10, 1200)
    idx.append(120, 2000)
    idx.flush()  # only the new entry is appended
    assert idx.path.stat().st_size == 24
    loaded = OffsetIndex(idx.path, base_offset=100)
    assert loaded.load(log_size=4096) and list(loaded.positions) == [476, 1200, 2000]
    assert not OffsetIndex(idx.path, 100).load(log_size=2000)  # a position outside the .log
    idx.path.write_bytes(struct.pack(">iiii", 5, 10, 4, 20))  # offsets going backwards
    assert not OffsetIndex(idx.path, 100).load(log_size=4096)
    idx.path.write_bytes(b"\0" * 7)  # torn entry
    assert not OffsetIndex(idx.path, 100).load(log_size=4096)
    assert not OffsetIndex(tmp_path / "missing.index", 100).load(log_size=4096)
    idx.reset()
    assert len(idx) == 0 and not idx.path.exists()


def test_time_index_keeps_only_new_maxima(tmp_path: Path):
    ti = TimeIndex(tmp_path / "x.timeindex", base_offset=10)
    assert ti.last_entry is None and ti.lookup(5) is None
    for ts, off in [(100, 10), (300, 11), (200, 12), (300, 13), (400, 14)]:
        ti.append(ts, off)
    assert list(ti.timestamps) == [100, 300, 400] and len(ti) == 3
    assert ti.last_entry == (400, 14)
    assert ti.lookup(100) is None  # nothing below 100
    assert ti.lookup(101) == 10 and ti.lookup(300) == 10 and ti.lookup(301) == 11
    ti.flush()
    again = TimeIndex(ti.path, base_offset=10)
    assert again.load() and list(again.relative_offsets) == [0, 1, 4]
    ti.path.write_bytes(struct.pack(">qiqi", 5, 0, 5, 1))  # not strictly increasing
    assert not TimeIndex(ti.path, 10).load()
    target = tmp_path / "y.timeindex"
    ti.rename(target)
    assert ti.path == target and target.exists() and not (tmp_path / "x.timeindex").exists()


def test_transaction_index_append_truncate_and_torn_tail(tmp_path: Path):
    txn = TransactionIndex(tmp_path / "x.txnindex")
    a, b = AbortedTxn(7, 0, 5, 6), AbortedTxn(8, 3, 9, 9)
    txn.append(a)
    txn.append(b)
    assert txn.contains_marker(9) and not txn.contains_marker(6)
    assert txn.overlapping(6, 10) == [b] and txn.overlapping(0, 3) == [a] and txn.overlapping(10, 20) == []
    with open(txn.path, "ab") as f:
        f.write(b"\1\2\3")  # a torn last entry is ignored
    loaded = TransactionIndex(txn.path)
    loaded.load()
    assert loaded.entries == [a, b]
    loaded.truncate_to(9)  # the marker at 9 is cut off
    assert loaded.entries == [a]
    reread = TransactionIndex(txn.path)
    reread.load()
    assert reread.entries == [a]
    missing = TransactionIndex(tmp_path / "none.txnindex")
    missing.load()
    assert missing.entries == []
