"""LogCleaner: compaction (cleanup.policy=compact) of one partition log, as Kafka's cleaner does it.

When (``is_due``): the dirty part of the cleanable range is the closed segments above the clean point;
a pass runs once dirty bytes / cleanable bytes reach min.cleanable.dirty.ratio, or the oldest dirty
record is older than max.compaction.lag.ms, or a kept tombstone's delete.retention.ms has run out. The
clean point is kept in memory only, so after a restart the whole log counts as dirty once.

A pass, driven by PartitionLog in three steps so that appends and reads never wait for it:
  1. ``plan`` (under the log's lock): the cleanable range is the closed segments (never the active
     one) whose newest timestamp is older than min.compaction.lag.ms; it is captured with a private
     file descriptor per segment, so the rest runs without the lock.
  2. ``clean`` (no lock): a key -> latest offset map is built over the range (records of aborted
     transactions ignored); each segment is rewritten keeping a record only if it is the latest for
     its key; tombstones (null value) also go once the segment is older than delete.retention.ms (the
     segment's mtime, preserved across rewrites, marks when it was closed). Records of aborted
     transactions are dropped; control batches are kept. Batches that lose nothing are copied byte
     for byte; others are rebuilt keeping the original offsets, so offsets may have gaps. A rewritten
     segment is a new Segment under ``X.*.cleaned`` names, indexed while written and fsynced.
  3. (under the lock) PartitionLog swaps each cleaned segment in (``X.*.cleaned`` -> ``X.*.swap`` ->
     ``X.*``, the .log's rename to .swap being the commit point that LogLoader completes after a
     crash), unless the log was truncated or closed meanwhile; then ``commit`` moves the clean point.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from tidelake.log.config import LogConfig
from tidelake.log.segment import Segment, scan_file, segment_name
from tidelake.log.transaction_index import AbortedTxn
from tidelake.protocol import records as rb

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


@dataclass
class CompactionStats:
    segments_cleaned: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0

    def add(self, other: "CompactionStats") -> None:
        self.segments_cleaned += other.segments_cleaned
        self.bytes_before += other.bytes_before
        self.bytes_after += other.bytes_after
        self.records_removed += other.records_removed
        self.tombstones_removed += other.tombstones_removed


@dataclass
class _Source:
    """A closed segment as captured by ``plan``."""

    segment: Segment
    fd: int  # private descriptor: valid whatever happens to the segment meanwhile
    size: int
    next_offset: int
    times_ns: tuple[int, int]  # (atime, mtime) of the .log: the mtime is the tombstone clock
    aborted: list[AbortedTxn]


@dataclass
class CleaningJob:
    config: LogConfig
    now_ms: int
    end_offset: int  # the clean point once this pass is committed
    sources: list[_Source]
    aborted: dict[int, list[tuple[int, int]]]  # producer id -> (first, last) offsets of aborted txns

    def close(self) -> None:
        for s in self.sources:
            os.close(s.fd)


@dataclass
class CleanedSegments:
    replacements: list[tuple[Segment, Segment]]  # (live segment, its cleaned replacement)
    stats: CompactionStats
    tombstone_horizon_ms: int | None  # when the next kept tombstone expires

    def discard(self) -> None:
        for _old, new in self.replacements:
            new.delete_files()


def _fsync_file(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Stopped(Exception):
    """The log closed during a pass: abandon it."""


def _is_aborted(h: rb.BatchHeader, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    if not h.is_transactional or h.is_control:
        return False
    return any(first <= h.base_offset <= last for first, last in aborted.get(h.producer_id, ()))


class LogCleaner:
    """One partition log's cleaner state: the clean point, the tombstone horizon and the totals of
    every pass (``stats``)."""

    def __init__(self) -> None:
        self.clean_point = 0  # closed segments below this offset are already clean
        self.tombstone_horizon_ms: int | None = None  # when the next kept tombstone expires
        self.stats = CompactionStats()

    @staticmethod
    def _cleanable(segments: list[Segment], config: LogConfig, now_ms: int) -> list[Segment]:
        """Closed segments, oldest first, up to the first one holding a record younger than
        min.compaction.lag.ms."""
        out: list[Segment] = []
        for seg in segments[:-1]:
            if config.min_compaction_lag_ms > 0 and seg.max_timestamp > now_ms - config.min_compaction_lag_ms:
                break
            out.append(seg)
        return out

    def is_due(self, segments: list[Segment], config: LogConfig, now_ms: int) -> bool:
        """Kafka's scheduling (see the module docstring). Called under the log's lock."""
        if self.tombstone_horizon_ms is not None and now_ms > self.tombstone_horizon_ms:
            return True
        cleanable = self._cleanable(segments, config, now_ms)
        dirty = [seg for seg in cleanable if seg.next_offset > self.clean_point]
        if not dirty:
            return False
        dirty_bytes = sum(seg.size for seg in dirty)
        total = sum(seg.size for seg in cleanable)
        if total and dirty_bytes / total >= config.min_cleanable_dirty_ratio:
            return True
        oldest = dirty[0].first_batch_timestamp
        if oldest < 0:
            oldest = dirty[0].last_modified_ms()
        return config.max_compaction_lag_ms < now_ms - oldest

    def plan(self, segments: list[Segment], config: LogConfig, now_ms: int) -> CleaningJob | None:
        """Capture the cleanable range (under the log's lock); None if there is nothing to do."""
        cleanable = self._cleanable(segments, config, now_ms)
        if not cleanable:
            return None
        end_offset = cleanable[-1].next_offset
        pending = self.tombstone_horizon_ms
        if end_offset <= self.clean_point and (pending is None or now_ms <= pending):
            return None  # nothing new to clean and no tombstone has expired since the last pass
        start = cleanable[0].base_offset
        aborted: dict[int, list[tuple[int, int]]] = {}
        for seg in segments:
            for t in seg.txn_index.overlapping(start, end_offset):
                aborted.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
        sources = []
        for seg in cleanable:
            st = os.fstat(seg.fd)
            sources.append(_Source(seg, seg.duplicate_fd(), seg.size, seg.next_offset,
                                   (st.st_atime_ns, st.st_mtime_ns), list(seg.txn_index.entries)))
        return CleaningJob(config, now_ms, end_offset, sources, aborted)

    def clean(self, job: CleaningJob, should_stop: Callable[[], bool]) -> CleanedSegments | None:
        """Build the cleaned segments (no lock held). None if ``should_stop`` said so midway."""
        latest: dict[bytes, int] = {}
        for src in job.sources:
            for _pos, h, view in scan_file(src.fd, 0, src.size, validate=False):
                if should_stop():
                    return None
                if h.is_control or _is_aborted(h, job.aborted):
                    continue
                for r in rb.decode_records(view, 0, h):
                    if r.key is not None:
                        latest[r.key] = r.offset
        result = CleanedSegments([], CompactionStats(), None)
        try:
            for src in job.sources:
                cleaned = self._clean_segment(src, job, latest, result, should_stop)
                if cleaned is not None:
                    result.replacements.append((src.segment, cleaned))
        except _Stopped:
            result.discard()
            return None
        except BaseException:
            result.discard()
            raise
        return result

    def _clean_segment(self, src: _Source, job: CleaningJob, latest: dict[bytes, int],
                       result: CleanedSegments, should_stop: Callable[[], bool]) -> Segment | None:
        cfg, stats = job.config, result.stats
        horizon = src.times_ns[1] // 1_000_000 + cfg.delete_retention_ms
        drop_tombstones = job.now_ms > horizon
        out = bytearray()
        batches: list[tuple[int, int, int, int]] = []  # as Segment.append takes them
        changed = False
        has_tombstones = False
        for _pos, h, view in scan_file(src.fd, 0, src.size, validate=False):
            if should_stop():
                raise _Stopped
            if h.is_control:
                batches.append((len(out), h.base_offset, h.last_offset, h.max_timestamp))
                out += view
                continue
            if _is_aborted(h, job.aborted):
                changed = True
                stats.records_removed += h.records_count
                continue
            recs = rb.decode_records(view, 0, h)
            kept = []
            for r in recs:
                if r.key is not None and latest.get(r.key) != r.offset:
                    stats.records_removed += 1
                    continue
                if r.key is not None and r.value is None:
                    if drop_tombstones:
                        stats.tombstones_removed += 1
                        continue
                    has_tombstones = True
                kept.append(r)
            if len(kept) == len(recs):
                batches.append((len(out), h.base_offset, h.last_offset, h.max_timestamp))
                out += view
                continue
            changed = True
            if kept:
                first = kept[0].offset
                built = rb.build_batch(
                    kept, base_offset=first, compression=h.compression, producer_id=h.producer_id,
                    producer_epoch=h.producer_epoch,
                    base_sequence=(h.base_sequence + first - h.base_offset) & 0x7FFFFFFF
                    if h.base_sequence >= 0 else -1,
                    transactional=h.is_transactional, timestamp_type=h.timestamp_type,
                    partition_leader_epoch=h.partition_leader_epoch)
                bh = rb.parse_header(built)
                batches.append((len(out), bh.base_offset, bh.last_offset, bh.max_timestamp))
                out += built
        if has_tombstones:
            pending = result.tombstone_horizon_ms
            result.tombstone_horizon_ms = horizon if pending is None else min(pending, horizon)
        if not changed:
            return None
        stats.segments_cleaned += 1
        stats.bytes_before += src.size
        stats.bytes_after += len(out)
        return self._write_cleaned(src, cfg, out, batches, job.now_ms)

    @staticmethod
    def _write_cleaned(src: _Source, cfg: LogConfig, data: bytearray,
                       batches: list[tuple[int, int, int, int]], now_ms: int) -> Segment:
        seg = src.segment
        name = segment_name(seg.base_offset)
        for ext in ("log", "index", "timeindex", "txnindex"):  # leftovers of an abandoned pass
            (seg.directory / f"{name}.{ext}{CLEANED_SUFFIX}").unlink(missing_ok=True)
        cleaned = Segment(seg.directory, seg.base_offset, cfg.index_interval_bytes, suffix=CLEANED_SUFFIX)
        try:
            if data:
                cleaned.append(data, batches, now_ms)
            # a segment's offset range survives the removal of its last records
            cleaned.next_offset = max(cleaned.next_offset, src.next_offset)
            cleaned.txn_index.replace(src.aborted)
            cleaned.flush()
            for path in (cleaned.offset_index.path, cleaned.time_index.path, cleaned.txn_index.path):
                _fsync_file(path)  # as durable as the .log they will replace the old files with
            # keep the closing time: it is the tombstone clock (delete.retention.ms) and retention's fallback
            os.utime(cleaned.log_path, ns=src.times_ns)
        except BaseException:
            cleaned.delete_files()
            raise
        return cleaned

    def commit(self, job: CleaningJob, result: CleanedSegments) -> None:
        """The cleaned segments are in place (under the log's lock): move the clean point."""
        self.clean_point = job.end_offset
        self.tombstone_horizon_ms = result.tombstone_horizon_ms
        self.stats.add(result.stats)
