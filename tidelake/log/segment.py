"""One log segment: ``<base>.log`` plus its OffsetIndex, TimeIndex and TransactionIndex.

The .log holds whole RecordBatch v2 batches back to back, offsets increasing (with gaps after
compaction). ``find_batch`` is the one way to go from an offset to a file position: a binary search in
the sparse offset index, then a forward scan of batch prefixes read in small chunks.

A segment built by the cleaner lives under suffixed names (``X.log.cleaned`` ...) until it is renamed
into place (``rename``): see LogCleaner and LogLoader for the swap protocol.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tidelake.log.offset_index import ENTRY as OFFSET_ENTRY
from tidelake.log.offset_index import OffsetIndex
from tidelake.log.time_index import ENTRY as TIME_ENTRY
from tidelake.log.time_index import TimeIndex
from tidelake.log.transaction_index import TransactionIndex
from tidelake.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    compute_crc,
    parse_header,
)

SCAN_CHUNK = 4 << 20
# base offset, batch length, partition leader epoch, magic, crc, attributes, last offset delta: the
# 27 bytes a reader needs to step over a batch and know its offsets
BATCH_PREFIX = struct.Struct(">qiibIhi")
_FIND_CHUNK = 16384


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


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

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int, *, suffix: str = ""):
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        name = segment_name(base_offset)
        self.log_path = directory / f"{name}.log{suffix}"
        self.offset_index = OffsetIndex(directory / f"{name}.index{suffix}", base_offset)
        self.time_index = TimeIndex(directory / f"{name}.timeindex{suffix}", base_offset)
        self.txn_index = TransactionIndex(directory / f"{name}.txnindex{suffix}")
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset  # last offset + 1 of the data in this segment
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = -1  # max timestamp of the first batch (segment.ms rolling)
        self.created_ms: int | None = None  # wall clock of the first append in this process
        self.bytes_since_index = 0
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
        """Update the in-memory state for one batch appended at ``position`` (before its bytes are
        counted in bytes_since_index, as Kafka does)."""
        if self.next_offset == self.base_offset and self.first_batch_timestamp < 0:
            self.first_batch_timestamp = max_ts
        # both indexes name a batch by its LAST offset, as Kafka's (kafka-dump-log --verify-index-only checks it)
        if self.bytes_since_index >= self.index_interval_bytes and position > 0:
            self.offset_index.append(last, position)
            self.bytes_since_index = 0
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = base
            self.time_index.append(max_ts, last)
        self.next_offset = last + 1

    def write_indexes(self) -> None:
        """Append the offset and time index entries not yet on disk."""
        self.offset_index.flush()
        self.time_index.flush()

    def flush(self) -> None:
        self.write_indexes()
        if self.unflushed:
            os.fsync(self.fd)
            self.unflushed = False

    def indexes_full(self, max_index_bytes: int) -> bool:
        """segment.index.bytes reached by either index: the segment must roll, as in Kafka. (Checked on
        every append: array lengths rather than the indexes' own methods keep it to one call.)"""
        return (len(self.offset_index.relative_offsets) >= max_index_bytes // OFFSET_ENTRY.size
                or len(self.time_index.timestamps) >= max_index_bytes // TIME_ENTRY.size)

    # ------------------------------------------------------------------ reading
    def find_batch(self, offset: int) -> tuple[int, int] | None:
        """(position, base offset) of the batch holding ``offset``, or of the first batch after it (a
        compaction gap); None if the segment ends before ``offset``.

        A binary search in the sparse index, then a forward scan of batch prefixes read in small
        chunks (usually one pread: the index has an entry every index.interval.bytes)."""
        entry = self.offset_index.lookup(offset)
        pos = entry[1] if entry else 0
        end = self.size
        fd = self.fd
        while pos < end:
            chunk = os.pread(fd, min(_FIND_CHUNK, end - pos), pos)
            p = 0
            while p + 27 <= len(chunk):
                base, length, _ple, _magic, _crc, _attrs, delta = BATCH_PREFIX.unpack_from(chunk, p)
                if base + delta >= offset:
                    return pos + p, base
                p += length + LOG_OVERHEAD
            if p == 0:
                return None  # a prefix that does not fit: cannot happen in a recovered segment
            pos += p
        return None

    def read_batches(self, position: int, max_bytes: int, limit_offset: int, min_one_batch: bool
                     ) -> tuple[bytes, int]:
        """Whole batches from ``position`` (a batch start): as many as fit in ``max_bytes`` (at least
        one if ``min_one_batch``), none with a base offset >= ``limit_offset``. Returns (data, offset
        after its last batch); (b"", -1) when nothing is returned. One pread in the common case."""
        want = min(max(max_bytes, 0), self.size - position)
        data = os.pread(self.fd, want, position) if want >= LOG_OVERHEAD else b""
        end = 0
        next_offset = -1
        while end + 27 <= len(data):
            b, length, _ple, _magic, _crc, _attrs, delta = BATCH_PREFIX.unpack_from(data, end)
            if b >= limit_offset or end + length + LOG_OVERHEAD > len(data):
                break
            end += length + LOG_OVERHEAD
            next_offset = b + delta + 1
        if end == 0:
            if not min_one_batch:
                return b"", -1
            head = os.pread(self.fd, 27, position)
            b, length, _ple, _magic, _crc, _attrs, delta = BATCH_PREFIX.unpack_from(head, 0)
            return os.pread(self.fd, length + LOG_OVERHEAD, position), b + delta + 1
        return (data if end == len(data) else data[:end]), next_offset

    def header_at(self, position: int) -> BatchHeader:
        return parse_header(os.pread(self.fd, HEADER_SIZE, position))

    def time_lookup(self, ts: int) -> int:
        """A position from which scanning finds the first batch whose max timestamp >= ts:
        every batch before the returned position has max timestamp < ts."""
        offset = self.time_index.lookup(ts)
        if offset is None:
            return 0
        found = self.find_batch(offset)
        return found[0] if found else 0

    def iter_batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        return scan_file(self.fd, start_position, self.size, validate=False)

    def duplicate_fd(self) -> int:
        """A private descriptor of the .log for work done without the log's lock (fsync, compaction):
        it stays valid if the segment is deleted or replaced meanwhile. The caller closes it."""
        return os.dup(self.fd)

    # ------------------------------------------------------------------ loading / recovery
    def load_indexes(self) -> bool:
        """Load the index files and check them against the .log; load the .txnindex.

        Returns False if they are missing or inconsistent (the caller then rebuilds by scanning)."""
        if not (self.offset_index.load(self.size) and self.time_index.load()):
            return False
        # The last entry of each must name the last offset of a batch: what this version writes and Kafka's tools
        # verify. An index of an older tidelake (its entries named a batch by its base offset, which still finds the
        # right batches) fails this unless its last batch held one record, and is rebuilt from the .log then.
        if self.offset_index:  # the last indexed position must hold the batch the index says
            rel, pos = self.offset_index.relative_offsets[-1], self.offset_index.positions[-1]
            try:
                if self.header_at(pos).last_offset != self.base_offset + rel:
                    return False
            except CorruptRecordError:
                return False
        last = self.time_index.last_entry
        if last is not None:
            found = self.find_batch(last[1])
            try:
                if found is None or self.header_at(found[0]).last_offset != last[1]:
                    return False
            except CorruptRecordError:
                return False
        self.txn_index.load()
        return True

    def finish_load_from_indexes(self) -> None:
        """After load_indexes(): find next_offset / max timestamp by scanning from the last index entry."""
        last = self.time_index.last_entry
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        self.bytes_since_index = 0
        for _pos, h, _ in scan_file(self.fd, self.offset_index.last_position, self.size, validate=False):
            self.next_offset = h.base_offset + h.last_offset_delta + 1
            self.bytes_since_index += h.size
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset
        if self.size >= HEADER_SIZE:
            try:
                self.first_batch_timestamp = self.header_at(0).max_timestamp
            except CorruptRecordError:
                pass

    def recover(self, min_offset: int | None = None) -> tuple[int, ScanStop | None]:
        """Rebuild the indexes by validating every batch (CRC and offset order); truncate the file at
        the first bad batch. Returns (number of valid bytes, why the scan stopped early or None)."""
        self.offset_index.reset()
        self.time_index.reset()
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
        if valid_end < self.size:
            os.ftruncate(self.fd, valid_end)
            os.fsync(self.fd)
            self.size = valid_end
        self.write_indexes()
        self.txn_index.load()
        self.txn_index.truncate_to(self.next_offset)
        return valid_end, stop[0] if stop else None

    def truncate_to_position(self, position: int) -> None:
        """Drop everything at and after ``position`` (a batch boundary), then rebuild the indexes."""
        os.ftruncate(self.fd, position)
        self.size = position
        self.recover()

    # ------------------------------------------------------------------ lifecycle
    def rename(self, suffix: str) -> None:
        """Rename every file to its ``suffix`` form: the indexes first, the .log last (the swap's
        commit point, see LogLoader). The open descriptor follows the file."""
        name = segment_name(self.base_offset)
        d = self.directory
        self.offset_index.rename(d / f"{name}.index{suffix}")
        self.time_index.rename(d / f"{name}.timeindex{suffix}")
        self.txn_index.rename(d / f"{name}.txnindex{suffix}")
        log_path = d / f"{name}.log{suffix}"
        os.replace(self.log_path, log_path)
        self.log_path = log_path

    def close(self) -> None:
        if self.fd >= 0:
            self.write_indexes()
            os.close(self.fd)
            self.fd = -1

    def detach(self) -> None:
        """Close the .log without writing anything (the files are replaced or about to be deleted)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete_files(self) -> None:
        self.detach()
        for p in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            p.unlink(missing_ok=True)

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)
