"""RemoteLogReader: Fetch reads below the local log start, served from the object store with the
bytes the segment had on disk.

A read never waits on the store on the caller's thread (the broker's event loop): what is cached is
answered at once; what is not is fetched by the reader's threads — a segment's offset and transaction
indexes whole (the index cache), its .log in ranged GETs of aligned chunks (the chunk cache) — and
``read`` answers None ("pending"); ``on_ready`` is called from a reader thread once the bytes are
there, so the Fetch, waiting as a long poll does, reads again. Each answer also fetches ahead: the
next READ_AHEAD_BYTES of the segment and of the segments after it (their indexes and chunks), so a
consumer reading history sequentially finds its bytes already fetched.

A failed GET is answered once as KAFKA_STORAGE_ERROR naming the file (the client retries), never as
an endless empty read.

``offset_for_timestamp`` (ListOffsets by timestamp below the local log start, as KIP-405's
RemoteLogManager.findOffsetByTimestamp) runs on the same threads and answers a future: the first remote
segment whose newest timestamp reaches the target, its time index then its .log scanned from there.
"""
from __future__ import annotations

import logging
import struct
import threading
from array import array
from bisect import bisect_right
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, NamedTuple

from tidelake.errors import KafkaStorageError, OffsetOutOfRange
from tidelake.log.offset_index import ENTRY as OFFSET_ENTRY
from tidelake.log.remote.metadata import (LOG_FILE, OFFSET_INDEX_FILE, TIME_INDEX_FILE, TXN_INDEX_FILE,
                                          RemotePartitionMetadata, RemoteSegment)
from tidelake.log.remote.settings import RemoteLogSettings
from tidelake.log.time_index import ENTRY as TIME_ENTRY
from tidelake.log.transaction_index import ENTRY as TXN_ENTRY
from tidelake.protocol.records import HEADER_SIZE, LOG_OVERHEAD, decode_records, parse_header
from tidelake.storage import Storage

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20        # one ranged GET: large enough for throughput, small enough to start reading soon
READ_AHEAD_BYTES = 16 << 20  # fetched beyond what a read returned (a sequential consumer's next reads)
READER_THREADS = 4
_PREFIX = struct.Struct(">qiibIhi")  # a batch's base offset, length, ..., last offset delta


@dataclass(slots=True)
class RemoteRead:
    """Whole batches of one remote segment: its bytes, the first batch's base offset, the offset after
    the last batch, and (read_committed) the aborted transactions overlapping them."""
    data: bytes
    first_offset: int
    next_offset: int
    aborted: list[tuple[int, int]] | None


@dataclass(slots=True)
class SegmentIndexes:
    relative_offsets: array
    positions: array
    aborted: list[tuple[int, int, int]]  # (producer id, first offset, last offset) per aborted transaction

    @property
    def nbytes(self) -> int:
        return 8 * len(self.positions) + 24 * len(self.aborted) + 64


NO_INDEXES = SegmentIndexes(array("i"), array("i"), [])  # a read at a segment's start with no transaction index


@dataclass(slots=True)
class SegmentTimeIndex:
    timestamps: array
    relative_offsets: array

    @property
    def nbytes(self) -> int:
        return 12 * len(self.timestamps) + 64


class TimestampOffset(NamedTuple):
    """A ListOffsets answer found in the store: the record's timestamp, its offset and its batch's leader
    epoch (-1: none)."""
    timestamp: int
    offset: int
    leader_epoch: int


class BatchSpan(NamedTuple):
    """Whole batches found in a read's bytes: [start, end) positions, first base offset, offset after the last."""
    start: int
    end: int
    first_offset: int
    next_offset: int


class _LruBytes:
    """An LRU map whose values have a size; the oldest go past ``limit`` bytes."""

    def __init__(self, limit: int, size_of: Callable[[object], int]):
        self.limit, self.size_of = limit, size_of
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def put(self, key, value) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= self.size_of(old)
            self._items[key] = value
            self._bytes += self.size_of(value)
            while self._bytes > self.limit and len(self._items) > 1:
                _k, dropped = self._items.popitem(last=False)
                self._bytes -= self.size_of(dropped)


class RemoteLogReader:
    def __init__(self, storage: Storage, settings: RemoteLogSettings,
                 metadata_of: Callable[[str, int], RemotePartitionMetadata | None]):
        self.storage = storage
        self.metadata_of = metadata_of
        self._indexes = _LruBytes(settings.index_cache_bytes, lambda v: v.nbytes)
        self._chunks = _LruBytes(settings.reader_cache_bytes, len)
        self._pool = ThreadPoolExecutor(READER_THREADS, thread_name_prefix="remote-log-reader")
        self._pending: dict = {}  # key being fetched -> who to tell when it is there
        self._failed: dict[str, str] = {}  # segment folder -> the failed GET's one line, answered once
        self._lock = threading.Lock()
        self.gets = 0  # ranged GETs and index GETs made (tests, figures)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    @property
    def index_cache_bytes(self) -> int:
        """Bytes of segment indexes held (at most remote.log.index.file.cache.total.size.bytes)."""
        return self._indexes.held_bytes

    # ------------------------------------------------------------------ reading
    def read(self, topic: str, partition: int, offset: int, max_bytes: int, limit: int, *, min_one: bool,
             read_committed: bool, on_ready: Callable[[], None]) -> RemoteRead | None:
        """Whole batches from the remote segment holding ``offset`` (none based at or past ``limit``),
        up to ``max_bytes`` (at least one batch with ``min_one``); None while their bytes are fetched.
        Raises OffsetOutOfRange (no remote segment holds it) and KafkaStorageError (a GET failed)."""
        meta = self.metadata_of(topic, partition)
        seg = meta.segment_for(offset) if meta is not None else None
        if seg is None or offset < meta.start_offset:
            raise OffsetOutOfRange(f"offset {offset} of {topic}-{partition} is in no remote segment")
        self._raise_failure(seg)
        if offset <= seg.base_offset and seg.txn_index_bytes == 0:
            # a sequential reader enters each segment at its start: no index to look the offset up in and no
            # aborted transaction to tell, so the segment's bytes are the one GET it costs
            indexes, start, scan_end = NO_INDEXES, 0, _PREFIX.size   # the first batch's prefix, at least
        else:
            indexes = self._indexes.get(seg.folder)
            if indexes is None:
                self._fetch_indexes(seg, on_ready)
                return None
            i = bisect_right(indexes.relative_offsets, offset - seg.base_offset)
            start = indexes.positions[i - 1] if i else 0
            # the batch holding ``offset`` starts before the next index entry: read from there on
            scan_end = indexes.positions[i] if i < len(indexes.positions) else seg.size
        end = min(seg.size, scan_end + max(max_bytes, 0) + LOG_OVERHEAD)
        data = self._cached(seg, start, end, on_ready)
        if data is None:
            return None
        found = _whole_batches(data, offset, max_bytes, limit, min_one)
        if found is None:
            return RemoteRead(b"", offset, offset, [] if read_committed else None)
        if found.end > len(data):  # one batch larger than what was read: read it whole
            data = self._cached(seg, start, start + found.end, on_ready)
            if data is None:
                return None
        self._read_ahead(meta, seg, start + found.end, on_ready)
        aborted = None
        if read_committed:
            aborted = [(pid, first) for pid, first, last in indexes.aborted
                       if last >= found.first_offset and first < found.next_offset]
        return RemoteRead(bytes(data[found.start:found.end]), found.first_offset, found.next_offset, aborted)

    def _raise_failure(self, seg: RemoteSegment) -> None:
        with self._lock:
            failure = self._failed.pop(seg.folder, None)
        if failure is not None:
            raise KafkaStorageError(failure)

    # ------------------------------------------------------------------ the caches
    def _cached(self, seg: RemoteSegment, start: int, end: int, on_ready) -> memoryview | None:
        """Bytes [start, end) of the segment's .log if every chunk is cached, else None (the missing
        chunks are being fetched)."""
        first, last = start // CHUNK_BYTES, (max(end, start + 1) - 1) // CHUNK_BYTES
        parts, missing = [], False
        for n in range(first, last + 1):
            chunk = self._chunks.get((seg.folder, n))
            if chunk is None:
                missing = True
                self._fetch_chunk(seg, n, on_ready)
            else:
                parts.append(chunk)
        if missing:
            return None
        whole = parts[0] if len(parts) == 1 else b"".join(parts)
        return memoryview(whole)[start - first * CHUNK_BYTES:end - first * CHUNK_BYTES]

    def _read_ahead(self, meta: RemotePartitionMetadata, seg: RemoteSegment, position: int, on_ready) -> None:
        """Fetch the READ_AHEAD_BYTES after ``position``: the rest of this segment and as many following
        segments (indexes and chunks) as they reach. Small segments are the common case of a topic tiered
        early, and one GET at a time per segment would leave the reader threads idle."""
        remaining = READ_AHEAD_BYTES
        current, start = seg, position
        while current is not None and remaining > 0:
            # a following segment is entered at its start: its indexes are needed only for aborted transactions
            if current is not seg and current.txn_index_bytes != 0 and self._indexes.get(current.folder) is None:
                self._fetch_indexes(current, on_ready)
            end = min(current.size, start + remaining)
            if end > start:
                for n in range(start // CHUNK_BYTES, (end - 1) // CHUNK_BYTES + 1):
                    if self._chunks.get((current.folder, n)) is None:
                        self._fetch_chunk(current, n, on_ready)
            remaining -= max(end - start, 1)
            current, start = meta.next_segment(current), 0

    def _submit(self, key, work: Callable[[], None], seg: RemoteSegment, on_ready) -> None:
        with self._lock:
            waiting = self._pending.get(key)
            if waiting is not None:
                if on_ready not in waiting:
                    waiting.append(on_ready)
                return
            self._pending[key] = [on_ready]

        def run() -> None:
            try:
                work()
            except Exception as e:  # answered once to the next read of this segment
                log.warning("tiered storage read failed: %s", e)
                with self._lock:
                    self._failed[seg.folder] = f"reading {seg.folder} of tiered storage failed: {e}"
            finally:
                with self._lock:
                    waiting = self._pending.pop(key, [])
                for tell in waiting:
                    tell()
        self._pool.submit(run)

    def _fetch_chunk(self, seg: RemoteSegment, n: int, on_ready) -> None:
        def work() -> None:
            start = n * CHUNK_BYTES
            data = self.storage.read_range(seg.path(LOG_FILE), start, min(CHUNK_BYTES, seg.size - start))
            self._chunks.put((seg.folder, n), data)
            self._count_gets(1)
        self._submit((seg.folder, n), work, seg, on_ready)

    def _count_gets(self, n: int) -> None:
        # counted once what was read is cached (so a count seen means a cache that has it), and under the lock:
        # reader threads count at once
        with self._lock:
            self.gets += n

    def _fetch_indexes(self, seg: RemoteSegment, on_ready) -> None:
        self._submit((seg.folder, "indexes"), lambda: self._load_indexes(seg), seg, on_ready)

    def _load_indexes(self, seg: RemoteSegment) -> SegmentIndexes:
        """The segment's offset and transaction indexes, GET now (on a reader thread) and cached."""
        raw = self.storage.read(seg.path(OFFSET_INDEX_FILE))
        txns = self.storage.read(seg.path(TXN_INDEX_FILE)) if seg.txn_index_bytes != 0 else b""
        rel, pos = array("i"), array("i")
        for r, p in OFFSET_ENTRY.iter_unpack(raw):
            rel.append(r)
            pos.append(p)
        usable = len(txns) - len(txns) % TXN_ENTRY.size
        aborted = [(pid, first, last) for _v, pid, first, last, _lso in TXN_ENTRY.iter_unpack(txns[:usable])]
        indexes = SegmentIndexes(rel, pos, aborted)
        self._indexes.put(seg.folder, indexes)
        self._count_gets(1 + (seg.txn_index_bytes != 0))
        return indexes

    def _load_time_index(self, seg: RemoteSegment) -> SegmentTimeIndex:
        key = (seg.folder, "time")
        found = self._indexes.get(key)
        if found is not None:
            return found
        raw = self.storage.read(seg.path(TIME_INDEX_FILE))
        timestamps, rel = array("q"), array("i")
        for t, r in TIME_ENTRY.iter_unpack(raw[:len(raw) - len(raw) % TIME_ENTRY.size]):
            timestamps.append(t)
            rel.append(r)
        found = SegmentTimeIndex(timestamps, rel)
        self._indexes.put(key, found)
        self._count_gets(1)
        return found

    def _bytes_now(self, seg: RemoteSegment, start: int, end: int) -> bytes:
        """Bytes [start, end) of the segment's .log, from the chunk cache or GET now (on a reader thread)."""
        first, last = start // CHUNK_BYTES, (max(end, start + 1) - 1) // CHUNK_BYTES
        parts = []
        for n in range(first, last + 1):
            chunk = self._chunks.get((seg.folder, n))
            if chunk is None:
                chunk = self.storage.read_range(seg.path(LOG_FILE), n * CHUNK_BYTES,
                                                min(CHUNK_BYTES, seg.size - n * CHUNK_BYTES))
                self._chunks.put((seg.folder, n), chunk)
                self._count_gets(1)
            parts.append(chunk)
        whole = parts[0] if len(parts) == 1 else b"".join(parts)
        return whole[start - first * CHUNK_BYTES:end - first * CHUNK_BYTES]

    # ------------------------------------------------------------------ ListOffsets by timestamp
    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int, start_offset: int,
                             below_offset: int) -> Future | None:
        """The first record at or after ``start_offset`` with a timestamp >= ``timestamp`` in the remote
        segments holding offsets below ``below_offset`` (the local log start: what is local is searched
        there): None when no such segment can hold one, else a future of a TimestampOffset (or None)
        resolved on a reader thread; it raises KafkaStorageError when a GET fails."""
        meta = self.metadata_of(topic, partition)
        if meta is None:
            return None
        candidates = [seg for seg in meta.segments if seg.base_offset < below_offset
                      and seg.end_offset >= start_offset and seg.max_timestamp >= timestamp]
        if not candidates:
            return None

        def search() -> TimestampOffset | None:
            for seg in candidates:
                try:
                    found = self._search_segment(seg, timestamp, start_offset)
                except Exception as e:
                    raise KafkaStorageError(f"reading {seg.folder} of tiered storage failed: {e}") from e
                if found is not None:
                    return found
            return None
        return self._pool.submit(search)

    def _search_segment(self, seg: RemoteSegment, timestamp: int, start_offset: int) -> TimestampOffset | None:
        times = self._load_time_index(seg)
        # the batch that first reached the largest indexed timestamp below the target: none before it reaches it
        i = bisect_right(times.timestamps, timestamp - 1)
        from_offset = max(start_offset, (seg.base_offset + times.relative_offsets[i - 1]) if i else seg.base_offset)
        indexes = self._indexes.get(seg.folder) or self._load_indexes(seg)
        j = bisect_right(indexes.relative_offsets, from_offset - seg.base_offset)
        position = indexes.positions[j - 1] if j else 0
        while position < seg.size:
            header = parse_header(self._bytes_now(seg, position, min(position + HEADER_SIZE, seg.size)))
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                batch = self._bytes_now(seg, position, position + header.size)
                for record in decode_records(batch, 0, header):
                    if record.timestamp >= timestamp and record.offset >= start_offset:
                        return TimestampOffset(record.timestamp, record.offset, header.partition_leader_epoch)
            position += header.size
        return None


def _whole_batches(data: memoryview, offset: int, max_bytes: int, limit: int, min_one: bool) -> BatchSpan | None:
    """In ``data`` (starting at a batch): the batches to return, from the one holding ``offset`` (or the
    first after it). Their end may lie past ``data`` when one batch is returned that ``data`` does not
    hold whole. None: none to return."""
    p, n = 0, len(data)
    while p + _PREFIX.size <= n:
        base, length, _e, _m, _c, _a, delta = _PREFIX.unpack_from(data, p)
        if base + delta >= offset:
            break
        p += length + LOG_OVERHEAD
    else:
        return None
    first_pos, end, first_offset, next_offset = p, p, -1, -1
    while end + _PREFIX.size <= n:
        base, length, _e, _m, _c, _a, delta = _PREFIX.unpack_from(data, end)
        if base >= limit:
            break
        size = length + LOG_OVERHEAD
        if end - first_pos + size > max_bytes and not (min_one and end == first_pos):
            break
        if first_offset < 0:
            first_offset = base
        end += size
        next_offset = base + delta + 1
        if end > n:  # a batch that does not fit: returned alone (min_one)
            break
    if first_offset < 0:
        return None
    return BatchSpan(first_pos, end, first_offset, next_offset)
