"""Maintenance off the event loop: the LogMaintenance thread, and PartitionLog's slow work (fsync,
compaction) running without the partition lock while appends and reads go on."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from tidelake.log import CompactionStats, LogCleaner, LogConfig, LogManager, PartitionLog
from tidelake.protocol.records import Record, build_batch, decode_records, validate_batch

NOW = 1_700_000_000_000
WAIT_S = 30  # upper bound for waits on other threads (never reached when things work)


def kv(key: bytes, value: bytes | None) -> bytes:
    return build_batch([Record(0, NOW, key, value)])


def fill(log: PartitionLog, n: int, keys: int = 3) -> None:
    """Record i has key k<i % keys> and value v<i> (i is also its offset on a fresh log)."""
    for i in range(n):
        log.append(kv(b"k%d" % (i % keys), b"v%05d" % i), now_ms=NOW)


def compact_config(**kw) -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=kw.pop("segment_bytes", 400), **kw)


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _h, data in log.iter_batches(0) for r in decode_records(data)]


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def hold_cleaner(monkeypatch, release_when):
    """Make LogCleaner.clean (the part of a pass that runs without the lock) wait until
    ``release_when()``; returns an Event set once a pass is held there."""
    started = threading.Event()
    original = LogCleaner.clean

    def held(self, job, should_stop):
        started.set()
        wait_for(release_when, "the test to release the cleaner")
        return original(self, job, should_stop)

    monkeypatch.setattr(LogCleaner, "clean", held)
    return started


class HeldCompaction:
    """A compaction pass of ``log`` on a thread of its own, held in the cleaner (``hold_cleaner``) until
    ``release_when()``; it is held there once the constructor returns."""

    def __init__(self, monkeypatch, log: PartitionLog, release_when):
        started = hold_cleaner(monkeypatch, release_when)
        self._stats: CompactionStats | None = None
        self.thread = threading.Thread(target=self._run, args=(log,))
        self.thread.start()
        assert started.wait(WAIT_S), "the pass never reached the cleaner"

    def _run(self, log: PartitionLog) -> None:
        self._stats = log.compact(NOW)

    def stats(self) -> CompactionStats:
        """What the pass did, once it ended."""
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the held pass never ended"
        return self._stats


def test_the_thread_runs_maintenance_and_run_maintenance_only_wakes_it(tmp_path: Path, monkeypatch):
    threads: list[str] = []
    original = PartitionLog.maybe_flush

    def recording(self, now_ms):
        threads.append(threading.current_thread().name)
        return original(self, now_ms)

    monkeypatch.setattr(PartitionLog, "maybe_flush", recording)
    mgr = LogManager(tmp_path)
    compacted = mgr.create("c", 0, compact_config())
    expiring = mgr.create("p", 0, LogConfig(segment_bytes=400, retention_ms=60_000))  # NOW is long past
    fill(compacted, 40, keys=1)
    fill(expiring, 40)
    segments_before = len(expiring.segments)
    mgr.start_maintenance(interval_ms=10)
    wait_for(lambda: compacted.cleaner.stats.segments_cleaned > 0 and len(expiring.segments) == 1,
             "compaction and retention on the maintenance thread")
    assert segments_before > 1 and expiring.log_start_offset == expiring.active_segment.base_offset
    assert len(records(compacted)) < 40
    seen = len(threads)
    mgr.run_maintenance()  # the old entry point: wakes the thread, does not run a pass here
    wait_for(lambda: len(threads) > seen, "a pass after the trigger")
    assert set(threads) == {"log-maintenance"}
    mgr.close()
    assert not any(t.name == "log-maintenance" for t in threading.enumerate())


def test_appends_and_reads_go_on_during_a_compaction_pass(tmp_path: Path, monkeypatch):
    log = PartitionLog.open(tmp_path / "t-0", compact_config())
    fill(log, 40)
    release = threading.Event()
    held = HeldCompaction(monkeypatch, log, release.is_set)
    # the pass holds no lock now: this thread appends (rolling segments) and reads
    for i in range(40, 60):
        r = log.append(kv(b"k%d" % (i % 3), b"v%05d" % i), now_ms=NOW)
        assert r.base_offset == i
        assert decode_records(log.read(i, 1 << 20).data)[0].offset == i
    assert held.thread.is_alive()  # still held: nothing above waited for it
    release.set()
    assert held.stats().segments_cleaned > 0
    got = records(log)
    assert [o for o, _k, _v in got] == sorted(o for o, _k, _v in got)
    assert all(v == b"v%05d" % o for o, _k, v in got)
    assert [o for o, _k, _v in got if o >= 40] == list(range(40, 60))  # every new record is kept
    log.close()


def test_a_truncation_during_a_pass_voids_it(tmp_path: Path, monkeypatch):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, compact_config())
    fill(log, 40)
    release = threading.Event()
    held = HeldCompaction(monkeypatch, log, release.is_set)
    log.truncate_to(5)
    release.set()
    assert held.stats().segments_cleaned == 0
    assert [(o, v) for o, _k, v in records(log)] == [(i, b"v%05d" % i) for i in range(5)]
    assert not [p for p in os.listdir(d) if p.endswith((".cleaned", ".swap"))]
    assert log.cleaner.clean_point == 0  # nothing was committed
    log.close()


def test_closing_the_manager_stops_a_pass_in_progress(tmp_path: Path, monkeypatch):
    mgr = LogManager(tmp_path)
    log = mgr.create("c", 0, compact_config())
    fill(log, 40)
    started = hold_cleaner(monkeypatch, lambda: log.closed)
    mgr.start_maintenance(interval_ms=10)
    assert started.wait(WAIT_S)
    mgr.close()  # closes the log (the held pass then gives up) and joins the thread
    assert not any(t.name == "log-maintenance" for t in threading.enumerate())
    d = tmp_path / "c-0"
    assert (d / ".clean-shutdown").exists()
    assert not [p for p in os.listdir(d) if p.endswith((".cleaned", ".swap"))]
    log = PartitionLog.open(d, compact_config())
    assert [(o, v) for o, _k, v in records(log)] == [(i, b"v%05d" % i) for i in range(40)]
    log.close()


def test_deleting_a_log_during_a_pass_leaves_no_directory(tmp_path: Path, monkeypatch):
    mgr = LogManager(tmp_path)
    log = mgr.create("c", 0, compact_config())
    fill(log, 40)
    held = HeldCompaction(monkeypatch, log, lambda: log.closed)
    mgr.delete_topic("c")  # waits for the pass to give up before removing the directory
    assert held.stats().segments_cleaned == 0
    assert not (tmp_path / "c-0").exists()
    mgr.close()


def test_iteration_continues_across_a_compaction_swap(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", compact_config())
    fill(log, 60)
    batches = log.iter_batches(0)
    first = next(batches)
    assert first[0].base_offset == 0
    assert log.compact(NOW).segments_cleaned > 0  # swaps the segments under the iterator
    rest = list(batches)
    offsets = [h.base_offset for h, _data in [first] + rest]
    assert offsets == sorted(set(offsets))
    for h, data in rest:
        validate_batch(data)  # whole batches from one file version, never a mix
        assert all(r.value == b"v%05d" % r.offset for r in decode_records(data))
    assert offsets[-1] == 59


def test_closed_segments_are_fsynced_without_the_lock(tmp_path: Path, monkeypatch):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(segment_bytes=400))
    fill(log, 20)
    assert len(log.segments) > 2 and log.segments[0].unflushed
    closed_before, point = log.segments[:-1], log.active_segment.base_offset
    started, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def held_fsync(fd):
        if threading.current_thread().name == "flusher":
            started.set()
            wait_for(release.is_set, "the test to release the fsync")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", held_fsync)
    flusher = threading.Thread(target=log.maybe_flush, args=(NOW,), name="flusher")
    flusher.start()
    assert started.wait(WAIT_S)
    r = log.append(kv(b"k", b"v%05d" % 20), now_ms=NOW)  # not blocked by the fsync in progress
    assert decode_records(log.read(r.base_offset, 1 << 20).data)[0].value == b"v00020"
    assert flusher.is_alive()
    release.set()
    flusher.join(WAIT_S)
    assert not any(s.unflushed for s in closed_before)
    assert int((d / "recovery-point").read_text()) == point
    log.close()


def test_cleaner_owns_its_clean_point_and_stats(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", compact_config())
    fill(log, 40, keys=1)
    first = log.compact(NOW)
    assert log.cleaner.clean_point == log.active_segment.base_offset
    assert log.cleaner.stats == first and first.segments_cleaned > 0
    fill(log, 20, keys=1)
    second = log.compact(NOW)
    assert second.segments_cleaned > 0
    assert log.cleaner.stats.records_removed == first.records_removed + second.records_removed
    assert log.cleaner.clean_point == log.active_segment.base_offset
    log.close()


def test_retention_and_compaction_passes_are_logged_at_info(tmp_path: Path, caplog):
    """An operator sees what maintenance did: one INFO line per retention delete and compaction pass."""
    import logging

    from tidelake.log import LogConfig, LogManager
    from tidelake.protocol.records import Record, build_batch

    now = 1_700_000_000_000
    mgr = LogManager(tmp_path, clock_ms=lambda: now)
    old = mgr.create("old", 0, LogConfig(retention_ms=1000, segment_bytes=200))
    kept = mgr.create("kept", 0, LogConfig(cleanup_policy="compact", segment_bytes=200,
                                                  min_cleanable_dirty_ratio=0.0))
    for i in range(6):
        old.append(build_batch([Record(0, now - 10_000, b"k", b"x" * 100)]), now_ms=now - 10_000)
        kept.append(build_batch([Record(0, now, b"same-key", b"v%d" % i + b"x" * 100)]), now_ms=now)
    with caplog.at_level(logging.INFO, logger="tidelake.log"):
        mgr.run_maintenance(now)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(m.startswith("retention deleted ") and " of old-0; " in m for m in lines), lines
    assert any(m.startswith("compacted kept-0: ") for m in lines), lines
    mgr.close()
