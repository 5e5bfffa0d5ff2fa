"""Completing a transaction in Prepare*: its COMMIT/ABORT markers written, then Complete* persisted.

The markers go to every partition of the transaction (including the ``__consumer_offsets`` partition of a group
added by AddOffsetsToTxn). On a single node they are written synchronously (``write_markers``). In a cluster the
partitions are led by other brokers: once the Prepare* record is on the in-sync replicas (``state_replicated``;
Kafka's order, so no marker carries out a decision a next coordinator would not load) ``send_markers`` hands them
to a sender, which calls back when all are written; the transaction stays in Prepare* meanwhile and becomes
Complete* in the callback. A failure leaves it in Prepare* and ``complete_prepared()`` (the periodic check, and
after a reload) finishes it: the same recovery as after a crash.
"""
from __future__ import annotations

import collections
import logging
from typing import Callable

from tidelake.coordinator.txn_log import TxnStatus
from tidelake.coordinator.txn_metadata import TransactionMetadata
from tidelake.coordinator.txn_offset_commits import TransactionalOffsets
from tidelake.coordinator.txn_outputs import MarkerSender, MarkerWriter, StateReplicated
from tidelake.coordinator.txn_states import PREPARED, TransactionStates
from tidelake.coordinator.txn_transitions import completed

log = logging.getLogger(__name__)


class TransactionCompletion:
    """Writes or sends the markers of the transactions in Prepare* and persists their Complete*."""

    def __init__(self, states: TransactionStates, offsets: TransactionalOffsets, write_markers: MarkerWriter,
                 send_markers: MarkerSender | None, state_replicated: StateReplicated | None,
                 clock_ms: Callable[[], int], counts: collections.Counter[str]):
        self._states = states
        self._offsets = offsets
        self._write_markers = write_markers
        self._send_markers = send_markers  # a cluster's: markers on other brokers, completed later
        # a cluster's: markers go out only once the Prepare* record is on the ISR (so the next coordinator
        # loads the decision the markers carry out)
        self._state_replicated = state_replicated
        self._clock_ms = clock_ms
        self._counts = counts  # committed, aborted
        self._completing: set[str] = set()  # transactional ids whose markers are being sent

    def forget(self, transactional_id: str) -> None:
        """The id moved to another coordinator: a marker send still running for it ends without writing
        Complete*."""
        self._completing.discard(transactional_id)

    def complete(self, meta: TransactionMetadata) -> bool:
        """Write the markers of a Prepare* transaction, then persist Complete*. False if markers failed
        or (in a cluster) are still being sent."""
        commit = meta.state == TxnStatus.PREPARE_COMMIT
        if self._send_markers is not None and meta.partitions:
            txn_id = meta.transactional_id
            if txn_id not in self._completing:
                self._completing.add(txn_id)
                if self._state_replicated is None:
                    self._start_markers(meta, True)
                else:
                    self._state_replicated(self._states.partition_for(txn_id),
                                           lambda ok: self._start_markers(meta, ok))
            return self._states.transactions.get(txn_id) is not meta  # completed at once (a synchronous sender)
        try:
            if meta.partitions:
                self._write_markers(meta.producer_id, meta.producer_epoch, commit,
                                    self._states.coordinator_epoch_for(meta.transactional_id),
                                    sorted(meta.partitions))
        except Exception:  # noqa: BLE001 - stays in Prepare*; complete_prepared() retries
            log.exception("writing %s markers for %s failed; will retry",
                          "COMMIT" if commit else "ABORT", meta.transactional_id)
            return False
        self._offsets.settle(meta.producer_id, meta.partitions, commit)
        self._persist_completion(meta)
        return True

    def complete_prepared(self) -> list[str]:
        """Finish every transaction in PrepareCommit/PrepareAbort (after a reload or a failed marker write)."""
        finished = []
        for meta in list(self._states.transactions.values()):
            if meta.state in PREPARED and self.complete(meta):
                finished.append(meta.transactional_id)
        return finished

    def _start_markers(self, meta: TransactionMetadata, replicated: bool) -> None:
        """The Prepare* record of ``meta`` is on the in-sync replicas (``replicated``): send its markers.
        Otherwise, or if the transaction changed or moved meanwhile, it stays Prepare* for a later
        ``complete_prepared()`` (or the next coordinator)."""
        txn_id = meta.transactional_id
        if not replicated or self._states.transactions.get(txn_id) is not meta:
            self._completing.discard(txn_id)
            return
        self._send_markers(txn_id, meta.producer_id, meta.producer_epoch, meta.state == TxnStatus.PREPARE_COMMIT,
                           self._states.coordinator_epoch_for(txn_id), sorted(meta.partitions),
                           lambda ok: self._markers_sent(meta, ok))

    def _markers_sent(self, meta: TransactionMetadata, ok: bool) -> None:
        """The cluster's marker sender is done with ``meta``: persist Complete* unless the transaction
        changed or moved meanwhile (the pending offsets were settled by the group coordinators that
        received the markers)."""
        txn_id = meta.transactional_id
        self._completing.discard(txn_id)
        if not ok or self._states.transactions.get(txn_id) is not meta:
            return  # stays Prepare*: complete_prepared() (or the next coordinator) sends again
        try:
            self._persist_completion(meta)
        except Exception as e:  # noqa: BLE001 - e.g. no longer the leader: the new coordinator completes it
            log.info("transaction %s: markers written, Complete* not persisted (%s)", txn_id, e)

    def _persist_completion(self, meta: TransactionMetadata) -> None:
        self._states.persist(completed(meta, self._clock_ms()))
        self._counts["committed" if meta.state == TxnStatus.PREPARE_COMMIT else "aborted"] += 1
