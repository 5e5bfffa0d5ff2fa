"""LogLoader: opening a partition directory, including recovery after a crash.

On open:
  1. leftovers of an interrupted compaction swap are resolved: ``X.log.swap`` is the commit point, so a
     segment with one is completed (renamed over ``X.log``, its indexes dropped to be rebuilt); swap
     files without it and every ``*.cleaned`` / ``*.tmp`` file are deleted;
  2. segments are loaded oldest first. After a clean shutdown (``.clean-shutdown``) every index is
     trusted; otherwise only segments wholly below the recovery point (fsynced) are, and the rest are
     CRC-validated batch by batch. A torn or corrupt tail is truncated, and everything after a damaged
     segment is deleted;
  3. the leader-epoch checkpoint is cut to the log end and rebuilt from the batches if it is stale;
  4. producer state comes from the newest snapshot at or below the log end plus a replay of the log
     after it (headers only, and the control records of transaction markers).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tidelake.log.checkpoint import CLEAN_SHUTDOWN_FILE, LOG_START_FILE, RECOVERY_POINT_FILE, read_offset
from tidelake.log.config import LogConfig
from tidelake.log.epoch import LeaderEpochCache
from tidelake.log.producer_state import ProducerStateManager
from tidelake.log.segment import Segment
from tidelake.log.transaction_index import AbortedTxn

_INDEX_EXTENSIONS = (".index", ".timeindex", ".txnindex")


@dataclass
class LoadedLog:
    """What LogLoader hands to PartitionLog."""

    segments: list[Segment]
    log_start_offset: int
    recovery_point: int
    leader_epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    recovery_report: list[str] = field(default_factory=list)  # what recovery did (for logs and tests)
    recovered_segments: list[int] = field(default_factory=list)  # segments validated by a full scan


class LogLoader:
    def __init__(self, directory: Path, config: LogConfig, clock_ms: Callable[[], int]):
        self.directory = directory
        self.config = config
        self.clock_ms = clock_ms
        self.report: list[str] = []
        self.recovered: list[int] = []

    def load(self) -> LoadedLog:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        self._resolve_interrupted_swaps()
        for pattern in ("*.tmp", "*.cleaned"):
            for p in d.glob(pattern):
                p.unlink(missing_ok=True)
        clean_marker = d / CLEAN_SHUTDOWN_FILE
        clean = clean_marker.exists()
        clean_marker.unlink(missing_ok=True)
        recovery_point = 1 << 62 if clean else (read_offset(d / RECOVERY_POINT_FILE) or 0)
        checkpoint_start = read_offset(d / LOG_START_FILE) or 0
        segments = self._load_segments(clean, recovery_point)
        if not segments:
            seg = Segment(d, checkpoint_start, self.config.index_interval_bytes)
            seg.created_ms = self.clock_ms()
            segments.append(seg)
        leo = segments[-1].next_offset
        log_start = min(max(checkpoint_start, segments[0].base_offset), leo)
        epochs = LeaderEpochCache(d)
        epochs.truncate_from_end(leo)
        self._recover_leader_epochs(epochs, segments)
        producer_state = ProducerStateManager(d)
        rebuild_producer_state(producer_state, segments, high_watermark=leo)
        return LoadedLog(segments, log_start, min(recovery_point, leo), epochs, producer_state,
                         self.report, self.recovered)

    def _resolve_interrupted_swaps(self) -> None:
        d = self.directory
        for swap in d.glob("*.log.swap"):
            base = swap.name.split(".")[0]
            for ext in (".index", ".timeindex"):  # old or new: either way rebuilt from the .log
                (d / f"{base}{ext}").unlink(missing_ok=True)
                (d / f"{base}{ext}.swap").unlink(missing_ok=True)
            txn = d / f"{base}.txnindex.swap"
            if txn.exists():
                os.replace(txn, d / f"{base}.txnindex")
            os.replace(swap, d / f"{base}.log")
        for p in d.glob("*.swap"):  # a swap that never reached its commit point
            p.unlink(missing_ok=True)

    def _load_segments(self, clean: bool, recovery_point: int) -> list[Segment]:
        d = self.directory
        bases = sorted(int(p.stem) for p in d.glob("*.log") if p.stem.isdigit())
        # index files whose .log is gone are leftovers of an interrupted delete
        for ext in _INDEX_EXTENSIONS:
            for p in d.glob(f"*{ext}"):
                if p.stem.isdigit() and int(p.stem) not in bases:
                    p.unlink(missing_ok=True)
        segments: list[Segment] = []
        expected_next: int | None = None
        for i, base in enumerate(bases):
            seg = Segment(d, base, self.config.index_interval_bytes)
            seg.created_ms = self.clock_ms()  # segment.ms counts from the open for reopened segments
            is_last = i == len(bases) - 1
            # after a clean shutdown every index was written at close; otherwise only segments wholly
            # below the recovery point (fsynced) are trusted, the rest are CRC-validated batch by batch
            trusted = clean or (not is_last and bases[i + 1] <= recovery_point)
            if trusted and seg.load_indexes():
                seg.finish_load_from_indexes()
            else:
                self.recovered.append(base)
                before = seg.size
                valid, stop = seg.recover(expected_next)
                if stop is not None or valid < before:
                    self.report.append(
                        f"segment {base}: truncated {before - valid} bytes at {stop.position if stop else valid}"
                        f" ({stop.reason if stop else 'short'})")
                    if not is_last:
                        # nothing after a damaged segment can be trusted: drop the later segments
                        for later in bases[i + 1:]:
                            Segment(d, later, self.config.index_interval_bytes).delete_files()
                            self.report.append(f"segment {later}: deleted after damaged segment")
                        segments.append(seg)
                        break
            segments.append(seg)
            expected_next = seg.next_offset
        return segments

    def _recover_leader_epochs(self, cache: LeaderEpochCache, segments: list[Segment]) -> None:
        """The checkpoint is not fsynced on append, so a crash can lose or stale it: if the last batch
        carries a newer epoch than the checkpoint knows, rebuild it from every batch's epoch."""
        last = next((s for s in reversed(segments) if s.next_offset > s.base_offset), None)
        if last is None:
            return
        found = last.find_batch(last.next_offset - 1)
        if found is None:
            return
        epoch = last.header_at(found[0]).partition_leader_epoch
        if epoch <= cache.latest_epoch:
            return
        self.report.append(f"leader-epoch-checkpoint: rebuilt from the log (it knew epoch "
                           f"{cache.latest_epoch}, the log ends in epoch {epoch})")
        cache.rebuild((h.partition_leader_epoch, h.base_offset)
                      for seg in segments for _pos, h, _view in seg.iter_batches(0))


def rebuild_producer_state(ps: ProducerStateManager, segments: list[Segment], *, high_watermark: int) -> None:
    """Load the newest snapshot at or below the log end, then replay the log after it (on open and
    after a truncation). A replayed ABORT whose .txnindex entry was lost in a crash gets it back."""
    leo = segments[-1].next_offset
    ps.delete_snapshots_above(leo)
    snap = ps.load_latest_snapshot(leo)
    start = snap if snap is not None else segments[0].base_offset
    ps.map_end_offset = start
    for seg in segments:
        if seg.next_offset <= start:
            continue
        found = seg.find_batch(start) if seg.base_offset < start else (0, 0)
        pos = found[0] if found else seg.size
        for _pos, h, view in seg.iter_batches(pos):
            if h.base_offset + h.last_offset_delta < start:
                continue
            done = ps.replay(view, 0, h)
            if done is not None and done.is_aborted and not seg.txn_index.contains_marker(done.last_offset):
                first_unstable = ps.first_unstable_offset()
                lso = high_watermark if first_unstable is None else min(high_watermark, first_unstable)
                seg.txn_index.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso))
    ps.map_end_offset = leo

