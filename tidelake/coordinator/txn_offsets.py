"""Transactional offset commits (TxnOffsetCommit) in ``__consumer_offsets``.

Kafka writes the offsets of a TxnOffsetCommit as a *transactional* batch (producer id/epoch of the
transaction, no sequence) into the group's ``__consumer_offsets`` partition. They are pending —
invisible to OffsetFetch — until the coordinator writes the COMMIT marker to that partition, and
dropped on ABORT. Two pieces here:

* ``PendingTxnOffsets``: the in-memory pending set, keyed by (producer id, offsets partition), so
  the marker writer can materialize exactly the offsets of the partition it just marked.
* ``resolve_transactional_records``: a pure pass over a partition's batches that yields the records
  a loader should apply (plain commits, and transactional ones whose COMMIT marker is in the log,
  applied at the marker's position) and returns the transactions still open at the end. Group
  loaders replaying ``__consumer_offsets`` must use it (or equivalent logic): applying transactional
  records blindly would resurrect aborted offsets, and control records are not offset records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from tidelake.coordinator.offsets import OffsetKey, decode_key
from tidelake.protocol.records import CONTROL_COMMIT, BatchHeader, control_type, decode_records

Record = tuple[bytes | None, bytes | None]  # (key, value) of an offset commit record


@dataclass
class PendingTxnOffsets:
    """(producer id, offsets partition) -> list of (group, key, value) records in commit order."""
    pending: dict[tuple[int, int], list[tuple[str, bytes, bytes | None]]] = field(default_factory=dict)

    def add(self, producer_id: int, partition: int, group: str, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        self.pending.setdefault((producer_id, partition), []).extend((group, k, v) for k, v in records)

    def add_records(self, producer_id: int, partition: int, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Add records whose group is read from each record's key (rebuilding after a restart)."""
        for key, value in records:
            k = decode_key(key)
            self.add(producer_id, partition, k.group if isinstance(k, OffsetKey) else "", [(key, value)])

    def complete(self, producer_id: int, partition: int, commit: bool) -> list[tuple[str, bytes, bytes | None]]:
        """Remove and return the pending records (to apply if ``commit``; dropped otherwise)."""
        recs = self.pending.pop((producer_id, partition), [])
        return recs if commit else []

    def has_pending(self, group: str, topic: str | None = None, partition: int | None = None) -> bool:
        """True if an open transaction holds an offset for the group (and topic-partition, if given).
        OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT then."""
        for recs in self.pending.values():
            for g, key, _ in recs:
                if g != group:
                    continue
                if topic is None:
                    return True
                k = decode_key(key)
                if isinstance(k, OffsetKey) and k.topic == topic and (partition is None or k.partition == partition):
                    return True
        return False

    def groups(self) -> set[str]:
        return {g for recs in self.pending.values() for g, _, _ in recs}


def resolve_transactional_records(batches: Iterable[tuple[BatchHeader, bytes]]
                                  ) -> tuple[list[Record], dict[int, list[Record]]]:
    """Replay one partition's batches (``PartitionLog.iter_batches()`` output) with transaction
    semantics. Returns (records to apply in order, {producer id: records of its still-open txn})."""
    applied: list[Record] = []
    open_txns: dict[int, list[Record]] = {}
    for header, data in batches:
        if header.is_control:
            recs = decode_records(data, 0, header)
            held = open_txns.pop(header.producer_id, [])
            if recs and control_type(recs[0]) == CONTROL_COMMIT:
                applied.extend(held)
            continue
        recs = [(r.key, r.value) for r in decode_records(data, 0, header)]
        if header.is_transactional:
            open_txns.setdefault(header.producer_id, []).extend(recs)
        else:
            applied.extend(recs)
    return applied, open_txns
