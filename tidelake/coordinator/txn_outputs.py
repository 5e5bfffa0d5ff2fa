"""What the transaction coordinator (``transactions.TransactionCoordinator``) is given to act on the
world: a state machine without network or disk, its outputs are these callables, injected by whoever
hosts it (``tidelake.broker.coordinators``) or by a test."""
from __future__ import annotations

from typing import Callable, Protocol

TopicPartition = tuple[str, int]
OffsetRecord = tuple[bytes, bytes | None]  # (key, value) of a __consumer_offsets record


class StateWriter(Protocol):
    def __call__(self, partition: int, key: bytes, value: bytes | None) -> None:
        """Durably append one record to ``__transaction_state``-``partition`` (raise on failure)."""


class MarkerWriter(Protocol):
    def __call__(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 partitions: list[TopicPartition]) -> None:
        """Append a COMMIT/ABORT control batch to each partition (raise on failure; re-tried)."""


class MarkerSender(Protocol):
    def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                 coordinator_epoch: int, partitions: list[TopicPartition], done: Callable[[bool], None]) -> None:
        """Start writing a COMMIT/ABORT marker to each partition (on their leaders); call
        ``done(True)`` once all are written, ``done(False)`` if the sender gave up."""


class StateReplicated(Protocol):
    def __call__(self, partition: int, then: Callable[[bool], None]) -> None:
        """Call ``then(True)`` once everything written to ``__transaction_state``-``partition`` so far is on
        its in-sync replicas, ``then(False)`` if that failed (no longer the leader, timeout)."""


class OffsetsWriter(Protocol):
    def __call__(self, partition: int, producer_id: int, producer_epoch: int, records: list[OffsetRecord]) -> None:
        """Append offset records as one transactional batch to ``__consumer_offsets``-``partition``."""


class OffsetsApplier(Protocol):
    def __call__(self, records: list[OffsetRecord]) -> None:
        """Make committed transactional offset records visible in the group coordinator."""
