"""PartitionLog: one topic-partition's segmented, indexed, recoverable log (SPEC B3, B6, B7).

Directory ``<data-dir>/<topic>-<partition>/`` holds the segments (``<20-digit base>.log`` / ``.index``
/ ``.timeindex`` / ``.txnindex``), ``leader-epoch-checkpoint``, producer ``<offset>.snapshot`` files,
``log-start-offset`` and ``recovery-point`` checkpoints and, after a clean close, ``.clean-shutdown``.

Hot path: client batches stay opaque. ``append`` reads only each batch's 61-byte header, CRC-checks
it, patches the base offset (and leader epoch) in place and writes the request's bytes with one
``os.write``; ``read`` finds a position with a binary search over segment bases, a binary search in
the in-memory sparse index and a short forward scan of batch headers, then returns whole batches
from one ``os.pread``.

All public methods take the partition's lock, so the broker may call them from several threads.
"""
from __future__ import annotations

import bisect
import os
import shutil
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from tidelake.errors import (
    CorruptMessage,
    MessageTooLarge,
    NotLeaderOrFollower,
    OffsetOutOfRange,
    OutOfOrderSequenceNumber,
)
from tidelake.log.cleaner import compact_log, needs_compaction
from tidelake.log.config import LogConfig
from tidelake.log.epoch import LeaderEpochCache
from tidelake.log.producer_state import BatchMetadata, ProducerStateManager
from tidelake.log.segment import AbortedTxn, Segment, ScanStop, read_offset_and_length
from tidelake.protocol import records as rb
from tidelake.protocol.records import BatchHeader, CorruptRecordError

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
LOG_START_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"
_MAX_RELATIVE_OFFSET = 2**31 - 1
_BATCH_PREFIX = struct.Struct(">qiibIhi")  # base offset .. lastOffsetDelta (27 bytes)
_FIND_CHUNK = 16384


@dataclass
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime
    log_start_offset: int
    duplicate: bool = False


@dataclass
class ReadResult:
    data: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


@dataclass
class CompactionStats:
    segments_cleaned: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0


@dataclass
class OffsetPosition:
    """Where ``locate`` found an offset: the seed-004 lookup made visible (for tests and tools)."""

    segment_base_offset: int
    index_entry: tuple[int, int] | None  # (relative offset, position) from the sparse index
    position: int  # start of the batch containing the offset
    batch_base_offset: int


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _write_checkpoint(path: Path, value: int, *, sync: bool = True) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_checkpoint(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


class PartitionLog:
    """A partition's log. Create with ``PartitionLog.open(directory, config)``."""

    def __init__(self, directory: Path, config: LogConfig, clock_ms: Callable[[], int] | None = None):
        self.directory = Path(directory)
        self.config = config
        self.clock_ms = clock_ms or _wall_ms
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self._lock = threading.RLock()
        self.log_start_offset = 0
        self._hw = 0
        self.replicated = False  # False: the high watermark follows the log end (single replica)
        self.producer_state = ProducerStateManager(self.directory)
        self.leader_epoch_cache: LeaderEpochCache | None = None
        self._unflushed_messages = 0
        self._last_flush_ms = 0
        self._recovery_point = 0
        self._position_cache: dict[int, tuple[Segment, int]] = {}  # next offset -> (segment, position)
        self._cleaned_up_to = 0  # compaction: closed segments below this offset are already clean
        self._tombstone_horizon_ms: int | None = None  # compaction: when the next kept tombstone expires
        self.recovery_report: list[str] = []  # what recovery did on open (for logs and tests)
        self.recovered_segments: list[int] = []  # segments validated by a full scan on open
        self.closed = False

    # ================================================================== open / recovery
    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, clock_ms: Callable[[], int] | None = None
             ) -> "PartitionLog":
        """Open (creating if needed) and recover the log in ``directory``."""
        log = cls(directory, config, clock_ms)
        log.directory.mkdir(parents=True, exist_ok=True)
        with log._lock:
            log._load()
        return log

    def _load(self) -> None:
        d = self.directory
        self._finish_interrupted_swaps()
        for p in d.glob("*.tmp"):
            p.unlink(missing_ok=True)
        for p in d.glob("*.cleaned"):
            p.unlink(missing_ok=True)
        clean_marker = d / CLEAN_SHUTDOWN_FILE
        clean = clean_marker.exists()
        clean_marker.unlink(missing_ok=True)
        self._recovery_point = (_read_checkpoint(d / RECOVERY_POINT_FILE) or 0) if not clean else 1 << 62
        bases = sorted(int(p.stem) for p in d.glob("*.log") if p.stem.isdigit())
        # index files whose .log is gone are leftovers of an interrupted delete
        for p in list(d.glob("*.index")) + list(d.glob("*.timeindex")) + list(d.glob("*.txnindex")):
            if p.stem.isdigit() and int(p.stem) not in bases:
                p.unlink(missing_ok=True)
        checkpoint_start = _read_checkpoint(d / LOG_START_FILE) or 0
        expected_next: int | None = None
        for i, base in enumerate(bases):
            seg = Segment(d, base, self.config.index_interval_bytes)
            seg.created_ms = self.clock_ms()  # segment.ms counts from the open for reopened segments
            is_last = i == len(bases) - 1
            # after a clean shutdown every index was written at close; otherwise only segments wholly
            # below the recovery point (fsynced) are trusted, the rest are CRC-validated batch by batch
            trusted = clean or (not is_last and bases[i + 1] <= self._recovery_point)
            if trusted and seg.load_indexes():
                seg.finish_load_from_indexes()
            else:
                self.recovered_segments.append(base)
                before = seg.size
                valid, stop = seg.recover(expected_next)
                if stop is not None or valid < before:
                    self.recovery_report.append(
                        f"segment {base}: truncated {before - valid} bytes at {stop.position if stop else valid}"
                        f" ({stop.reason if stop else 'short'})")
                    if not is_last:
                        # nothing after a damaged segment can be trusted: drop the later segments
                        for later in bases[i + 1:]:
                            Segment(d, later, self.config.index_interval_bytes).delete_files()
                            self.recovery_report.append(f"segment {later}: deleted after damaged segment")
                        self._add_segment(seg)
                        break
            self._add_segment(seg)
            expected_next = seg.next_offset
        if not self.segments:
            self._add_segment(Segment(d, checkpoint_start, self.config.index_interval_bytes))
            self.segments[-1].created_ms = self.clock_ms()
        self.log_start_offset = max(checkpoint_start, self.segments[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self._hw = self.log_end_offset
        self.leader_epoch_cache = LeaderEpochCache(d)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self._recover_leader_epochs()
        self._rebuild_producer_state()
        self._last_flush_ms = self.clock_ms()
        self._recovery_point = min(self._recovery_point, self.log_end_offset)

    def _recover_leader_epochs(self) -> None:
        """The checkpoint is not fsynced on append, so a crash can lose or stale it: if the last batch
        carries a newer epoch than the checkpoint knows, rebuild it from every batch's epoch."""
        cache = self.leader_epoch_cache
        last = next((s for s in reversed(self.segments) if s.next_offset > s.base_offset), None)
        if cache is None or last is None:
            return
        found = last.find_batch(last.next_offset - 1)
        if found is None or found[1].partition_leader_epoch <= cache.latest_epoch:
            return
        self.recovery_report.append(f"leader-epoch-checkpoint: rebuilt from the log (it knew epoch "
                                    f"{cache.latest_epoch}, the log ends in epoch {found[1].partition_leader_epoch})")
        cache.rebuild((h.partition_leader_epoch, h.base_offset)
                      for seg in self.segments for _pos, h, _view in seg.iter_batches(0))

    def _finish_interrupted_swaps(self) -> None:
        """A compaction that crashed after renaming ``X.log.cleaned`` to ``X.log.swap`` is completed."""
        for swap in self.directory.glob("*.log.swap"):
            base = swap.name.split(".")[0]
            for ext in (".index", ".timeindex"):
                (self.directory / f"{base}{ext}").unlink(missing_ok=True)
            os.replace(swap, self.directory / f"{base}.log")

    def _add_segment(self, seg: Segment) -> None:
        if self._bases and seg.base_offset in self._bases:
            return
        self.segments.append(seg)
        self._bases.append(seg.base_offset)

    def _rebuild_producer_state(self) -> None:
        """Load the newest snapshot at or below the log end, then replay the log after it."""
        ps = self.producer_state
        leo = self.log_end_offset
        ps.delete_snapshots_above(leo)
        snap = ps.load_latest_snapshot(leo)
        start = snap if snap is not None else self.segments[0].base_offset
        ps.map_end_offset = start
        for seg in self.segments:
            if seg.next_offset <= start:
                continue
            pos = seg.position_of(start) if seg.base_offset < start else 0
            for _pos, h, view in seg.iter_batches(pos):
                if h.base_offset + h.last_offset_delta < start:
                    continue
                self._replay_batch(seg, h, view)
        ps.map_end_offset = leo

    def _replay_batch(self, seg: Segment, h: BatchHeader, view) -> None:
        ps = self.producer_state
        if not h.is_control:
            ps.update(h)
            return
        if h.producer_id < 0:
            return
        try:
            rec = rb.decode_records(view, 0, h)[0]
            kind = rb.control_type(rec)
            coordinator_epoch = struct.unpack_from(">hi", rec.value)[1] if rec.value else -1
        except (CorruptRecordError, struct.error, IndexError):
            return
        done = ps.complete_txn(h.producer_id, h.producer_epoch, coordinator_epoch, h.base_offset,
                               kind == rb.CONTROL_ABORT, h.max_timestamp)
        if done is not None and done.is_aborted:
            if not any(t.last_offset == done.last_offset for t in seg.aborted):
                # the marker was written but its .txnindex entry was lost in a crash
                seg.add_aborted(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                           self._lso_value()))

    # ================================================================== offsets
    @property
    def active_segment(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset if not self.replicated else self._hw

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        """Set by replication (sets ``replicated``); clamped to [log start, LEO]."""
        with self._lock:
            self.replicated = True
            self._hw = max(self.log_start_offset, min(value, self.log_end_offset))

    def _lso_value(self) -> int:
        hw = self.high_watermark
        first = self.producer_state.first_unstable_offset()
        return hw if first is None else min(hw, first)

    @property
    def last_stable_offset(self) -> int:
        """min(HW, first offset of the oldest open transaction)."""
        return self._lso_value()

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ================================================================== append
    def append(self, data: bytes | bytearray | memoryview, *, now_ms: int | None = None,
               leader_epoch: int = 0) -> AppendResult:
        """Append a Produce request's ``records`` (one or more client RecordBatch v2).

        ``data`` given as a bytearray or writable memoryview is patched in place (base offsets, leader
        epoch, LogAppendTime) only after every batch validated; other types are copied first.

        All-or-nothing. Raises CorruptMessage (bad CRC / magic / truncation / inconsistent counts),
        MessageTooLarge (a batch over max.message.bytes), InvalidProducerEpoch and
        OutOfOrderSequenceNumber. A retried duplicate batch is not written: the result carries the
        original offsets and ``duplicate=True``."""
        if now_ms is None:
            now_ms = self.clock_ms()
        if isinstance(data, bytearray) or (isinstance(data, memoryview) and not data.readonly):
            buf = data  # patched in place (offsets, leader epoch): saves a copy of the request
        else:
            buf = bytearray(data)
        n = len(buf)
        if n == 0:
            raise CorruptMessage("empty record set")
        headers: list[tuple[int, BatchHeader]] = []
        pos = 0
        max_message_bytes = self.config.max_message_bytes
        while pos < n:
            try:
                h = rb.validate_batch(buf, pos)
            except CorruptRecordError as e:
                raise CorruptMessage(str(e)) from None
            if h.size > max_message_bytes:
                raise MessageTooLarge(f"batch of {h.size} bytes exceeds max.message.bytes={max_message_bytes}")
            if h.records_count != h.last_offset_delta + 1:
                raise CorruptMessage("inconsistent batch: record count does not match the offset range")
            if h.is_control:
                raise CorruptMessage("clients may not produce control batches")
            headers.append((pos, h))
            pos += h.size
        with self._lock:
            self._check_open()
            dup = self._check_producers(headers)
            if dup is not None:
                return AppendResult(dup.first_offset, dup.last_offset,
                                    dup.timestamp if self.config.log_append_time else -1,
                                    self.log_start_offset, duplicate=True)
            total_delta = sum(h.last_offset_delta + 1 for _, h in headers)
            max_ts = max(h.max_timestamp for _, h in headers)
            self._maybe_roll_for_append(n, total_delta, max_ts, now_ms)
            seg = self.active_segment
            offset = seg.next_offset
            first_offset = offset
            log_append_time = self.config.log_append_time
            batches = []
            for pos, h in headers:
                rb.set_base_offset(buf, pos, offset)
                rb.set_partition_leader_epoch(buf, pos, leader_epoch)
                bmax = h.max_timestamp
                if log_append_time:
                    rb.set_log_append_time(buf, pos, h.size, now_ms)
                    bmax = now_ms
                batches.append((pos, offset, offset + h.last_offset_delta, bmax))
                offset += h.last_offset_delta + 1
            seg.append(buf, batches, now_ms)
            if self.leader_epoch_cache is not None and leader_epoch > self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(leader_epoch, first_offset)
            ps = self.producer_state
            for (pos, h), (_, base, _last, bmax) in zip(headers, batches):
                if h.producer_id >= 0:
                    ps.update(h._replace(base_offset=base, max_timestamp=bmax))
            ps.map_end_offset = offset
            self._unflushed_messages += total_delta
            if self._unflushed_messages >= self.config.flush_messages:
                self._flush_locked()
            return AppendResult(first_offset, offset - 1, now_ms if log_append_time else -1,
                                self.log_start_offset)

    def _check_producers(self, headers: list[tuple[int, BatchHeader]]) -> BatchMetadata | None:
        ps = self.producer_state
        seen: dict[int, BatchHeader] = {}
        for _pos, h in headers:
            if h.producer_id < 0:
                continue
            prev = seen.get(h.producer_id)
            if prev is not None:
                # several batches of one producer in one request must follow each other
                if h.producer_epoch != prev.producer_epoch or (
                        h.base_sequence >= 0 and h.base_sequence != (prev.last_sequence + 1) & 0x7FFFFFFF):
                    raise OutOfOrderSequenceNumber("batches of one producer out of order within a request")
            else:
                dup = ps.check(h)
                if dup is not None:
                    return dup
            seen[h.producer_id] = h
        return None

    def _maybe_roll_for_append(self, size: int, offset_count: int, max_ts: int, now_ms: int) -> None:
        seg = self.active_segment
        if seg.is_empty:
            return
        cfg = self.config
        if seg.size + size > cfg.segment_bytes:
            reason = True
        elif seg.next_offset + offset_count - 1 - seg.base_offset > _MAX_RELATIVE_OFFSET:
            reason = True
        elif (len(seg.index_rel) >= cfg.segment_index_bytes // 8
              or len(seg.time_ts) >= cfg.segment_index_bytes // 12):
            reason = True  # an index is full (segment.index.bytes), as Kafka rolls
        elif seg.first_batch_timestamp >= 0 and max_ts >= 0:
            reason = max_ts - seg.first_batch_timestamp > cfg.segment_ms
        else:
            reason = seg.created_ms is not None and now_ms - seg.created_ms > cfg.segment_ms
        if reason:
            self._roll_locked(now_ms)

    def append_marker(self, *, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, now_ms: int | None = None, leader_epoch: int = 0) -> int:
        """Write a COMMIT/ABORT control batch ending ``producer_id``'s open transaction here.

        Returns the marker's offset. An ABORT adds a .txnindex entry; the LSO moves past the txn."""
        if now_ms is None:
            now_ms = self.clock_ms()
        with self._lock:
            self._check_open()
            ps = self.producer_state
            ps.check_marker(producer_id, producer_epoch, coordinator_epoch)
            batch = bytearray(rb.build_control_batch(
                rb.CONTROL_COMMIT if commit else rb.CONTROL_ABORT, producer_id=producer_id,
                producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=now_ms))
            self._maybe_roll_for_append(len(batch), 1, now_ms, now_ms)
            seg = self.active_segment
            offset = seg.next_offset
            rb.set_base_offset(batch, 0, offset)
            rb.set_partition_leader_epoch(batch, 0, leader_epoch)
            seg.append(batch, [(0, offset, offset, now_ms)], now_ms)
            done = ps.complete_txn(producer_id, producer_epoch, coordinator_epoch, offset,
                                   not commit, now_ms)
            ps.map_end_offset = offset + 1
            if done is not None and done.is_aborted:
                seg.add_aborted(AbortedTxn(producer_id, done.first_offset, offset, self._lso_value()))
            self._unflushed_messages += 1
            if self._unflushed_messages >= self.config.flush_messages:
                self._flush_locked()
            return offset

    # ================================================================== read
    def _segment_index_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def _find_position(self, seg: Segment, offset: int) -> tuple[int, int] | None:
        """(position, base offset) of the batch in ``seg`` containing ``offset`` or the first after it.

        Binary search in the in-memory sparse index, then a forward scan of batch headers read in
        small chunks (usually one pread: the index has an entry every index.interval.bytes)."""
        entry = seg.index_lookup(offset)
        pos = entry[1] if entry else 0
        end = seg.size
        while pos < end:
            chunk = os.pread(seg.fd, min(_FIND_CHUNK, end - pos), pos)
            p = 0
            while p + 27 <= len(chunk):
                base, length, _ple, _magic, _crc, _attrs, delta = _BATCH_PREFIX.unpack_from(chunk, p)
                if base + delta >= offset:
                    return pos + p, base
                p += length + rb.LOG_OVERHEAD
            if p == 0:
                return None  # a header that does not fit: cannot happen in a recovered segment
            pos += p
        return None

    def locate(self, offset: int) -> OffsetPosition | None:
        """The seed-004 lookup, step by step: segment by binary search over base offsets, the sparse
        index entry by binary search, then the batch found by a short forward scan."""
        with self._lock:
            seg = self.segments[self._segment_index_for(offset)]
            found = self._find_position(seg, offset)
            if found is None:
                return None
            return OffsetPosition(seg.base_offset, seg.index_lookup(offset), found[0], found[1])

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        """Whole batches starting with the batch containing ``offset``, from one segment.

        No batch with base offset >= ``max_offset`` (pass the HW or the LSO) is returned; at least one
        batch when ``min_one_batch`` even if it is larger than ``max_bytes``. Raises OffsetOutOfRange
        if offset < log start or offset > LEO; offset == LEO gives empty data."""
        with self._lock:
            self._check_open()
            leo = self.log_end_offset
            if offset < self.log_start_offset or offset > leo:
                raise OffsetOutOfRange(
                    f"offset {offset} outside [{self.log_start_offset}, {leo}]")
            result = ReadResult(b"", self.high_watermark, self._lso_value(), self.log_start_offset)
            limit = leo if max_offset is None else min(max_offset, leo)
            if offset >= limit:
                return result
            found = None
            cached = self._position_cache.get(offset)
            if cached is not None:
                seg, cpos = cached
                if seg.fd >= 0 and cpos < seg.size:
                    found = (cpos, offset)  # a sequential consumer continues where it stopped
            if found is None:
                si = self._segment_index_for(offset)
                while si < len(self.segments):
                    seg = self.segments[si]
                    found = self._find_position(seg, offset)
                    if found is not None:
                        break
                    si += 1  # offset fell in a gap at the end of a (compacted) segment
                if found is None:
                    return result
            pos, base = found
            if base >= limit:
                return result
            want = min(max(max_bytes, 0), seg.size - pos)
            data = os.pread(seg.fd, want, pos) if want >= rb.LOG_OVERHEAD else b""
            end = 0
            next_offset = offset
            while end + 27 <= len(data):
                b, length, _ple, _magic, _crc, _attrs, delta = _BATCH_PREFIX.unpack_from(data, end)
                if b >= limit or end + length + rb.LOG_OVERHEAD > len(data):
                    break
                end += length + rb.LOG_OVERHEAD
                next_offset = b + delta + 1
            if end == 0:
                if not min_one_batch:
                    return result
                head = os.pread(seg.fd, rb.LOG_OVERHEAD, pos)
                _b, size = read_offset_and_length(head, 0)
                data = os.pread(seg.fd, size, pos)
                end = len(data)
                b, length, _ple, _magic, _crc, _attrs, delta = _BATCH_PREFIX.unpack_from(data, 0)
                next_offset = b + delta + 1
            if len(self._position_cache) > 256:
                self._position_cache.clear()
            self._position_cache[next_offset] = (seg, pos + end)
            result.data = data if end == len(data) else data[:end]
            return result

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping [start_offset, end_offset)."""
        with self._lock:
            out = []
            for seg in self.segments:
                for t in seg.aborted:
                    if t.last_offset >= start_offset and t.first_offset < end_offset:
                        out.append((t.producer_id, t.first_offset))
            return out

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ts_ms, or None (ListOffsets)."""
        with self._lock:
            for seg in self.segments:
                if seg.max_timestamp < ts_ms or seg.next_offset <= self.log_start_offset:
                    continue
                start = seg.time_lookup(ts_ms)
                for _pos, h, view in seg.iter_batches(start):
                    if h.max_timestamp < ts_ms or h.base_offset + h.last_offset_delta < self.log_start_offset:
                        continue
                    for r in rb.decode_records(view, 0, h):
                        if r.timestamp >= ts_ms and r.offset >= self.log_start_offset:
                            return r.offset, r.timestamp
            return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (first such), or None."""
        with self._lock:
            best: Segment | None = None
            for seg in self.segments:
                if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None:
                return None
            found = self._find_position(best, best.offset_of_max_timestamp)
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
        """Every batch with last offset >= start_offset, in order (for loaders of internal topics).

        Reads a snapshot of the segment list; do not hold across compaction or retention."""
        with self._lock:
            segments = list(self.segments)
        for seg in segments:
            if seg.next_offset <= start_offset or seg.fd < 0:
                continue
            found = self._find_position(seg, start_offset) if start_offset > seg.base_offset else (0, 0)
            if found is None:
                continue
            for _pos, h, view in seg.iter_batches(found[0]):
                if h.base_offset + h.last_offset_delta >= start_offset:
                    yield h, bytes(view)

    # ================================================================== roll / flush
    def roll(self, now_ms: int | None = None) -> None:
        """Close the active segment and start a new one at the log end (no-op if it is empty)."""
        with self._lock:
            self._roll_locked(self.clock_ms() if now_ms is None else now_ms)

    def _roll_locked(self, now_ms: int) -> None:
        old = self.active_segment
        if old.is_empty:
            return
        old.write_indexes()
        new = Segment(self.directory, old.next_offset, self.config.index_interval_bytes)
        new.next_offset = old.next_offset
        new.created_ms = now_ms
        self._add_segment(new)
        self.producer_state.map_end_offset = new.base_offset
        self.producer_state.take_snapshot(retain={seg.base_offset for seg in self.segments})

    def maybe_roll(self, now_ms: int) -> None:
        """Roll the active segment if it has been open longer than segment.ms (wall clock)."""
        with self._lock:
            seg = self.active_segment
            if not seg.is_empty and seg.created_ms is not None and now_ms - seg.created_ms > self.config.segment_ms:
                self._roll_locked(now_ms)

    def flush(self) -> None:
        """fsync every segment with unflushed data and advance the recovery point."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        for seg in self.segments:
            if seg.unflushed:
                seg.flush()
        self.active_segment.write_indexes()
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.sync()
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock_ms()
        if self.log_end_offset != self._recovery_point:
            self._recovery_point = self.log_end_offset
            _write_checkpoint(self.directory / RECOVERY_POINT_FILE, self._recovery_point, sync=False)

    def maybe_flush(self, now_ms: int) -> None:
        """flush.ms policy; also checkpoints closed segments so recovery after a crash stays short."""
        with self._lock:
            if self.closed:
                return
            if now_ms - self._last_flush_ms >= self.config.flush_ms and self._unflushed_messages:
                self._flush_locked()
                return
            closed_unflushed = [s for s in self.segments[:-1] if s.unflushed]
            if closed_unflushed:
                for seg in closed_unflushed:
                    seg.flush()
                point = self.active_segment.base_offset
                if point > self._recovery_point:
                    self._recovery_point = point
                    _write_checkpoint(self.directory / RECOVERY_POINT_FILE, point, sync=False)

    # ================================================================== retention / delete records
    def _delete_segment_locked(self, seg: Segment) -> None:
        i = self.segments.index(seg)
        del self.segments[i]
        del self._bases[i]
        seg.delete_files()
        self._position_cache.clear()

    def _set_log_start(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            _write_checkpoint(self.directory / LOG_START_FILE, offset)
            if self.leader_epoch_cache is not None:
                self.leader_epoch_cache.truncate_from_start(offset)

    def _delete_segments_below_log_start(self) -> None:
        while len(self.segments) > 1 and self.segments[1].base_offset <= self.log_start_offset:
            self._delete_segment_locked(self.segments[0])
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (<= HW) and drop segments entirely before it."""
        with self._lock:
            self._check_open()
            if offset < 0 or offset > self.high_watermark:
                raise OffsetOutOfRange(f"delete-records offset {offset} beyond high watermark {self.high_watermark}")
            if offset <= self.log_start_offset:
                return self.log_start_offset
            self._set_log_start(offset)
            if offset >= self.log_end_offset and not self.active_segment.is_empty:
                self._roll_locked(self.clock_ms())
            self._delete_segments_below_log_start()
            return self.log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole closed segments past retention.ms, then past retention.bytes (never the active
        one). Returns the number of segments deleted."""
        with self._lock:
            if self.closed or not self.config.delete:
                return 0
            deleted = 0
            cfg = self.config
            if cfg.retention_ms >= 0:
                while len(self.segments) > 1:
                    seg = self.segments[0]
                    newest = seg.max_timestamp if seg.max_timestamp >= 0 else seg.last_modified_ms()
                    if now_ms - newest <= cfg.retention_ms:
                        break
                    self._delete_segment_locked(seg)
                    deleted += 1
            if cfg.retention_bytes >= 0:
                total = self.size_bytes
                while len(self.segments) > 1 and total - self.segments[0].size >= cfg.retention_bytes:
                    total -= self.segments[0].size
                    self._delete_segment_locked(self.segments[0])
                    deleted += 1
            if deleted:
                self._set_log_start(self.segments[0].base_offset)
                self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
            return deleted

    # ================================================================== truncation (replication / recovery)
    def truncate_to(self, offset: int) -> None:
        """Remove every batch containing an offset >= ``offset``. Truncation is at a batch boundary:
        the new log end is the end of the last batch wholly below ``offset``."""
        with self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return
            self._position_cache.clear()
            cut = self.locate(offset) if offset > self.log_start_offset else None
            if cut is not None and cut.batch_base_offset <= self.log_start_offset:
                offset = self.log_start_offset  # the batch holding the log start goes: empty log there
            if offset <= self.log_start_offset:
                # nothing below the truncation point survives: start over empty at ``offset``
                for seg in list(self.segments):
                    self._delete_segment_locked(seg)
                seg = Segment(self.directory, offset, self.config.index_interval_bytes)
                seg.created_ms = self.clock_ms()
                self._add_segment(seg)
                self.log_start_offset = offset
                _write_checkpoint(self.directory / LOG_START_FILE, offset)
                # no log is left to explain any producer state (as Kafka's truncateFullyAndStartAt)
                self.producer_state.delete_snapshots_above(-1)
            else:
                while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
                    self._delete_segment_locked(self.segments[-1])
                seg = self.active_segment
                found = self._find_position(seg, offset)
                if found is not None:
                    seg.truncate_to_position(found[0])
            leo = self.log_end_offset
            self._hw = min(self._hw, leo)
            if self._recovery_point > leo:
                self._recovery_point = leo
                _write_checkpoint(self.directory / RECOVERY_POINT_FILE, leo, sync=False)
            if self.leader_epoch_cache is not None:
                self.leader_epoch_cache.truncate_from_end(leo)
            self._rebuild_producer_state()

    # ================================================================== compaction / config
    def compact(self, now_ms: int | None = None) -> CompactionStats:
        """cleanup.policy=compact: keep the latest record per key in the closed segments (now)."""
        with self._lock:
            self._check_open()
            return compact_log(self, self.clock_ms() if now_ms is None else now_ms)

    def maybe_compact(self, now_ms: int | None = None) -> CompactionStats | None:
        """A compaction pass if the log is due one (min.cleanable.dirty.ratio, max.compaction.lag.ms,
        an expired tombstone), as Kafka's cleaner schedules them; None if not."""
        with self._lock:
            self._check_open()
            now = self.clock_ms() if now_ms is None else now_ms
            return compact_log(self, now) if needs_compaction(self, now) else None

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            for seg in self.segments:
                seg.index_interval_bytes = config.index_interval_bytes

    # ================================================================== lifecycle
    def _check_open(self) -> None:
        if self.closed:
            raise NotLeaderOrFollower(f"log {self.directory.name} is closed")

    def close(self) -> None:
        """Flush, snapshot producer state and mark a clean shutdown (fast reopen without recovery)."""
        with self._lock:
            if self.closed:
                return
            self._flush_locked()
            self.producer_state.map_end_offset = self.log_end_offset
            self.producer_state.take_snapshot(retain={seg.base_offset for seg in self.segments})
            for seg in self.segments:
                seg.close()
            (self.directory / CLEAN_SHUTDOWN_FILE).touch()
            self.closed = True

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        with self._lock:
            for seg in self.segments:
                if seg.fd >= 0:
                    os.close(seg.fd)
                    seg.fd = -1
            self.closed = True
            shutil.rmtree(self.directory, ignore_errors=True)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.directory.name}, start={self.log_start_offset}, "
                f"leo={self.log_end_offset}, segments={len(self.segments)})")


__all__ = ["PartitionLog", "AppendResult", "ReadResult", "CompactionStats", "OffsetPosition", "ScanStop"]
