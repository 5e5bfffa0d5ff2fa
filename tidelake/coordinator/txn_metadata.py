"""A transactional id's state as the coordinator keeps it (Kafka's TransactionMetadata) and what its
producer holds: the producer id and epoch, the state, the partitions of the open transaction, and for
transaction protocol v2 the producer id an epoch overflow rotates to and the protocol its client spoke."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from tidelake.coordinator.txn_log import TxnLogValue, TxnStatus
from tidelake.coordinator.txn_outputs import TopicPartition

MAX_PRODUCER_EPOCH = 32767  # Short.MAX_VALUE
TRANSACTION_VERSION_0 = 0  # a client of the v1 transaction protocol (Kafka's TV_0)
TRANSACTION_VERSION_2 = 2  # transaction.version: the epoch bump on every EndTxn (KIP-890 part 2)


class ProducerIdAndEpoch(NamedTuple):
    """What a transactional producer holds after InitProducerId or (v2) EndTxn."""
    producer_id: int
    producer_epoch: int


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnStatus = TxnStatus.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1  # first AddPartitions of the current transaction
    last_update_ms: int = -1
    last_producer_id: int = -1  # the (id, epoch) handed out before the last InitProducerId: a
    last_producer_epoch: int = -1  # client retrying that InitProducerId gets the same answer
    # v2: the producer id a bump past the last epoch rotated to, taken at Complete* (the markers carry the old one)
    next_producer_id: int = -1
    # the transaction protocol its client spoke at the last transition
    client_transaction_version: int = TRANSACTION_VERSION_0

    def to_log_value(self) -> TxnLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, p in self.partitions:
            by_topic.setdefault(topic, []).append(p)
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                           {t: sorted(ps) for t, ps in by_topic.items()}, self.last_update_ms, self.start_ms,
                           previous_producer_id=self.last_producer_id, next_producer_id=self.next_producer_id,
                           client_transaction_version=self.client_transaction_version)

    @property
    def transactions_v2(self) -> bool:
        return self.client_transaction_version >= TRANSACTION_VERSION_2

    def producer_after(self) -> ProducerIdAndEpoch:
        """The producer id and epoch its producer holds once this transition completes."""
        if self.next_producer_id >= 0:
            return ProducerIdAndEpoch(self.next_producer_id, 0)
        return ProducerIdAndEpoch(self.producer_id, self.producer_epoch)

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_PRODUCER_EPOCH - 1

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, p in sorted(self.partitions):
            out.setdefault(topic, []).append(p)
        return out
