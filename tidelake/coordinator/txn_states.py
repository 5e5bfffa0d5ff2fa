"""The transactional ids' states: the ``__transaction_state`` log and the in-memory view it is read into.

Every change is written first (``write_state``; the broker appends it to the compacted internal topic) and
only then applied in memory, so a restart that replays the topic (``load``) sees exactly the acknowledged
states. In a cluster a coordinator holds only the partitions its broker leads (``load_partition`` /
``unload_partition``); the partition's leader epoch is the coordinator epoch its markers carry.
"""
from __future__ import annotations

from typing import Iterable

from tidelake.coordinator.txn_log import TxnStatus, decode_key, decode_value, encode_key, encode_value, partition_for
from tidelake.coordinator.txn_metadata import TransactionMetadata
from tidelake.coordinator.txn_outputs import StateWriter

PREPARED = (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT)


class TransactionStates:
    """``transactional.id`` -> ``TransactionMetadata`` of the ``__transaction_state`` partitions held here."""

    def __init__(self, write_state: StateWriter, num_partitions: int, coordinator_epoch: int):
        self._write_state = write_state
        self.num_partitions = num_partitions  # transaction.state.log.num.partitions
        self.coordinator_epoch = coordinator_epoch
        self.partition_epochs: dict[int, int] = {}  # in a cluster: owned partition -> coordinator epoch
        self.transactions: dict[str, TransactionMetadata] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_epoch_for(self, transactional_id: str) -> int:
        return self.partition_epochs.get(self.partition_for(transactional_id), self.coordinator_epoch)

    def persist(self, new: TransactionMetadata) -> None:
        """Write the new state, then make it the in-memory state (write-ahead)."""
        self._write_state(self.partition_for(new.transactional_id), encode_key(new.transactional_id),
                          encode_value(new.to_log_value()))
        self.transactions[new.transactional_id] = new

    def remove(self, transactional_id: str) -> None:
        """Write the id's tombstone, then forget it."""
        self._write_state(self.partition_for(transactional_id), encode_key(transactional_id), None)
        del self.transactions[transactional_id]

    def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Replay ``__transaction_state`` records (key, value) in log order; the last value wins.
        Returns the number of records applied."""
        n = 0
        for key, value in records:
            if key is None:
                continue
            txn_id = decode_key(key)
            v = decode_value(value)
            n += 1
            if v is None:
                self.transactions.pop(txn_id, None)
                continue
            self.transactions[txn_id] = TransactionMetadata(
                txn_id, v.producer_id, v.producer_epoch, v.timeout_ms, v.status,
                {(t, p) for t, ps in v.partitions.items() for p in ps}, v.start_ms, v.last_update_ms,
                last_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
                client_transaction_version=v.client_transaction_version)
        return n

    def load_partition(self, partition: int, coordinator_epoch: int,
                       records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Hold ``partition`` from now on, led in ``coordinator_epoch``: replay its records (only those of
        transactional ids hashed to it). Returns the number of records applied."""
        self.unload_partition(partition)
        self.partition_epochs[partition] = coordinator_epoch
        return self.load((k, v) for k, v in records
                         if k is not None and self.partition_for(decode_key(k)) == partition)

    def unload_partition(self, partition: int) -> list[str]:
        """Forget ``partition`` and its transactions; returns their ids."""
        self.partition_epochs.pop(partition, None)
        gone = [t for t in self.transactions if self.partition_for(t) == partition]
        for t in gone:
            del self.transactions[t]
        return gone

    def prepared_ids(self, partition: int) -> list[str]:
        """Transactional ids of ``partition`` in PrepareCommit/PrepareAbort (markers still to write)."""
        return sorted(t for t, m in self.transactions.items()
                      if self.partition_for(t) == partition and m.state in PREPARED)
