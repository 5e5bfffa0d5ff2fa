"""Transactional offset commits (TxnOffsetCommit, KIP-98/447) as the transaction coordinator handles them.

The records go as a transactional batch to the group's ``__consumer_offsets`` partition (``write_offsets``) and
stay pending until that partition's marker is written: on COMMIT they are handed to the group coordinator
(``apply_offsets``), on ABORT dropped. These two callbacks are the whole interface between the transaction and
the group coordinator; the pending set itself is ``txn_offsets.PendingTxnOffsets``.
"""
from __future__ import annotations

from typing import Iterable

from tidelake import errors
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.txn_log import partition_for
from tidelake.coordinator.txn_offsets import PendingTxnOffsets
from tidelake.coordinator.txn_outputs import OffsetRecord, OffsetsApplier, OffsetsWriter, TopicPartition


class TransactionalOffsets:
    """The offsets of open transactions, from their TxnOffsetCommit to their marker."""

    def __init__(self, offsets_partitions: int, write_offsets: OffsetsWriter | None,
                 apply_offsets: OffsetsApplier | None):
        self.offsets_partitions = offsets_partitions  # offsets.topic.num.partitions
        self._write_offsets = write_offsets  # TxnOffsetCommit needs both (a coordinator without
        self._apply_offsets = apply_offsets  # them serves everything else)
        self.pending = PendingTxnOffsets()

    def partition_for(self, group_id: str) -> TopicPartition:
        return OFFSETS_TOPIC, partition_for(group_id, self.offsets_partitions)

    def write(self, producer_id: int, producer_epoch: int, group_id: str, records: list[OffsetRecord]) -> None:
        """Write the records as the transaction's batch, then hold them pending."""
        if not records:
            return
        if self._write_offsets is None:
            raise errors.CoordinatorNotAvailable("this transaction coordinator cannot write offsets")
        _, partition = self.partition_for(group_id)
        self._write_offsets(partition, producer_id, producer_epoch, records)
        self.pending.add(producer_id, partition, group_id, records)

    def unload(self, partition: int) -> None:
        """Another broker coordinates the groups of ``__consumer_offsets``-``partition``."""
        for key in [k for k in self.pending.pending if k[1] == partition]:
            del self.pending.pending[key]

    def load(self, partition: int, open_transactions: dict[int, list[OffsetRecord]]) -> None:
        """Offset records of transactions still open in ``__consumer_offsets``-``partition``."""
        for producer_id, records in open_transactions.items():
            self.pending.add_records(producer_id, partition, records)

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return self.pending.has_pending(group_id, topic, partition)

    def settle(self, producer_id: int, partitions: Iterable[TopicPartition], commit: bool) -> None:
        """The markers are written: apply (commit) or drop (abort) the transaction's pending offsets."""
        for topic, partition in partitions:
            if topic != OFFSETS_TOPIC:
                continue
            records = self.pending.complete(producer_id, partition, commit)
            if records and self._apply_offsets is not None:
                self._apply_offsets([(key, value) for _group, key, value in records])
