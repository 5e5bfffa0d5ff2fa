"""Log compaction (cleanup.policy=compact): latest value per key, tombstones, never the active segment."""
from __future__ import annotations

import os
import time
from pathlib import Path

from tidelake.clock import wall_ms
from tidelake.log import LogConfig, LogManager, PartitionLog
from tidelake.protocol.records import COMPRESSION_ZSTD, Record, build_batch, decode_records

NOW = 1_700_000_000_000


def kv(pairs: list[tuple[bytes, bytes | None]], ts: int = NOW, **kw) -> bytes:
    return build_batch([Record(i, ts, k, v) for i, (k, v) in enumerate(pairs)], **kw)


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _h, data in log.iter_batches(0) for r in decode_records(data)]


def compact_config(**kw) -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=kw.pop("segment_bytes", 400), **kw)


def test_latest_value_per_key_with_original_offsets(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", compact_config())
    expected_latest: dict[bytes, tuple[int, bytes]] = {}
    for i in range(40):
        key = b"k%d" % (i % 5)
        r = log.append(kv([(key, b"v%d" % i)]), now_ms=NOW)
        expected_latest[key] = (r.base_offset, b"v%d" % i)
    log.append(kv([(b"k0", b"in-active")]), now_ms=NOW)  # the active segment is never touched
    active_base = log.active_segment.base_offset
    before = records(log)
    stats = log.compact(NOW)
    assert stats.segments_cleaned > 0 and stats.records_removed > 0
    assert stats.bytes_after < stats.bytes_before
    after = records(log)
    closed = [(o, k, v) for o, k, v in after if o < active_base]
    # in the closed segments: exactly the latest record per key (among closed ones), offsets unchanged
    latest_closed: dict[bytes, tuple[int, bytes]] = {}
    for o, k, v in before:
        if o < active_base:
            latest_closed[k] = (o, v)
    assert sorted(closed) == sorted((o, k, v) for k, (o, v) in latest_closed.items())
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert log.log_end_offset == 41
    # offsets now have gaps; reads of a removed offset return the next batch
    gap = next(o for o in range(active_base) if o not in {r[0] for r in closed})
    data = log.read(gap, 1 << 20).data
    assert decode_records(data)[0].offset > gap
    # survives reopen
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", compact_config())
    assert records(log) == after
    assert log.compact(NOW).segments_cleaned == 0  # nothing new: no work
    log.close()


def test_partially_kept_batches_are_rebuilt_keeping_attributes(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", compact_config(segment_bytes=10_000))
    log.append(kv([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], compression=COMPRESSION_ZSTD,
                  producer_id=3, producer_epoch=0, base_sequence=0), now_ms=NOW)
    log.append(kv([(b"b", b"2")]), now_ms=NOW)
    log.roll(NOW)
    log.compact(NOW)
    hs = [(h, data) for h, data in log.iter_batches(0)]
    first, data = hs[0]
    assert first.compression == COMPRESSION_ZSTD and first.producer_id == 3
    assert [(r.offset, r.key) for r in decode_records(data)] == [(0, b"a"), (2, b"c")]
    assert first.base_offset == 0 and first.last_offset_delta == 2
    assert [(r.offset, r.key, r.value) for r in decode_records(hs[1][1])] == [(3, b"b", b"2")]
    log.close()


def test_tombstones_removed_after_delete_retention(tmp_path: Path):
    cfg = compact_config(delete_retention_ms=60_000)
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for i in range(10):
        log.append(kv([(b"k%d" % i, b"value-%d" % i)]), now_ms=NOW)
    log.append(kv([(b"k3", None), (b"k7", None)]), now_ms=NOW)  # delete two keys
    log.roll(NOW)
    log.append(kv([(b"other", b"x")]), now_ms=NOW)
    now = wall_ms()
    stats = log.compact(now)
    keys = {k: v for _o, k, v in records(log)}
    assert b"k3" in keys and keys[b"k3"] is None  # tombstone kept for delete.retention.ms
    assert stats.tombstones_removed == 0 and stats.records_removed == 2
    stats = log.compact(now + 60_001)
    keys = {k: v for _o, k, v in records(log)}
    assert b"k3" not in keys and b"k7" not in keys and stats.tombstones_removed == 2
    assert {k for k in keys} == {b"k%d" % i for i in range(10) if i not in (3, 7)} | {b"other"}
    log.close()


def test_min_compaction_lag_and_aborted_transactions(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", compact_config(min_compaction_lag_ms=1000,
                                                             segment_bytes=10_000))
    log.append(kv([(b"a", b"1")], ts=NOW), now_ms=NOW)
    log.append(kv([(b"a", b"aborted")], producer_id=8, producer_epoch=0, base_sequence=0,
                  transactional=True), now_ms=NOW)
    log.append_marker(producer_id=8, producer_epoch=0, commit=False, coordinator_epoch=0, now_ms=NOW)
    log.append(kv([(b"a", b"2")], ts=NOW), now_ms=NOW)
    log.roll(NOW)
    log.append(kv([(b"z", b"1")]), now_ms=NOW)
    assert log.compact(NOW + 10).segments_cleaned == 0  # too young
    log.compact(NOW + 1001)
    got = records(log)
    # the aborted record is gone, the latest committed "a" stays, the ABORT marker is kept
    assert [(o, k, v) for o, k, v in got if k == b"a"] == [(3, b"a", b"2")]
    assert any(h.is_control for h, _ in log.iter_batches(0))
    log.close()


def test_maintenance_compacts_compacted_topics_only(tmp_path: Path):
    mgr = LogManager(tmp_path)
    compacted = mgr.create("__consumer_offsets", 0, compact_config())
    plain = mgr.create("plain", 0, LogConfig(segment_bytes=400, retention_ms=-1))
    for log in (compacted, plain):
        for i in range(30):
            log.append(kv([(b"same-key", b"v%d" % i)]), now_ms=NOW)
    n_plain = len(records(plain))
    mgr.run_maintenance(NOW)
    assert len(records(plain)) == n_plain == 30
    assert len(records(compacted)) < 30
    mgr.close()
    assert not [p for p in os.listdir(tmp_path / "__consumer_offsets-0") if p.endswith((".cleaned", ".swap"))]


def _fill(log: PartitionLog, n: int, ts: int = NOW) -> None:
    for i in range(n):
        log.append(kv([(b"same-key", b"v%05d" % i)], ts=ts), now_ms=ts)


def test_dirty_ratio_decides_when_the_cleaner_runs(tmp_path: Path):
    """Kafka's scheduling: a pass only once dirty bytes / cleanable bytes reach min.cleanable.dirty.ratio."""
    log = PartitionLog.open(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=0.9))
    _fill(log, 40)
    assert log.maybe_compact(NOW) is not None  # nothing clean yet: ratio 1.0
    after_first = len(records(log))
    assert after_first < 40
    # one more closed segment: dirty is far below 90 % of what is cleanable now
    _fill(log, 6)
    assert log.maybe_compact(NOW) is None
    assert len(records(log)) == after_first + 6
    # the same with the ratio at 0: every new closed segment is compacted at once
    log.update_config(compact_config(min_cleanable_dirty_ratio=0.0))
    stats = log.maybe_compact(NOW)
    assert stats is not None and stats.records_removed > 0
    log.close()


def test_max_compaction_lag_forces_a_pass_below_the_ratio(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=1.0,
                                                              max_compaction_lag_ms=60_000))
    _fill(log, 40)
    log.compact(NOW)
    _fill(log, 6)
    n = len(records(log))
    assert log.maybe_compact(NOW + 1_000) is None  # ratio 1.0 is never reached once part is clean
    assert len(records(log)) == n
    assert log.maybe_compact(NOW + 61_000) is not None  # the oldest dirty record waited > 60 s
    assert len(records(log)) < n
    log.close()


def test_cleaner_disabled_and_config_bounds(tmp_path: Path):
    import pytest
    from tidelake.errors import InvalidConfig
    mgr = LogManager(tmp_path)
    log = mgr.create("c", 0, compact_config())
    _fill(log, 30)
    mgr.run_maintenance(NOW, compaction=False)  # log.cleaner.enable=false
    assert len(records(log)) == 30
    mgr.run_maintenance(NOW)
    assert len(records(log)) < 30
    mgr.close()
    with pytest.raises(InvalidConfig):
        LogConfig.from_properties({"min.cleanable.dirty.ratio": "1.5"})
    with pytest.raises(InvalidConfig):
        LogConfig.from_properties({"max.compaction.lag.ms": "0"})
    cfg = LogConfig.from_properties({"min.cleanable.dirty.ratio": "0.25", "max.compaction.lag.ms": "5000"})
    assert (cfg.min_cleanable_dirty_ratio, cfg.max_compaction_lag_ms) == (0.25, 5000)


CRASH_CHILD = """
import sys
from pathlib import Path
from tidelake.log import LogConfig, PartitionLog
from tidelake.protocol.records import Record, build_batch
log = PartitionLog.open(Path(sys.argv[1]), LogConfig(cleanup_policy="compact", segment_bytes=2048))
i = log.log_end_offset
while True:
    r = log.append(build_batch([Record(0, 1000, b"k%d" % (i % 7), b"v%d" % i)]), now_ms=1000)
    assert r.base_offset == i
    sys.stdout.write(f"{i}\\n")
    sys.stdout.flush()
    if i % 50 == 49:
        log.compact(1000)
    i += 1
"""


def test_sigkill_during_compaction_loses_no_latest_value(tmp_path: Path):
    """A process appending and compacting in a loop is killed; reopening gives, for every key, the
    latest acknowledged value (compaction swaps are crash-safe)."""
    import signal
    import subprocess
    import sys

    d = tmp_path / "c-0"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", CRASH_CHILD, str(d)], stdout=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(root)))
    acked: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 1500 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(int(line))
        assert len(acked) >= 1500, "child did not make progress"
        os.kill(proc.pid, signal.SIGKILL)
        acked += [int(x) for x in proc.stdout.read().split()]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        proc.stdout.close()
    log = PartitionLog.open(d, compact_config(segment_bytes=2048))
    assert log.log_end_offset >= acked[-1] + 1
    got = records(log)
    assert [o for o, _k, _v in got] == sorted({o for o, _k, _v in got})
    assert all(k == b"k%d" % (o % 7) and v == b"v%d" % o for o, k, v in got)
    latest = {b"k%d" % (i % 7): i for i in acked}
    kept = {o for o, _k, _v in got}
    assert all(o in kept for o in latest.values())
    assert not list(d.glob("*.cleaned")) and not list(d.glob("*.swap"))
    log.close()
