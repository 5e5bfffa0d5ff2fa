"""PartitionLog: one topic-partition's log (Kafka's UnifiedLog) (SPEC B3, B6, B7).

Directory ``<data-dir>/<topic>-<partition>/`` holds the segments (``<20-digit base>.log`` / ``.index``
/ ``.timeindex`` / ``.txnindex``), ``leader-epoch-checkpoint``, producer ``<offset>.snapshot`` files,
``log-start-offset`` and ``recovery-point`` checkpoints and, after a clean close, ``.clean-shutdown``.
LogLoader opens and recovers it; its LocalLog holds the segments (locate, read, roll, flush, remove,
truncate); LogCleaner compacts. This class keeps what sits above the segments: append validation and
producer state (idempotence, transactions), leader epochs, the high watermark, last stable offset
and log start, and the retention, DeleteRecords, truncation and compaction decisions.

Hot path: client batches stay opaque. ``append`` reads only each batch's 61-byte header, CRC-checks
it, patches the base offset (and leader epoch) in place and writes the request's bytes with one
``os.write``; ``read`` returns whole batches from one ``os.pread``.

Threads: every public method takes the partition's lock, which its LocalLog shares, so the broker's
event loop and the maintenance thread (LogMaintenance) can share a log. Slow work runs without the
lock: fsyncs (``maybe_flush``) and compaction passes work on private file descriptors and take the
lock only for short steps; a cleaned segment is swapped in under the lock, atomically for readers.
"""
from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Callable, Iterator

from tidelake.clock import wall_ms
from tidelake.errors import CorruptMessage, KafkaStorageError, NotLeaderOrFollower, OffsetOutOfRange
from tidelake.log.checkpoint import LOG_START_FILE, write_offset
from tidelake.log.cleaner import CompactionStats, LogCleaner
from tidelake.log.batch_validation import assign_offsets, validate_client_batches, whole_replicated_batches
from tidelake.log.config import LogConfig
from tidelake.log.loader import LoadedLog, LogLoader, rebuild_producer_state
from tidelake.log.local_log import LocalLog
from tidelake.log.results import AppendResult, OffsetPosition, ReadResult
from tidelake.log.segment import Segment
from tidelake.log.transaction_index import AbortedTxn
from tidelake.protocol import records as rb
from tidelake.protocol.records import BatchHeader


class PartitionLog:
    """A partition's log. Create with ``PartitionLog.open(directory, config)``."""

    def __init__(self, directory: Path, config: LogConfig, loaded: LoadedLog, clock_ms: Callable[[], int]):
        self.directory = directory
        self.config = config
        self.clock_ms = clock_ms
        self._lock = threading.RLock()  # guards this object and its LocalLog alike
        self._cleaning = threading.Lock()  # one compaction pass at a time; taken before _lock
        self.producer_state = loaded.producer_state
        self.leader_epoch_cache = loaded.leader_epoch_cache
        self._local = LocalLog(directory, config, loaded.segments, loaded.recovery_point, self._lock,
                               clock_ms, self.leader_epoch_cache.sync)
        self.log_start_offset = loaded.log_start_offset
        self._hw = self.log_end_offset
        self.replicated = False  # False: the high watermark follows the log end (single replica)
        self.cleaner = LogCleaner()
        self._keys_required = config.compact  # KIP-467 key check on append (cached off the hot path)
        self.recovery_report = loaded.recovery_report  # what recovery did on open (for logs and tests)
        self.recovered_segments = loaded.recovered_segments  # segments validated by a full scan on open

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, clock_ms: Callable[[], int] | None = None
             ) -> "PartitionLog":
        """Open (creating if needed) and recover the log in ``directory``."""
        clock = clock_ms or wall_ms
        directory = Path(directory)
        return cls(directory, config, LogLoader(directory, config, clock).load(), clock)

    # ================================================================== segments (LocalLog's)
    @property
    def segments(self) -> list[Segment]:
        return self._local.segments

    @property
    def active_segment(self) -> Segment:
        return self._local.active_segment

    @property
    def closed(self) -> bool:
        return self._local.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self._local.closed = value

    @property
    def size_bytes(self) -> int:
        return self._local.size_bytes

    # ================================================================== offsets
    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

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
    def local_log_start_offset(self) -> int:
        """The first offset on this disk (Kafka's localLogStartOffset): the log start unless tiered storage
        holds the older part, whose offsets [log start, local log start) only the object store serves."""
        return max(self.log_start_offset, self._local.segments[0].base_offset)

    # ================================================================== append
    def append(self, data: bytes | bytearray | memoryview, *, now_ms: int | None = None,
               leader_epoch: int = 0) -> AppendResult:
        """Append a Produce request's ``records`` (one or more client RecordBatch v2).

        ``data`` given as a bytearray or writable memoryview is patched in place (base offsets, leader
        epoch, LogAppendTime) only after every batch validated; other types are copied first.

        All-or-nothing. Raises CorruptMessage (bad CRC / magic / truncation / inconsistent counts),
        MessageTooLarge (a batch over max.message.bytes), InvalidRecord (a record without a key on a
        compacted topic; ``record_errors`` names each), InvalidProducerEpoch and
        OutOfOrderSequenceNumber. A retried duplicate batch is not written: the result carries the
        original offsets and ``duplicate=True``."""
        if now_ms is None:
            now_ms = self.clock_ms()
        if isinstance(data, bytearray) or (isinstance(data, memoryview) and not data.readonly):
            buf = data  # patched in place (offsets, leader epoch): saves a copy of the request
        else:
            buf = bytearray(data)
        n = len(buf)
        headers = validate_client_batches(buf, self.config.max_message_bytes, self._keys_required,
                                          self.directory.name)
        with self._lock:
            self._check_open()
            dup = self.producer_state.check_request(headers)
            if dup is not None:
                return AppendResult(dup.first_offset, dup.last_offset,
                                    dup.timestamp if self.config.log_append_time else -1,
                                    self.log_start_offset, duplicate=True)
            total_delta = sum(h.last_offset_delta + 1 for _, h in headers)
            max_ts = max(h.max_timestamp for _, h in headers)
            local = self._local   # (the hot path: no property or wrapper calls)
            with self._writing():
                if local.needs_roll_for_append(n, total_delta, max_ts, now_ms):
                    self._roll_locked(now_ms)
                seg = local.segments[-1]
                first_offset = seg.next_offset
                offset = first_offset + total_delta
                log_append_time = self.config.log_append_time
                batches = assign_offsets(buf, headers, first_offset, leader_epoch,
                                         now_ms if log_append_time else None)
                seg.append(buf, batches, now_ms)
            if leader_epoch > self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(leader_epoch, first_offset)
            ps = self.producer_state
            for (pos, h), (_, base, _last, bmax) in zip(headers, batches):
                if h.producer_id >= 0:
                    ps.update(h._replace(base_offset=base, max_timestamp=bmax))
            ps.map_end_offset = offset
            local.count_appended(total_delta)
            return AppendResult(first_offset, offset - 1, now_ms if log_append_time else -1,
                                self.log_start_offset)

    def append_marker(self, *, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, now_ms: int | None = None, leader_epoch: int = 0,
                      transaction_version: int = 0) -> int:
        """Write a COMMIT/ABORT control batch ending ``producer_id``'s open transaction here
        (``transaction_version``: the one WriteTxnMarkers v2 names, which decides the epoch check).

        Returns the marker's offset. An ABORT adds a .txnindex entry; the LSO moves past the txn."""
        if now_ms is None:
            now_ms = self.clock_ms()
        with self._lock:
            self._check_open()
            ps = self.producer_state
            ps.check_marker(producer_id, producer_epoch, coordinator_epoch, transaction_version)
            batch = bytearray(rb.build_control_batch(
                rb.CONTROL_COMMIT if commit else rb.CONTROL_ABORT, producer_id=producer_id,
                producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=now_ms))
            with self._writing():
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
                seg.txn_index.append(AbortedTxn(producer_id, done.first_offset, offset, self._lso_value()))
            self._local.count_appended(1)
            return offset

    def append_replicated(self, data: bytes | bytearray | memoryview, *, now_ms: int | None = None) -> int:
        """A follower's append of batches fetched from the leader: offsets, leader epochs and
        timestamps are kept as the leader wrote them (data and control batches alike); the leader
        epoch cache, producer state (so a new leader still deduplicates retries) and the .txnindex
        follow. The first batch must start at the log end. Returns the new log end offset.
        Raises CorruptMessage."""
        if now_ms is None:
            now_ms = self.clock_ms()
        buf = data if isinstance(data, bytearray) else bytearray(data)
        n = len(buf)
        headers, pos = whole_replicated_batches(buf)
        if not headers:
            return self.log_end_offset
        with self._lock:
            self._check_open()
            if headers[0][1].base_offset != self.log_end_offset:
                raise CorruptMessage(f"replicated batch at offset {headers[0][1].base_offset} does not start at "
                                     f"the log end {self.log_end_offset}")
            end = headers[-1][1].base_offset + headers[-1][1].last_offset_delta + 1
            max_ts = max(h.max_timestamp for _, h in headers)
            with self._writing():
                self._maybe_roll_for_append(pos, end - headers[0][1].base_offset, max_ts, now_ms)
                seg = self.active_segment
                seg.append(buf if pos == n else memoryview(buf)[:pos],
                           [(p, h.base_offset, h.base_offset + h.last_offset_delta, h.max_timestamp)
                            for p, h in headers], now_ms)
            ps = self.producer_state
            for p, h in headers:
                if h.partition_leader_epoch > self.leader_epoch_cache.latest_epoch:
                    self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
                done = ps.replay(buf, p, h)
                if done is not None and done.is_aborted:
                    seg.txn_index.append(AbortedTxn(h.producer_id, done.first_offset, h.base_offset,
                                                    self._lso_value()))
            ps.map_end_offset = end
            self._local.count_appended(end - headers[0][1].base_offset)
            return end

    # ================================================================== read
    def locate(self, offset: int) -> OffsetPosition | None:
        """The seed-004 lookup, step by step: segment by binary search over base offsets, the sparse
        index entry by binary search, then the batch found by a short forward scan."""
        with self._lock:
            return self._local.locate(offset)

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        """Whole batches starting with the batch containing ``offset``, from one segment.

        No batch with base offset >= ``max_offset`` (pass the HW or the LSO) is returned; at least one
        batch when ``min_one_batch`` even if it is larger than ``max_bytes``. Raises OffsetOutOfRange
        if offset < the local log start or offset > LEO; offset == LEO gives empty data."""
        with self._lock:
            self._check_open()
            leo = self.log_end_offset
            if offset < self.local_log_start_offset or offset > leo:
                raise OffsetOutOfRange(
                    f"offset {offset} outside [{self.local_log_start_offset}, {leo}]")
            result = ReadResult(b"", self.high_watermark, self._lso_value(), self.log_start_offset)
            limit = leo if max_offset is None else min(max_offset, leo)
            if offset >= limit:
                return result
            found = self._local.read(offset, max_bytes, limit, min_one_batch)
            if found is not None:
                result.data, result.first_offset, result.next_offset = found
            return result

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping [start_offset, end_offset)."""
        with self._lock:
            return self._local.aborted_transactions(start_offset, end_offset)

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ts_ms, or None (ListOffsets)."""
        with self._lock:
            return self._local.offset_for_timestamp(ts_ms, self.log_start_offset)

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (first such), or None."""
        with self._lock:
            return self._local.max_timestamp()

    def iter_batches(self, start_offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch with last offset >= start_offset, in order, up to the log end (for loaders of
        internal topics); safe while compaction or retention runs."""
        return self._local.iter_batches(start_offset)

    # ================================================================== roll / flush
    def roll(self, now_ms: int | None = None) -> None:
        """Close the active segment and start a new one at the log end (no-op if it is empty)."""
        with self._lock:
            self._roll_locked(self.clock_ms() if now_ms is None else now_ms)

    def _roll_locked(self, now_ms: int) -> None:
        new = self._local.roll(now_ms)
        if new is not None:
            self.producer_state.map_end_offset = new.base_offset
            self.producer_state.take_snapshot(retain=self._local.base_offsets)

    def _maybe_roll_for_append(self, size: int, offset_count: int, max_ts: int, now_ms: int) -> None:
        if self._local.needs_roll_for_append(size, offset_count, max_ts, now_ms):
            self._roll_locked(now_ms)

    def maybe_roll(self, now_ms: int) -> None:
        """Roll the active segment if it has been open longer than segment.ms (wall clock)."""
        with self._lock:
            if not self.closed and self._local.needs_time_roll(now_ms):
                self._roll_locked(now_ms)

    def flush(self) -> None:
        """fsync every segment with unflushed data and advance the recovery point."""
        with self._lock:
            self._local.flush()

    def maybe_flush(self, now_ms: int) -> None:
        """The flush.ms policy, and an fsync of closed segments so that recovery after a crash stays
        short. For the maintenance thread: the fsyncs run without the lock, so appends go on meanwhile."""
        self._local.maybe_flush(now_ms)

    # ================================================================== retention / delete records
    def _set_log_start(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            write_offset(self.directory / LOG_START_FILE, offset)
            self.leader_epoch_cache.truncate_from_start(offset)

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
            self._local.remove_oldest_segments(lambda _seg, nxt: nxt.base_offset <= self.log_start_offset,
                                               delete_files=True)
            self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
            return self.log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole closed segments past retention.ms, then past retention.bytes (never the active
        one). Returns the number of segments deleted. Their files are removed after the lock is released."""
        doomed: list[Segment] = []
        with self._lock:
            if self.closed or not self.config.delete:
                return 0
            cfg = self.config
            if cfg.retention_ms >= 0:
                def expired(seg: Segment, _next: Segment) -> bool:
                    newest = seg.max_timestamp if seg.max_timestamp >= 0 else seg.last_modified_ms()
                    return now_ms - newest > cfg.retention_ms
                doomed += self._local.remove_oldest_segments(expired, delete_files=False)
            if cfg.retention_bytes >= 0:
                excess = self.size_bytes - cfg.retention_bytes

                def over_size(seg: Segment, _next: Segment) -> bool:
                    nonlocal excess
                    excess -= seg.size
                    return excess >= 0
                doomed += self._local.remove_oldest_segments(over_size, delete_files=False)
            if doomed:
                self._set_log_start(self.segments[0].base_offset)
                self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
        for seg in doomed:
            seg.delete_files()
        return len(doomed)

    # ================================================================== tiered storage (the remote log manager's)
    def segments_to_copy(self, remote_end_offset: int) -> list[Segment]:
        """Closed segments holding offsets at or past ``remote_end_offset`` (not yet in the object store),
        wholly below the last stable offset (as Kafka copies: never an open transaction's records), oldest
        first."""
        with self._lock:
            lso = self._lso_value()
            return [s for s in self._local.segments[:-1]
                    if s.next_offset > max(remote_end_offset, s.base_offset) and s.next_offset <= lso]

    def apply_local_retention(self, now_ms: int, remote_end_offset: int) -> int:
        """A tiered log's local retention: delete the oldest local segments wholly below
        ``remote_end_offset`` (already copied) past local.retention.ms, then past local.retention.bytes
        (each -2: retention.*). The log start stays: the object store serves those offsets. Returns the
        number of segments deleted; their files go after the lock is released."""
        doomed: list[Segment] = []
        with self._lock:
            if self.closed:
                return 0
            cfg = self.config
            retention_ms, retention_bytes = cfg.effective_local_retention_ms, cfg.effective_local_retention_bytes
            if retention_ms >= 0:
                def expired(seg: Segment, nxt: Segment) -> bool:
                    newest = seg.max_timestamp if seg.max_timestamp >= 0 else seg.last_modified_ms()
                    return nxt.base_offset <= remote_end_offset and now_ms - newest > retention_ms
                doomed += self._local.remove_oldest_segments(expired, delete_files=False)
            if retention_bytes >= 0:
                excess = self.size_bytes - retention_bytes

                def over_size(seg: Segment, nxt: Segment) -> bool:
                    nonlocal excess
                    if nxt.base_offset > remote_end_offset or excess - seg.size < 0:
                        return False
                    excess -= seg.size
                    return True
                doomed += self._local.remove_oldest_segments(over_size, delete_files=False)
            if doomed:
                self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
        for seg in doomed:
            seg.delete_files()
        return len(doomed)

    def advance_log_start(self, offset: int) -> None:
        """Remote retention deleted the offsets below ``offset``: the log starts there (local segments
        wholly below it go too)."""
        doomed: list[Segment] = []
        with self._lock:
            if self.closed or offset <= self.log_start_offset:
                return
            self._set_log_start(min(offset, self.log_end_offset))
            doomed = self._local.remove_oldest_segments(lambda _s, nxt: nxt.base_offset <= self.log_start_offset,
                                                        delete_files=False)
        for seg in doomed:
            seg.delete_files()

    def extend_log_start_to_remote(self, remote_start: int, remote_end: int) -> None:
        """At start: the object store holds [remote_start, remote_end); reaching the local log, the log
        starts at ``remote_start`` (the loader knew only the local segments)."""
        with self._lock:
            if remote_start < self.log_start_offset <= remote_end:
                self.log_start_offset = remote_start
                write_offset(self.directory / LOG_START_FILE, remote_start)

    # ================================================================== leadership (replication)
    def begin_leader_epoch(self, epoch: int) -> None:
        """This replica became leader in ``epoch``: the epoch starts at the current log end (KIP-101),
        so OffsetForLeaderEpoch answers followers of older epochs where those ended."""
        with self._lock:
            self.leader_epoch_cache.assign(epoch, self.log_end_offset)

    # ================================================================== truncation (replication / recovery)
    def truncate_to(self, offset: int) -> None:
        """Remove every batch containing an offset >= ``offset``. Truncation is at a batch boundary:
        the new log end is the end of the last batch wholly below ``offset``."""
        with self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return
            cut = self._local.locate(offset) if offset > self.log_start_offset else None
            if cut is not None and cut.batch_base_offset <= self.log_start_offset:
                offset = self.log_start_offset  # the batch holding the log start goes: empty log there
            if offset <= self.log_start_offset:
                # nothing below the truncation point survives: start over empty at ``offset``
                self._start_over_locked(offset)
            else:
                self._local.truncate_to(offset)
            leo = self.log_end_offset
            self._hw = min(self._hw, leo)
            if self._local.recovery_point > leo:
                self._local.set_recovery_point(leo)
            self.leader_epoch_cache.truncate_from_end(leo)
            rebuild_producer_state(self.producer_state, self.segments, high_watermark=self.high_watermark)

    def _start_over_locked(self, offset: int) -> None:
        self._local.start_at(offset)
        self.log_start_offset = offset
        write_offset(self.directory / LOG_START_FILE, offset)
        # no log is left to explain any producer state (as Kafka's truncateFullyAndStartAt)
        self.producer_state.delete_snapshots_above(-1)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower whose log ends before the leader's log start (it was away longer than the
        leader's retention): drop everything and continue empty at ``offset`` (Kafka's
        ``truncateFullyAndStartAt``)."""
        with self._lock:
            self._check_open()
            self._start_over_locked(offset)
            self._hw = offset
            self._local.set_recovery_point(offset)
            self.leader_epoch_cache.clear()
            rebuild_producer_state(self.producer_state, self.segments, high_watermark=offset)

    # ================================================================== compaction / config
    def compact(self, now_ms: int | None = None) -> CompactionStats:
        """cleanup.policy=compact: keep the latest record per key in the closed segments (now)."""
        return self._clean(self.clock_ms() if now_ms is None else now_ms, only_if_due=False)

    def maybe_compact(self, now_ms: int | None = None) -> CompactionStats | None:
        """A compaction pass if the log is due one (min.cleanable.dirty.ratio, max.compaction.lag.ms,
        an expired tombstone), as Kafka's cleaner schedules them; None if not."""
        return self._clean(self.clock_ms() if now_ms is None else now_ms, only_if_due=True)

    def _clean(self, now_ms: int, *, only_if_due: bool) -> CompactionStats | None:
        """One LogCleaner pass: plan under the lock, clean without it, swap the results in under it."""
        with self._cleaning:
            with self._lock:
                self._check_open()
                if only_if_due and not self.cleaner.is_due(self.segments, self.config, now_ms):
                    return None
                job = self.cleaner.plan(self.segments, self.config, now_ms)
                version = self._local.layout_version
            if job is None:
                return CompactionStats()
            try:
                result = self.cleaner.clean(job, lambda: self.closed)
                if result is None:
                    return CompactionStats()  # the log closed midway
                with self._lock:
                    if self.closed or version != self._local.layout_version:
                        result.discard()  # truncated or deleted meanwhile: the pass is void
                        return CompactionStats()
                    self._local.replace_segments(result.replacements)
                    self.cleaner.commit(job, result)
                if result.replacements:
                    self._local.sync_directory()  # the renames survive a power loss (outside the lock)
                return result.stats
            finally:
                job.close()

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self._keys_required = config.compact
            self._local.update_config(config)

    # ================================================================== lifecycle
    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """An append's writes: an OSError (a full disk, a file-size limit) is KAFKA_STORAGE_ERROR naming this
        log. Nothing of the failed append stays (Segment.append cuts a partial write off), so appends succeed
        again once there is room."""
        try:
            yield
        except OSError as e:
            raise KafkaStorageError(f"cannot write to {self.directory.name} in {self.directory.parent}: "
                                    f"{e.strerror or e}") from e

    def _check_open(self) -> None:
        if self.closed:
            raise NotLeaderOrFollower(f"log {self.directory.name} is closed")

    def close(self) -> None:
        """Flush, snapshot producer state and mark a clean shutdown (fast reopen without recovery)."""
        with self._lock:
            if self.closed:
                return
            self._local.flush()
            self.producer_state.map_end_offset = self.log_end_offset
            self.producer_state.take_snapshot(retain=self._local.base_offsets)
            self._local.close()

    def delete(self) -> None:
        """Close and remove the whole partition directory (after any compaction pass has stopped, so
        that none writes into the directory being removed)."""
        with self._lock:
            self._local.detach()
        with self._cleaning:
            self._local.delete_directory()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.directory.name}, start={self.log_start_offset}, "
                f"leo={self.log_end_offset}, segments={len(self.segments)})")
