"""LocalLog: the segments of one partition directory (Kafka's LocalLog).

It owns the ordered list of segments and the active one, finds an offset's batch (binary search over
segment bases, then ``Segment.find_batch``), reads whole batches, answers timestamp lookups, rolls,
flushes and keeps the ``recovery-point`` checkpoint, and removes, replaces and truncates segments.
It knows nothing of producers, transactions, leader epochs, the high watermark or the log start:
PartitionLog decides and calls it.

Threads: it shares its owner's lock. Its methods run with that lock held by the caller, except
``iter_batches`` and ``maybe_flush``, which take it themselves so that their slow reads and fsyncs run
without it.
"""
from __future__ import annotations

import bisect
import os
import shutil
import threading
from pathlib import Path
from typing import Callable, Iterator

from tidelake.fsutil import fsync_dir
from tidelake.log.checkpoint import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, write_offset
from tidelake.log.cleaner import SWAP_SUFFIX
from tidelake.log.config import LogConfig
from tidelake.log.results import OffsetPosition
from tidelake.log.segment import SCAN_CHUNK, Segment
from tidelake.protocol import records as rb
from tidelake.protocol.records import BatchHeader

_MAX_RELATIVE_OFFSET = 2**31 - 1


class LocalLog:
    """A partition directory's segments, oldest first; the last one is active (appended to)."""

    def __init__(self, directory: Path, config: LogConfig, segments: list[Segment], recovery_point: int,
                 lock: threading.RLock, clock_ms: Callable[[], int], on_flush: Callable[[], None]):
        self.directory = directory
        self.config = config
        self.clock_ms = clock_ms
        self.segments = segments
        self._bases: list[int] = [s.base_offset for s in segments]
        self._lock = lock  # the owner's: one lock guards the segments and the state above them
        self._on_flush = on_flush  # syncs the owner's checkpoints on a full flush (leader epochs)
        self._unflushed_messages = 0
        self._last_flush_ms = clock_ms()
        self._recovery_point = recovery_point
        # bumped whenever segments are deleted or cut (not on append/roll/compaction): work done
        # without the lock on a snapshot of the segments is dropped if it changed meanwhile
        self.layout_version = 0
        self._position_cache: dict[int, tuple[Segment, int]] = {}  # next offset -> (segment, position)
        self.closed = False

    # ================================================================== shape
    @property
    def active_segment(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def base_offsets(self) -> set[int]:
        return set(self._bases)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self.segments:
            seg.index_interval_bytes = config.index_interval_bytes

    # ================================================================== locate / read
    def _segment_index_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def _find_locked(self, offset: int) -> tuple[Segment, int, int] | None:
        """(segment, position, base offset) of the batch holding ``offset`` or the first batch after
        it; None past the log end."""
        cached = self._position_cache.get(offset)
        if cached is not None:
            seg, pos = cached
            if seg.fd >= 0 and pos < seg.size:
                return seg, pos, offset  # a sequential consumer continues where it stopped
        si = self._segment_index_for(offset)
        segments = self.segments
        while si < len(segments):
            seg = segments[si]
            found = seg.find_batch(offset)
            if found is not None:
                return seg, found[0], found[1]
            si += 1  # offset fell in a gap at the end of a (compacted) segment
        return None

    def locate(self, offset: int) -> OffsetPosition | None:
        """The seed-004 lookup, step by step: segment by binary search over base offsets, the sparse
        index entry by binary search, then the batch found by a short forward scan."""
        seg = self.segments[self._segment_index_for(offset)]
        found = seg.find_batch(offset)
        if found is None:
            return None
        return OffsetPosition(seg.base_offset, seg.offset_index.lookup(offset), found[0], found[1])

    def read(self, offset: int, max_bytes: int, limit: int, min_one_batch: bool
             ) -> tuple[bytes, int, int] | None:
        """(data, first batch's base offset, offset after the last batch) of whole batches from one
        segment, starting with the batch holding ``offset``, none based at or above ``limit``;
        None if there is no such batch."""
        found = self._find_locked(offset)
        if found is None:
            return None
        seg, pos, base = found
        if base >= limit:
            return None
        data, next_offset = seg.read_batches(pos, max_bytes, limit, min_one_batch)
        if not data:
            return None
        if len(self._position_cache) > 256:
            self._position_cache.clear()
        self._position_cache[next_offset] = (seg, pos + len(data))
        return data, base, next_offset

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping [start_offset, end_offset)."""
        return [(t.producer_id, t.first_offset) for seg in self.segments
                for t in seg.txn_index.overlapping(start_offset, end_offset)]

    def offset_for_timestamp(self, ts_ms: int, log_start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or above ``log_start_offset`` with timestamp
        >= ts_ms, or None."""
        for seg in self.segments:
            if seg.max_timestamp < ts_ms or seg.next_offset <= log_start_offset:
                continue
            start = seg.time_lookup(ts_ms)
            for _pos, h, view in seg.iter_batches(start):
                if h.max_timestamp < ts_ms or h.base_offset + h.last_offset_delta < log_start_offset:
                    continue
                for r in rb.decode_records(view, 0, h):
                    if r.timestamp >= ts_ms and r.offset >= log_start_offset:
                        return r.offset, r.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (first such), or None."""
        best: Segment | None = None
        for seg in self.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        found = best.find_batch(best.offset_of_max_timestamp)
        if found is None:
            return None
        for _pos, h, view in best.iter_batches(found[0]):
            if h.max_timestamp == best.max_timestamp:
                for r in rb.decode_records(view, 0, h):
                    if r.timestamp == best.max_timestamp:
                        return r.offset, r.timestamp
                return h.base_offset + h.last_offset_delta, h.max_timestamp
        return None

    def iter_batches(self, start_offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch with last offset >= start_offset, in order, up to the log end. Each chunk is
        read under the lock and the next one continues from the offset after the last batch
        returned, so compaction or retention running meanwhile is safe."""
        offset = start_offset
        while True:
            with self._lock:
                if self.closed or offset >= self.log_end_offset:
                    return
                found = self._find_locked(max(offset, self.segments[0].base_offset))
                if found is None:
                    return
                seg, pos, _base = found
                data, _next = seg.read_batches(pos, SCAN_CHUNK, self.log_end_offset, True)
            if not data:
                return
            for p, h in rb.iter_batches(data, validate=False):
                if h.base_offset + h.last_offset_delta >= offset:
                    yield h, data[p:p + h.size]
            offset = h.base_offset + h.last_offset_delta + 1

    # ================================================================== roll
    def needs_roll_for_append(self, size: int, offset_count: int, max_ts: int, now_ms: int) -> bool:
        """Whether ``size`` bytes of ``offset_count`` offsets go to a new segment: segment.bytes,
        relative offsets beyond 32 bits, a full index (segment.index.bytes) or segment.ms, as Kafka
        rolls. Never for an empty active segment."""
        seg = self.active_segment
        if seg.is_empty:
            return False
        cfg = self.config
        if seg.size + size > cfg.segment_bytes:
            return True
        if seg.next_offset + offset_count - 1 - seg.base_offset > _MAX_RELATIVE_OFFSET:
            return True
        if seg.indexes_full(cfg.segment_index_bytes):
            return True
        if seg.first_batch_timestamp >= 0 and max_ts >= 0:
            return max_ts - seg.first_batch_timestamp > cfg.segment_ms
        return seg.created_ms is not None and now_ms - seg.created_ms > cfg.segment_ms

    def needs_time_roll(self, now_ms: int) -> bool:
        """Whether the active segment has been open longer than segment.ms (wall clock)."""
        seg = self.active_segment
        return not seg.is_empty and seg.created_ms is not None and now_ms - seg.created_ms > self.config.segment_ms

    def roll(self, now_ms: int) -> Segment | None:
        """Close the active segment and start a new one at the log end; the new segment, or None
        if the active one is empty (nothing to roll)."""
        old = self.active_segment
        if old.is_empty:
            return None
        old.write_indexes()
        new = Segment(self.directory, old.next_offset, self.config.index_interval_bytes)
        new.next_offset = old.next_offset
        new.created_ms = now_ms
        self.segments.append(new)
        self._bases.append(new.base_offset)
        return new

    # ================================================================== flush / recovery point
    def count_appended(self, messages: int) -> None:
        """Note ``messages`` appended offsets; a flush when flush.messages is reached."""
        self._unflushed_messages += messages
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    def flush(self) -> None:
        """fsync every segment with unflushed data and move the recovery point to the log end."""
        for seg in self.segments:
            if seg.unflushed:
                seg.flush()
        self.active_segment.write_indexes()
        self._on_flush()
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock_ms()
        self.set_recovery_point(self.log_end_offset)

    def set_recovery_point(self, offset: int) -> None:
        if offset != self._recovery_point:
            self._recovery_point = offset
            write_offset(self.directory / RECOVERY_POINT_FILE, offset, sync=False)

    def maybe_flush(self, now_ms: int) -> None:
        """The flush.ms policy, and an fsync of closed segments so that recovery after a crash stays
        short (the recovery point moves to the active segment). The fsyncs run without the lock, on
        private descriptors, so appends go on meanwhile."""
        with self._lock:
            if self.closed:
                return
            if now_ms - self._last_flush_ms >= self.config.flush_ms and self._unflushed_messages:
                targets = [s for s in self.segments if s.unflushed]
                point = self.log_end_offset
                self.active_segment.write_indexes()
                self._on_flush()
                self._unflushed_messages = 0
                self._last_flush_ms = self.clock_ms()
            else:
                targets = [s for s in self.segments[:-1] if s.unflushed]
                point = self.active_segment.base_offset
                if not targets:
                    return
            fds = [seg.duplicate_fd() for seg in targets]
            for seg in targets:
                seg.unflushed = False  # an append after this point sets it again
            version = self.layout_version
        try:
            for fd in fds:
                os.fsync(fd)
        except OSError:
            with self._lock:
                for seg in targets:
                    seg.unflushed = True
            raise
        finally:
            for fd in fds:
                os.close(fd)
        with self._lock:
            if not self.closed and version == self.layout_version and point > self._recovery_point:
                self.set_recovery_point(point)

    # ================================================================== remove / replace / truncate
    def _remove_segment_locked(self, seg: Segment) -> None:
        """Take ``seg`` out of the log and close it; the caller deletes its files."""
        i = self.segments.index(seg)
        del self.segments[i]
        del self._bases[i]
        seg.detach()
        self._position_cache.clear()
        self.layout_version += 1

    def remove_oldest_segments(self, should_remove: Callable[[Segment, Segment], bool], *,
                               delete_files: bool) -> list[Segment]:
        """Take closed segments out, oldest first, while ``should_remove(segment, next segment)``
        holds; never the active one. With ``delete_files`` each one's files go at once, else the
        caller deletes them (after releasing the lock). Returns the segments taken out."""
        removed: list[Segment] = []
        while len(self.segments) > 1 and should_remove(self.segments[0], self.segments[1]):
            seg = self.segments[0]
            self._remove_segment_locked(seg)
            if delete_files:
                seg.delete_files()
            removed.append(seg)
        return removed

    def replace_segments(self, replacements: list[tuple[Segment, Segment]]) -> None:
        """Swap cleaned segments in: each new one's files are renamed over the old one's (the .log's
        rename to .swap is the commit point, see LogLoader) and readers see either segment, never a
        mix."""
        for old, new in replacements:
            i = self.segments.index(old)
            new.rename(SWAP_SUFFIX)
            old.detach()
            new.rename("")
            self.segments[i] = new
            self._position_cache.clear()

    def sync_directory(self) -> None:
        """fsync the directory, so renames and deletions in it survive a power loss."""
        fsync_dir(self.directory)

    def truncate_to(self, offset: int) -> None:
        """Remove every batch containing an offset >= ``offset`` (a batch boundary), keeping at least
        the oldest segment."""
        self.layout_version += 1
        self._position_cache.clear()
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            seg = self.segments[-1]
            self._remove_segment_locked(seg)
            seg.delete_files()
        seg = self.active_segment
        found = seg.find_batch(offset)
        if found is not None:
            seg.truncate_to_position(found[0])

    def start_at(self, offset: int) -> None:
        """Delete every segment and continue with one empty segment at ``offset``."""
        self.layout_version += 1
        self._position_cache.clear()
        for seg in list(self.segments):
            self._remove_segment_locked(seg)
            seg.delete_files()
        seg = Segment(self.directory, offset, self.config.index_interval_bytes)
        seg.created_ms = self.clock_ms()
        self.segments.append(seg)
        self._bases.append(offset)

    # ================================================================== lifecycle
    def close(self) -> None:
        """Close every segment and mark a clean shutdown (the caller flushed first)."""
        for seg in self.segments:
            seg.close()
        (self.directory / CLEAN_SHUTDOWN_FILE).touch()
        self.closed = True

    def detach(self) -> None:
        """Close every segment's descriptors without flushing (before the directory is removed)."""
        for seg in self.segments:
            seg.detach()
        self.closed = True

    def delete_directory(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
