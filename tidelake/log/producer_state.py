"""Idempotent / transactional producer state for one partition (SPEC B6, B7).

Per producer id: the epoch, the last 5 batches' (first_seq, last_seq, first_offset, last_offset), the
coordinator epoch of its last marker and the first offset of its open transaction (for the LSO).
Persisted as ``<offset>.snapshot`` files in Kafka's format (``producer_snapshot``) at segment roll and close; on
open the newest snapshot at or below the log end is loaded and the log after it is replayed (headers only).
"""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from tidelake.errors import (
    InvalidProducerEpoch,
    OutOfOrderSequenceNumber,
    TransactionCoordinatorFenced,
)
from tidelake.log.producer_snapshot import NO_OFFSET, SnapshotEntry, decode as decode_snapshot, encode as encode_snapshot
from tidelake.protocol import records as rb
from tidelake.protocol.records import BatchHeader

NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
BATCHES_KEPT = 5  # Kafka keeps the metadata of the last 5 batches (max.in.flight.requests=5)
SNAPSHOT_SUFFIX = ".snapshot"


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int = -1


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _snapshot_entries(e: ProducerEntry) -> list[SnapshotEntry]:
    """A producer's snapshot entries: one per remembered batch, oldest first (one with no batch if none); the last
    carries the producer's last timestamp, as Kafka's one entry does."""
    txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
    if not e.batches:
        return [SnapshotEntry(e.producer_id, e.epoch, NO_SEQUENCE, NO_OFFSET, 0,
                                                e.last_timestamp, e.coordinator_epoch, txn)]
    n = len(e.batches)
    return [SnapshotEntry(e.producer_id, e.epoch, b.last_seq, b.last_offset,
                                            b.last_offset - b.first_offset,
                                            e.last_timestamp if i == n - 1 else b.timestamp, e.coordinator_epoch, txn)
            for i, b in enumerate(e.batches)]


def _producers_of(entries: list[SnapshotEntry]) -> dict[int, ProducerEntry]:
    """The producers of a snapshot's entries: a producer's last entry gives its epoch, coordinator epoch, open
    transaction and last timestamp (as Kafka reads it), each entry with a batch one remembered batch."""
    out: dict[int, ProducerEntry] = {}
    for s in entries:
        e = out.get(s.producer_id)
        if e is None:
            e = out[s.producer_id] = ProducerEntry(s.producer_id)
        e.epoch, e.coordinator_epoch, e.last_timestamp = s.epoch, s.coordinator_epoch, s.timestamp
        e.current_txn_first_offset = None if s.current_txn_first_offset < 0 else s.current_txn_first_offset
        if s.last_offset >= 0:
            e.batches.append(BatchMetadata(_decrement_sequence(s.last_sequence, s.offset_delta), s.last_sequence,
                                           s.last_offset - s.offset_delta, s.last_offset, s.timestamp))
    return out


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence: sequences wrap at Integer.MAX_VALUE to 0."""
    return 0x7FFFFFFF - (decrement - sequence) + 1 if sequence < decrement else sequence - decrement


# the transaction version (KIP-890 part 2) from which a marker's epoch is one past its transaction's records
MARKER_EPOCH_BUMPED_VERSION = 2


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == 0x7FFFFFFF)


@dataclass(frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateManager:
    """Validates producer id / epoch / sequence on append and tracks open transactions.

    Usage on append: ``check_request(headers)`` (or ``check(header)`` per batch; raises, or returns the
    duplicate's metadata), then,
    once the batch is written, ``update(header)`` with its assigned offsets."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # first offset of each open transaction -> producer id (insertion order = offset order)
        self.ongoing: dict[int, int] = {}
        self.map_end_offset = 0  # the log offset up to which this state reflects the log

    # ------------------------------------------------------------------ validation
    def check(self, h: BatchHeader) -> BatchMetadata | None:
        """Validate an incoming client batch. Returns the original batch metadata if it is a retried
        duplicate; raises InvalidProducerEpoch / OutOfOrderSequenceNumber; None if it may be appended."""
        if h.producer_id < 0:
            return None
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return None  # unknown producer: any sequence is accepted (state may have been lost to retention)
        if h.producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {h.producer_id} epoch {h.producer_epoch} is older than current {entry.epoch}")
        if h.base_sequence < 0:
            return None
        last_seq = h.last_sequence
        if h.producer_epoch == entry.epoch:
            dup = entry.find_duplicate(h.base_sequence, last_seq)
            if dup is not None:
                return dup
            if entry.epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_seq, h.base_sequence):
                raise OutOfOrderSequenceNumber(
                    f"producer {h.producer_id}: sequence {h.base_sequence} after {entry.last_seq}")
        elif h.base_sequence != 0 and entry.epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceNumber(
                f"producer {h.producer_id}: new epoch {h.producer_epoch} must start at sequence 0, "
                f"got {h.base_sequence}")
        return None

    def check_request(self, headers: list[tuple[int, BatchHeader]]) -> BatchMetadata | None:
        """``check`` for the (position, header) batches of one Produce request, where several batches
        of one producer must also follow each other. Returns a retried duplicate's metadata or None."""
        seen: dict[int, BatchHeader] = {}
        for _pos, h in headers:
            if h.producer_id < 0:
                continue
            prev = seen.get(h.producer_id)
            if prev is not None:
                if h.producer_epoch != prev.producer_epoch or (
                        h.base_sequence >= 0 and h.base_sequence != (prev.last_sequence + 1) & 0x7FFFFFFF):
                    raise OutOfOrderSequenceNumber("batches of one producer out of order within a request")
            else:
                dup = self.check(h)
                if dup is not None:
                    return dup
            seen[h.producer_id] = h
        return None

    # ------------------------------------------------------------------ updates
    def update(self, h: BatchHeader) -> None:
        """Record a data batch written at h.base_offset (also used while replaying the log)."""
        if h.producer_id < 0:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerEntry(h.producer_id)
        if h.producer_epoch != entry.epoch:
            entry.epoch = h.producer_epoch
            entry.batches.clear()
        if h.base_sequence >= 0:
            entry.batches.append(BatchMetadata(h.base_sequence, h.last_sequence, h.base_offset,
                                               h.base_offset + h.last_offset_delta, h.max_timestamp))
        entry.last_timestamp = h.max_timestamp
        if h.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = h.base_offset
            self.ongoing[h.base_offset] = h.producer_id
        self.map_end_offset = h.base_offset + h.last_offset_delta + 1

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> None:
        """A marker may end the producer's transaction here. ``transaction_version`` 2+ (KIP-1228): the
        marker's epoch was bumped past its transaction's records, so one at the epoch of an open transaction
        is a late retry of an earlier marker, refused; at that epoch with nothing open it is a retry, written
        again harmlessly."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"marker for producer {producer_id} has epoch {producer_epoch} < current {entry.epoch}")
        if transaction_version >= MARKER_EPOCH_BUMPED_VERSION and producer_epoch == entry.epoch \
                and entry.current_txn_first_offset is not None:
            raise InvalidProducerEpoch(
                f"marker for producer {producer_id} at epoch {producer_epoch} would end the transaction open "
                f"since offset {entry.current_txn_first_offset} at that epoch (transaction version "
                f"{transaction_version} markers carry the epoch after their transaction's)")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFenced(
                f"marker coordinator epoch {coordinator_epoch} < {entry.coordinator_epoch}")

    def complete_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     marker_offset: int, is_abort: bool, timestamp: int) -> CompletedTxn | None:
        """Apply a COMMIT/ABORT marker written at ``marker_offset``. Returns the completed transaction
        (None if the producer had no open transaction in this partition)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if producer_epoch != entry.epoch:
            entry.epoch = producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        self.map_end_offset = marker_offset + 1
        first = entry.current_txn_first_offset
        if first is None:
            return None
        entry.current_txn_first_offset = None
        self.ongoing.pop(first, None)
        return CompletedTxn(producer_id, first, marker_offset, is_abort)

    def replay(self, buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> CompletedTxn | None:
        """Apply a batch already written with its offsets (a follower's fetched batch, or the log
        replayed after a snapshot): a data batch updates its producer, a COMMIT/ABORT marker at
        ``pos`` in ``buf`` completes the producer's transaction, which is returned."""
        if not h.is_control:
            self.update(h)
            return None
        if h.producer_id < 0:
            return None
        marker = rb.transaction_marker(buf, pos, h)
        if marker is None:
            return None
        is_abort, coordinator_epoch = marker
        return self.complete_txn(h.producer_id, h.producer_epoch, coordinator_epoch, h.base_offset,
                                 is_abort, h.max_timestamp)

    def describe(self) -> list[dict]:
        """Active producers for DescribeProducers."""
        return [{"producer_id": e.producer_id, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                 "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                 "current_txn_start_offset": -1 if e.current_txn_first_offset is None
                 else e.current_txn_first_offset}
                for e in self.producers.values()]

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (bounds the LSO)."""
        return next(iter(self.ongoing), None)

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.map_end_offset = 0

    # ------------------------------------------------------------------ snapshots
    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        out = []
        for p in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            try:
                out.append(int(p.name[:-len(SNAPSHOT_SUFFIX)]))
            except ValueError:
                continue
        return sorted(out)

    def take_snapshot(self, retain: "set[int] | frozenset[int]" = frozenset()) -> None:
        """Write ``<map_end_offset>.snapshot`` atomically; of the older snapshots keep those at an offset
        in ``retain`` (the segments' base offsets: as in Kafka, each segment's snapshot lives as long
        as the segment, so a truncation into any segment finds the state at its start) and drop the
        rest (e.g. earlier clean-shutdown snapshots inside the active segment)."""
        data = encode_snapshot([row for e in self.producers.values() for row in _snapshot_entries(e)])
        path = self.snapshot_path(self.map_end_offset)
        tmp = path.with_suffix(".snapshot.tmp")
        # no fsync: a snapshot lost or torn by a power failure fails its CRC and the state is
        # rebuilt from an older snapshot plus the log
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        for off in self.snapshot_offsets():
            if off != self.map_end_offset and off not in retain:
                self.snapshot_path(off).unlink(missing_ok=True)

    def delete_snapshots_above(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off > offset:
                self.snapshot_path(off).unlink(missing_ok=True)

    def delete_snapshots_below(self, offset: int) -> None:
        """Drop snapshots older than ``offset`` but keep the newest one at or below it."""
        offs = self.snapshot_offsets()
        below = [o for o in offs if o < offset]
        for off in below[:-1]:
            self.snapshot_path(off).unlink(missing_ok=True)

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot with offset <= max_offset. Returns its offset, or None."""
        self.clear()
        for off in reversed(self.snapshot_offsets()):
            if off > max_offset:
                continue
            try:
                entries = decode_snapshot(self.snapshot_path(off).read_bytes())
            except (OSError, ValueError):
                self.snapshot_path(off).unlink(missing_ok=True)  # corrupt: fall back to an older one
                continue
            self.producers = _producers_of(entries)
            for e in sorted(self.producers.values(), key=lambda e: e.current_txn_first_offset or 0):
                if e.current_txn_first_offset is not None:
                    self.ongoing[e.current_txn_first_offset] = e.producer_id
            self.ongoing = dict(sorted(self.ongoing.items()))
            self.map_end_offset = off
            return off
        return None
