"""PartitionLog basics: offsets, reads, the seed-004 lookup, indexes, roll, retention, DeleteRecords."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from tidelake.errors import CorruptMessage, InvalidConfig, MessageTooLarge, OffsetOutOfRange
from tidelake.log import LogConfig, LogManager, PartitionLog
from tidelake.protocol.records import Record, build_batch, decode_records, iter_batches

NOW = 1_700_000_000_000


def batch(n: int = 1, *, ts: int = NOW, value: bytes = b"v", key: bytes | None = None, **kw) -> bytes:
    return build_batch([Record(i, ts, key, value) for i in range(n)], **kw)


def offsets_in(data: bytes) -> list[int]:
    return [r.offset for _pos, h in iter_batches(data) for r in decode_records(data, _pos, h)]


def all_offsets(log: PartitionLog, start: int | None = None) -> list[int]:
    out, off = [], log.log_start_offset if start is None else start
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20).data
        got = [o for o in offsets_in(data) if o >= off]
        assert got, f"no progress at {off}"
        out += got
        off = got[-1] + 1
    return out


def test_config_from_properties():
    cfg = LogConfig.from_properties({"segment.bytes": "1048576", "retention.ms": "-1",
                                     "cleanup.policy": "compact,delete", "unknown.key": "x",
                                     "message.timestamp.type": "LogAppendTime"})
    assert cfg.segment_bytes == 1048576 and cfg.retention_ms == -1
    assert cfg.compact and cfg.delete and cfg.log_append_time
    assert cfg.index_interval_bytes == 4096  # default kept
    assert LogConfig.from_properties(cfg.to_properties()) == cfg
    with pytest.raises(InvalidConfig):
        LogConfig.from_properties({"segment.bytes": "lots"})
    with pytest.raises(InvalidConfig):
        LogConfig.from_properties({"cleanup.policy": "shred"})


def test_offsets_are_assigned_and_read_back(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    r1 = log.append(batch(3), now_ms=NOW)
    r2 = log.append(batch(1) + batch(2), now_ms=NOW)  # two batches in one request
    assert (r1.base_offset, r1.last_offset, r1.log_append_time_ms, r1.duplicate) == (0, 2, -1, False)
    assert (r2.base_offset, r2.last_offset) == (3, 5)
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 6
    res = log.read(0, 1 << 20)
    assert offsets_in(res.data) == [0, 1, 2, 3, 4, 5]
    assert (res.high_watermark, res.last_stable_offset, res.log_start_offset) == (6, 6, 0)
    # offset in the middle of a batch returns the whole batch containing it
    assert offsets_in(log.read(1, 1 << 20).data) == [0, 1, 2, 3, 4, 5]
    assert offsets_in(log.read(5, 1 << 20).data) == [4, 5]
    assert log.read(6, 100).data == b""  # offset == LEO: empty
    with pytest.raises(OffsetOutOfRange):
        log.read(7, 100)
    # max_offset (HW / LSO) bounds the batches returned
    assert offsets_in(log.read(0, 1 << 20, max_offset=3).data) == [0, 1, 2]
    assert log.read(3, 1 << 20, max_offset=3).data == b""
    # writable buffers are patched in place instead of copied
    request = bytearray(batch(2))
    assert log.append(request, now_ms=NOW).base_offset == 6
    assert struct.unpack_from(">q", request)[0] == 6
    view = memoryview(bytearray(batch(1)))
    assert log.append(view, now_ms=NOW).base_offset == 8
    assert offsets_in(log.read(6, 1 << 20).data) == [6, 7, 8]
    log.close()


def test_read_max_bytes_and_min_one_batch(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    sizes = []
    for i in range(5):
        b = batch(1, value=b"x" * 500)
        sizes.append(len(b))
        log.append(b, now_ms=NOW)
    # only whole batches
    assert offsets_in(log.read(0, sizes[0] * 2 + 10).data) == [0, 1]
    # one batch even when it exceeds max_bytes
    assert offsets_in(log.read(0, 10).data) == [0]
    assert log.read(0, 10, min_one_batch=False).data == b""
    # sequential reads continue where the previous stopped
    assert offsets_in(log.read(2, sizes[0]).data) == [2]
    assert offsets_in(log.read(3, 1 << 20).data) == [3, 4]
    log.close()


def test_bad_input_is_rejected_and_nothing_written(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(max_message_bytes=1000))
    good = batch(2)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptMessage):
        log.append(bytes(good) + bytes(bad_crc), now_ms=NOW)  # all-or-nothing: the good one is not kept
    with pytest.raises(CorruptMessage):
        log.append(good[:-3], now_ms=NOW)  # truncated
    wrong_magic = bytearray(good)
    wrong_magic[16] = 1
    with pytest.raises(CorruptMessage):
        log.append(bytes(wrong_magic), now_ms=NOW)
    with pytest.raises(MessageTooLarge):
        log.append(batch(1, value=b"z" * 2000), now_ms=NOW)
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    assert log.append(good, now_ms=NOW).base_offset == 0
    log.close()


def test_log_append_time_is_stamped(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    r = log.append(batch(2, ts=5), now_ms=NOW + 7)
    assert r.log_append_time_ms == NOW + 7
    data = log.read(0, 1 << 20).data
    _pos, h = next(iter_batches(data))  # iter_batches validates the re-computed CRC
    assert h.timestamp_type == 1 and h.max_timestamp == NOW + 7
    assert [rec.timestamp for rec in decode_records(data)] == [NOW + 7, NOW + 7]
    log.close()


def _batch_of_size(base_count: int, target: int) -> bytes:
    """A batch of ``base_count`` records whose encoded size is exactly ``target`` bytes."""
    for common in range(0, target):
        for extra in range(0, 130):
            recs = [Record(i, NOW, None, b"a" * (common + (extra if i == base_count - 1 else 0)))
                    for i in range(base_count)]
            b = build_batch(recs)
            if len(b) == target:
                return b
            if len(b) > target:
                break
    raise AssertionError("no such batch")


def test_seed_004_lookup_of_offset_170417(tmp_path: Path):
    """Seed 004: segments 0, 170410, 239430; offset 170417 is in segment 170410; 170417-170410 = 7;
    the index entry <= 7 is [4, 476]; scanning the .log from byte 476 finds 170417. (An entry names the LAST
    offset of the batch at its position, as Kafka's: the seed's message 170414 is a batch of one record here.)"""
    cfg = LogConfig(max_message_bytes=1 << 22, index_interval_bytes=476)
    log = PartitionLog.open(tmp_path / "topic-0", cfg)
    log.append(batch(170410, value=None), now_ms=NOW)  # offsets 0..170409
    log.roll(NOW)
    first = _batch_of_size(4, 476)  # offsets 170410..170413, bytes [0, 476)
    assert log.append(first, now_ms=NOW).base_offset == 170410
    single = batch(1)
    assert log.append(single, now_ms=NOW).base_offset == 170414  # 170414 at byte 476
    assert log.append(batch(6), now_ms=NOW).base_offset == 170415  # 170415..170420 after it
    log.append(batch(239430 - 170421, value=None), now_ms=NOW)
    log.roll(NOW)
    log.append(batch(5), now_ms=NOW)
    names = sorted(p.name for p in (tmp_path / "topic-0").glob("*.index"))
    assert names == ["00000000000000000000.index", "00000000000000170410.index",
                     "00000000000000239430.index"]
    idx = (tmp_path / "topic-0" / "00000000000000170410.index").read_bytes()
    assert struct.unpack_from(">ii", idx, 0) == (4, 476)

    found = log.locate(170417)
    assert found.segment_base_offset == 170410
    assert found.index_entry == (4, 476)
    assert found.position == 476 + len(single) and found.batch_base_offset == 170415   # scanned from 476
    assert 170417 in offsets_in(log.read(170417, 4096).data)
    # the same answer after reopening from the files
    log.close()
    log = PartitionLog.open(tmp_path / "topic-0", cfg)
    assert log.locate(170417).index_entry == (4, 476)
    assert log.locate(239431).segment_base_offset == 239430
    assert log.locate(5).segment_base_offset == 0
    log.close()


def test_sparse_index_and_time_index(tmp_path: Path):
    cfg = LogConfig(index_interval_bytes=1024)
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for i in range(200):
        log.append(batch(2, ts=NOW + i * 10, value=b"p" * 100), now_ms=NOW)
    seg = log.active_segment
    # about one entry per 1024 bytes, strictly increasing
    assert 15 <= len(seg.offset_index.relative_offsets) <= len(seg.offset_index.positions) <= 1 + seg.size // 1024
    assert list(seg.offset_index.relative_offsets) == sorted(set(seg.offset_index.relative_offsets))
    log.flush()
    assert seg.offset_index.path.stat().st_size == 8 * len(seg.offset_index.relative_offsets)
    assert seg.time_index.path.stat().st_size == 12 * len(seg.time_index.timestamps)
    # every offset is found, through the index and the forward scan
    for off in range(0, 400, 7):
        assert off in offsets_in(log.read(off, 1).data)
    # timestamps: batch i holds offsets 2i, 2i+1 at NOW + 10i
    assert log.offset_for_timestamp(NOW) == (0, NOW)
    assert log.offset_for_timestamp(NOW + 55) == (12, NOW + 60)
    assert log.offset_for_timestamp(NOW + 1990) == (398, NOW + 1990)
    assert log.offset_for_timestamp(NOW + 5000) is None
    assert log.max_timestamp() == (398, NOW + 1990)
    log.close()


def test_timestamp_lookup_with_out_of_order_timestamps(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    for ts in [100, 300, 200, 250, 400, 50]:
        log.append(batch(1, ts=ts), now_ms=NOW)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(220) == (1, 300)
    assert log.offset_for_timestamp(301) == (4, 400)
    assert log.max_timestamp() == (4, 400)
    log.close()


def test_roll_by_size_and_by_time(tmp_path: Path):
    one = len(batch(1, value=b"x" * 100))
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=one * 3))
    for _ in range(10):
        log.append(batch(1, value=b"x" * 100), now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert all(s.size <= one * 3 for s in log.segments)
    files = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert files == [f"{b:020d}.log" for b in (0, 3, 6, 9)]
    log.close()

    log = PartitionLog.open(tmp_path / "u-0", LogConfig(segment_ms=1000))
    log.append(batch(1, ts=NOW), now_ms=NOW)
    log.append(batch(1, ts=NOW + 500), now_ms=NOW)
    assert len(log.segments) == 1
    log.append(batch(1, ts=NOW + 1500), now_ms=NOW)  # record time 1500 ms after the first batch
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.maybe_roll(NOW + 10)
    assert len(log.segments) == 2
    log.maybe_roll(NOW + 1001)  # wall clock since the segment's first append
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    log.maybe_roll(NOW + 5000)  # empty active segment: no roll
    assert len(log.segments) == 3
    log.close()


def test_retention_by_time_and_size(tmp_path: Path):
    one = len(batch(1, value=b"x" * 100))
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=one * 2, retention_ms=10_000))
    for i in range(7):
        log.append(batch(1, ts=NOW + i * 1000, value=b"x" * 100), now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    assert log.apply_retention(NOW + 10_500) == 0  # newest in segment 0 is NOW+1000
    assert log.apply_retention(NOW + 11_001) == 1
    assert log.log_start_offset == 2 and [s.base_offset for s in log.segments] == [2, 4, 6]
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 100)
    # everything expired: the active segment stays
    assert log.apply_retention(NOW + 10**9) == 2
    assert [s.base_offset for s in log.segments] == [6]
    assert log.log_start_offset == 6 and log.log_end_offset == 7
    assert not (tmp_path / "t-0" / f"{0:020d}.log").exists()
    log.close()

    log = PartitionLog.open(tmp_path / "s-0", LogConfig(segment_bytes=one * 2, retention_bytes=one * 3))
    for i in range(7):
        log.append(batch(1, value=b"x" * 100), now_ms=NOW)
    assert log.apply_retention(NOW) == 2  # 7 batches; drop 2-batch segments while >= 3 batches remain
    assert [s.base_offset for s in log.segments] == [4, 6] and log.log_start_offset == 4
    assert all_offsets(log) == [4, 5, 6]
    log.close()
    # retention needs cleanup.policy=delete
    log = PartitionLog.open(tmp_path / "c-0", LogConfig(segment_bytes=one, retention_ms=0,
                                                        cleanup_policy="compact"))
    for i in range(3):
        log.append(batch(1, key=b"k", value=b"x" * 100), now_ms=NOW)
    assert log.apply_retention(NOW + 10**9) == 0
    log.close()


def test_delete_records_moves_log_start(tmp_path: Path):
    one = len(batch(1))
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=one * 3))
    for _ in range(10):
        log.append(batch(1), now_ms=NOW)
    assert log.delete_records_before(4) == 4
    assert log.log_start_offset == 4
    assert [s.base_offset for s in log.segments] == [3, 6, 9]  # segment 3 still holds 4, 5
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 100)
    assert all_offsets(log) == [4, 5, 6, 7, 8, 9]
    assert log.delete_records_before(2) == 4  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(11)  # beyond the high watermark
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=one * 3))
    assert log.log_start_offset == 4  # checkpointed
    assert log.delete_records_before(10) == 10  # everything: the log is empty but keeps its offsets
    assert log.log_end_offset == 10 and log.read(10, 100).data == b""
    assert log.append(batch(1), now_ms=NOW).base_offset == 10
    log.close()


def test_truncate_to(tmp_path: Path):
    one = len(batch(2))
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=one * 2))
    for _ in range(6):
        log.append(batch(2), now_ms=NOW, leader_epoch=0)
    log.append(batch(2), now_ms=NOW, leader_epoch=3)  # 12, 13
    assert log.leader_epoch_cache.entries == [(0, 0), (3, 12)]
    log.truncate_to(7)  # mid-batch: the batch 6..7 goes too
    assert log.log_end_offset == 6
    assert all_offsets(log) == [0, 1, 2, 3, 4, 5]
    assert log.leader_epoch_cache.entries == [(0, 0)]
    assert log.append(batch(1), now_ms=NOW).base_offset == 6
    log.close()
    text = (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n1\n0 0\n"


def test_truncate_into_the_batch_holding_the_log_start(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append(batch(2), now_ms=NOW)  # 0, 1
    log.append(batch(4), now_ms=NOW)  # 2..5
    log.delete_records_before(3)
    log.truncate_to(4)  # the batch 2..5 holds the log start: the log becomes empty at 3
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert log.read(3, 100).data == b""
    assert log.append(batch(1), now_ms=NOW).base_offset == 3
    log.truncate_to(1)  # below the log start: empty, starting at 1
    assert (log.log_start_offset, log.log_end_offset) == (1, 1)
    log.close()


def test_log_manager(tmp_path: Path):
    mgr = LogManager(tmp_path)
    mgr.load()
    a = mgr.create("orders", 0, LogConfig())
    b = mgr.create("orders", 1, LogConfig())
    c = mgr.create("my-topic", 2, LogConfig())
    a.append(batch(3), now_ms=NOW)
    c.append(batch(1), now_ms=NOW)
    assert mgr.get("orders", 0) is a and mgr.get("orders", 7) is None
    assert set(mgr.all_logs()) == {("orders", 0), ("orders", 1), ("my-topic", 2)}
    assert sorted(os.listdir(tmp_path)) == ["my-topic-2", "orders-0", "orders-1"]
    mgr.run_maintenance(NOW)
    mgr.close()

    mgr = LogManager(tmp_path)
    mgr.load()
    assert set(mgr.all_logs()) == {("orders", 0), ("orders", 1), ("my-topic", 2)}
    assert mgr.get("orders", 0).log_end_offset == 3
    assert mgr.get("my-topic", 2).log_end_offset == 1
    mgr.delete_topic("orders")
    assert sorted(os.listdir(tmp_path)) == ["my-topic-2"]
    assert mgr.get("orders", 0) is None and b.closed
    mgr.close()


def test_flush_policy_messages_and_ms(tmp_path: Path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(flush_messages=5))
    log.append(batch(2), now_ms=NOW)
    log.append(batch(2), now_ms=NOW)
    assert log.active_segment.unflushed and not (d / "recovery-point").exists()
    log.append(batch(1), now_ms=NOW)  # 5 messages: fsync
    assert not log.active_segment.unflushed
    assert (d / "recovery-point").read_text() == "5\n"
    log.close()

    d = tmp_path / "u-0"
    clock = [NOW]
    log = PartitionLog.open(d, LogConfig(flush_ms=1000), clock_ms=lambda: clock[0])
    log.append(batch(3), now_ms=NOW)
    log.maybe_flush(NOW + 999)
    assert log.active_segment.unflushed
    log.maybe_flush(NOW + 1000)
    assert not log.active_segment.unflushed and (d / "recovery-point").read_text() == "3\n"
    log.close()

    # default: left to the OS, but closed segments are checkpointed by maintenance
    one = len(batch(1))
    d = tmp_path / "v-0"
    log = PartitionLog.open(d, LogConfig(segment_bytes=one * 2))
    for _ in range(5):
        log.append(batch(1), now_ms=NOW)
    assert log.active_segment.unflushed and log.segments[0].unflushed
    log.maybe_flush(NOW)
    assert not log.segments[0].unflushed and not log.segments[1].unflushed
    assert log.active_segment.unflushed
    assert (d / "recovery-point").read_text() == "4\n"
    log.close()


def test_roll_when_an_index_is_full(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_index_bytes=8 * 3, index_interval_bytes=1))
    for i in range(10):
        log.append(batch(1, ts=NOW + i), now_ms=NOW)
    assert all(len(s.offset_index.relative_offsets) <= 3 for s in log.segments)
    assert len(log.segments) >= 3
    assert all_offsets(log) == list(range(10))
    log.close()
