"""One log segment: ``<base>.log`` plus its sparse ``.index``, ``.timeindex`` and ``.txnindex``.

File formats (big-endian, like Kafka's):
  .index      entries of (relativeOffset int32, position int32), one per index.interval.bytes; the
              relative offset is the BASE offset of the batch starting at ``position`` (seed 004's
              [4, 476] means "the batch with offset base+4 starts at byte 476").
  .timeindex  entries of (timestamp int64, relativeOffset int32): the largest timestamp seen so far and
              the base offset of the batch that first reached it; strictly increasing timestamps.
  .txnindex   entries of (version int16, producerId int64, firstOffset int64, lastOffset int64,
              lastStableOffset int64): one per aborted transaction whose ABORT marker is in this segment.

The indexes are mirrored in memory (``array``s searched with ``bisect``); the files are written
lazily (at flush, roll and close). After an unclean shutdown the indexes of the recovered segments are
rebuilt from the .log, so lazily written index files are never trusted after a crash.
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tidelake.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    compute_crc,
    parse_header,
)

SCAN_CHUNK = 4 << 20
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")
_OFFSET_AND_LEN = struct.Struct(">qi")


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass
class ScanStop:
    """Why a scan stopped before the end of the file (None when it reached the end cleanly)."""

    position: int
    reason: str


def scan_file(fd: int, start: int, end: int, *, validate: bool, stop: list | None = None
              ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Yield (file position, header, batch bytes) for each batch in [start, end), reading in chunks.

    Stops (without raising) at the first truncated, malformed or (if ``validate``) CRC-failing batch;
    when ``stop`` is a list, a ScanStop describing it is appended to it.
    """
    pos = start
    buf = b""
    buf_start = start
    while pos < end:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            buf = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
            buf_start, rel = pos, 0
        try:
            h = parse_header(buf, rel)
        except CorruptRecordError as e:
            if stop is not None:
                stop.append(ScanStop(pos, str(e)))
            return
        size = h.size
        if len(buf) - rel < size:
            if pos + size > end:
                if stop is not None:
                    stop.append(ScanStop(pos, "truncated record batch"))
                return
            buf = os.pread(fd, max(SCAN_CHUNK, size) if end - pos > size else size, pos)
            buf_start, rel = pos, 0
            if len(buf) < size:
                if stop is not None:
                    stop.append(ScanStop(pos, "truncated record batch"))
                return
        if validate and compute_crc(buf, rel, size) != h.crc:
            if stop is not None:
                stop.append(ScanStop(pos, "record batch CRC mismatch"))
            return
        yield pos, h, memoryview(buf)[rel:rel + size]
        pos += size


class Segment:
    """A segment's files and in-memory index mirrors. Not thread-safe: PartitionLog locks around it."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int):
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        name = segment_name(base_offset)
        self.log_path = directory / f"{name}.log"
        self.index_path = directory / f"{name}.index"
        self.time_index_path = directory / f"{name}.timeindex"
        self.txn_index_path = directory / f"{name}.txnindex"
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        # offset index mirror: relative base offsets and positions of indexed batches
        self.index_rel = array("i")
        self.index_pos = array("i")
        # time index mirror: max-timestamp-so-far and relative offset of the batch that reached it
        self.time_ts = array("q")
        self.time_rel = array("i")
        self.aborted: list[AbortedTxn] = []
        self.next_offset = base_offset  # last offset + 1 of the data in this segment
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = -1  # max timestamp of the first batch (segment.ms rolling)
        self.created_ms: int | None = None  # wall clock of the first append in this process
        self.bytes_since_index = 0
        self._index_written = 0  # entries already on disk
        self._time_index_written = 0
        self.unflushed = False
        if self.size == 0:  # a new segment gets its (empty) index files at once, as in Kafka
            self.write_indexes()

    # ------------------------------------------------------------------ writing
    def append(self, buf, batches: list[tuple[int, int, int, int]], now_ms: int) -> None:
        """Write ``buf`` (whole batches, offsets assigned) at the end of the file.

        ``batches`` = [(position in buf, base offset, last offset, max timestamp)]."""
        position = self.size
        view = memoryview(buf)
        written = 0
        try:
            while written < len(view):
                written += os.pwrite(self.fd, view[written:], position + written)
        except OSError:
            os.ftruncate(self.fd, position)  # all-or-nothing: drop a partial write
            raise
        if self.created_ms is None:
            self.created_ms = now_ms
        for i, (pos_in_buf, base, last, max_ts) in enumerate(batches):
            self._index_batch(position + pos_in_buf, base, last, max_ts)
            end = batches[i + 1][0] if i + 1 < len(batches) else len(buf)
            self.bytes_since_index += end - pos_in_buf
        self.size = position + len(buf)
        self.unflushed = True

    def _index_batch(self, position: int, base: int, last: int, max_ts: int) -> None:
        """Update the in-memory mirrors for one batch appended at ``position`` (before its bytes
        are counted in bytes_since_index, as Kafka does)."""
        if self.next_offset == self.base_offset and self.first_batch_timestamp < 0:
            self.first_batch_timestamp = max_ts
        new_max = max_ts > self.max_timestamp
        if new_max:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = base
        if self.bytes_since_index >= self.index_interval_bytes and position > 0:
            rel = base - self.base_offset
            if not self.index_rel or rel > self.index_rel[-1]:
                self.index_rel.append(rel)
                self.index_pos.append(position)
            self.bytes_since_index = 0
        if new_max and (not self.time_ts or max_ts > self.time_ts[-1]):
            # one time-index entry per new maximum keeps lookups exact at a few bytes per entry
            self.time_ts.append(max_ts)
            self.time_rel.append(base - self.base_offset)
        self.next_offset = last + 1

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.aborted.append(txn)
        with open(self.txn_index_path, "ab") as f:
            f.write(_TXN_ENTRY.pack(0, txn.producer_id, txn.first_offset, txn.last_offset,
                                    txn.last_stable_offset))

    def write_indexes(self) -> None:
        """Append index entries not yet on disk."""
        n = len(self.index_rel)
        if n > self._index_written:
            data = b"".join(_INDEX_ENTRY.pack(self.index_rel[i], self.index_pos[i])
                            for i in range(self._index_written, n))
            with open(self.index_path, "ab") as f:
                f.write(data)
            self._index_written = n
        elif not self.index_path.exists():
            self.index_path.touch()
        n = len(self.time_ts)
        if n > self._time_index_written:
            data = b"".join(_TIME_ENTRY.pack(self.time_ts[i], self.time_rel[i])
                            for i in range(self._time_index_written, n))
            with open(self.time_index_path, "ab") as f:
                f.write(data)
            self._time_index_written = n
        elif not self.time_index_path.exists():
            self.time_index_path.touch()

    def flush(self) -> None:
        self.write_indexes()
        if self.unflushed:
            os.fsync(self.fd)
            self.unflushed = False

    # ------------------------------------------------------------------ reading
    def read(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def index_lookup(self, offset: int) -> tuple[int, int] | None:
        """Largest index entry (relative offset, position) whose relative offset <= offset - base."""
        i = bisect_right(self.index_rel, offset - self.base_offset)
        if i == 0:
            return None
        return self.index_rel[i - 1], self.index_pos[i - 1]

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch containing ``offset`` (or the first batch after it):
        binary search in the sparse index, then a short forward scan of batch headers."""
        entry = self.index_lookup(offset)
        start = entry[1] if entry else 0
        for pos, h, _ in scan_file(self.fd, start, self.size, validate=False):
            if h.base_offset + h.last_offset_delta >= offset:
                return pos, h
        return None

    def position_of(self, offset: int) -> int:
        """File position of the first batch with last offset >= ``offset`` (size if none)."""
        found = self.find_batch(offset)
        return found[0] if found else self.size

    def time_lookup(self, ts: int) -> int:
        """A position from which scanning finds the first batch whose max timestamp >= ts:
        every batch before the returned position has max timestamp < ts."""
        i = bisect_right(self.time_ts, ts - 1)  # entries with timestamp < ts
        if i == 0:
            return 0
        # all batches before this entry's batch have timestamps < time_ts[i-1] < ts
        found = self.find_batch(self.base_offset + self.time_rel[i - 1])
        return found[0] if found else 0

    def iter_batches(self, start_position: int = 0, validate: bool = False
                     ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        return scan_file(self.fd, start_position, self.size, validate=validate)

    # ------------------------------------------------------------------ loading / recovery
    def load_indexes(self) -> bool:
        """Load .index/.timeindex/.txnindex from disk and sanity-check them against the .log.

        Returns False if they are missing or inconsistent (caller then rebuilds by scanning)."""
        try:
            idx = self.index_path.read_bytes()
            tix = self.time_index_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(idx) % 8 or len(tix) % 12:
            return False
        rel, pos = array("i"), array("i")
        for r, p in _INDEX_ENTRY.iter_unpack(idx):
            if (rel and r <= rel[-1]) or p >= self.size or p < 0 or r < 0:
                return False
            rel.append(r)
            pos.append(p)
        ts_arr, trel = array("q"), array("i")
        for t, r in _TIME_ENTRY.iter_unpack(tix):
            if ts_arr and t <= ts_arr[-1]:
                return False
            ts_arr.append(t)
            trel.append(r)
        # the last indexed position must hold the batch the index says
        if pos:
            head = os.pread(self.fd, HEADER_SIZE, pos[-1])
            try:
                h = parse_header(head)
            except CorruptRecordError:
                return False
            if h.base_offset != self.base_offset + rel[-1]:
                return False
        self.index_rel, self.index_pos = rel, pos
        self.time_ts, self.time_rel = ts_arr, trel
        self._index_written, self._time_index_written = len(rel), len(ts_arr)
        self.load_txn_index()
        return True

    def load_txn_index(self) -> None:
        self.aborted = []
        try:
            data = self.txn_index_path.read_bytes()
        except FileNotFoundError:
            return
        usable = len(data) - len(data) % _TXN_ENTRY.size
        for _v, pid, first, last, lso in _TXN_ENTRY.iter_unpack(data[:usable]):
            self.aborted.append(AbortedTxn(pid, first, last, lso))

    def finish_load_from_indexes(self) -> None:
        """After load_indexes(): find next_offset / max timestamp by scanning from the last index entry."""
        start = self.index_pos[-1] if self.index_pos else 0
        if self.time_ts:
            self.max_timestamp = self.time_ts[-1]
            self.offset_of_max_timestamp = self.base_offset + self.time_rel[-1]
        self.bytes_since_index = 0
        last_pos = None
        for pos, h, _ in scan_file(self.fd, start, self.size, validate=False):
            last_pos = pos
            self.next_offset = h.base_offset + h.last_offset_delta + 1
            self.bytes_since_index += h.size
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset
        if last_pos is None and self.size == 0:
            self.next_offset = self.base_offset
        self._load_first_batch_timestamp()

    def _load_first_batch_timestamp(self) -> None:
        if self.size >= HEADER_SIZE:
            try:
                self.first_batch_timestamp = parse_header(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
            except CorruptRecordError:
                pass

    def recover(self, min_offset: int | None = None) -> tuple[int, ScanStop | None]:
        """Rebuild all in-memory indexes by validating every batch (CRC and offset order).

        Truncates the file at the first bad batch. Returns (number of valid bytes, stop reason)."""
        self.index_rel, self.index_pos = array("i"), array("i")
        self.time_ts, self.time_rel = array("q"), array("i")
        self.next_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = self.first_batch_timestamp = -1
        self.bytes_since_index = 0
        stop: list[ScanStop] = []
        valid_end = 0
        expected = self.base_offset if min_offset is None else min_offset
        for pos, h, _ in scan_file(self.fd, 0, self.size, validate=True, stop=stop):
            if h.base_offset < expected:
                stop.append(ScanStop(pos, f"offset {h.base_offset} goes backwards (expected >= {expected})"))
                break
            self._index_batch(pos, h.base_offset, h.base_offset + h.last_offset_delta, h.max_timestamp)
            self.bytes_since_index += h.size
            expected = h.base_offset + h.last_offset_delta + 1
            valid_end = pos + h.size
        reason = stop[0] if stop else None
        if valid_end < self.size:
            os.ftruncate(self.fd, valid_end)
            os.fsync(self.fd)
            self.size = valid_end
        # rewrite the index files from scratch
        for p in (self.index_path, self.time_index_path):
            p.unlink(missing_ok=True)
        self._index_written = self._time_index_written = 0
        self.write_indexes()
        self.load_txn_index()
        self.aborted = [t for t in self.aborted if t.last_offset < self.next_offset]
        return valid_end, reason

    def truncate_to_position(self, position: int) -> None:
        """Drop everything at and after ``position`` (a batch boundary), then rebuild the mirrors."""
        os.ftruncate(self.fd, position)
        self.size = position
        self.recover()  # rescans what is left; drops aborted-txn entries past the new end
        self.txn_index_path.write_bytes(b"".join(
            _TXN_ENTRY.pack(0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in self.aborted))

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        if self.fd >= 0:
            self.write_indexes()
            os.close(self.fd)
            self.fd = -1

    def delete_files(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for p in (self.log_path, self.index_path, self.time_index_path, self.txn_index_path):
            p.unlink(missing_ok=True)

    def reopen(self) -> None:
        """Re-open the .log after its file was replaced (compaction)."""
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)


def read_offset_and_length(buf, pos: int) -> tuple[int, int]:
    """(base offset, total size) of the batch at ``pos`` without parsing the rest of the header."""
    base, length = _OFFSET_AND_LEN.unpack_from(buf, pos)
    return base, length + LOG_OVERHEAD
