"""The epoch and producer-id rules as pure functions: Kafka's v2 EndTxn table and the producer-id rotation at
the last epoch, without a coordinator."""
from __future__ import annotations

import pytest

from tidelake.coordinator.txn_log import TxnStatus
from tidelake.coordinator.txn_metadata import MAX_PRODUCER_EPOCH, TRANSACTION_VERSION_2, TransactionMetadata
from tidelake.coordinator.txn_transitions import EndTxnStep, end_txn_v2_step, fenced_abort, prepared_end

PID, EPOCH, NEW_PID = 7, 3, 99


def txn(state: TxnStatus, epoch: int = EPOCH, **kw) -> TransactionMetadata:
    return TransactionMetadata("t", PID, epoch, 60_000, state, {("x", 0)} if state == TxnStatus.ONGOING else set(),
                               **kw)


@pytest.mark.parametrize("state, producer_epoch, commit, step", [
    (TxnStatus.ONGOING, EPOCH, True, EndTxnStep.PREPARE),
    (TxnStatus.ONGOING, EPOCH - 1, True, EndTxnStep.FENCED),
    (TxnStatus.EMPTY, EPOCH, False, EndTxnStep.ABORT_EMPTY),       # an abort with nothing open: the epoch bumps
    (TxnStatus.EMPTY, EPOCH, True, EndTxnStep.RETRIED),            # answered as a retry: INVALID_TXN_STATE there
    (TxnStatus.COMPLETE_COMMIT, EPOCH - 1, True, EndTxnStep.RETRIED),  # the epoch before the bump: a retry
    (TxnStatus.COMPLETE_COMMIT, EPOCH, True, EndTxnStep.NOTHING_TO_COMMIT),
    (TxnStatus.COMPLETE_COMMIT, EPOCH, False, EndTxnStep.ABORT_EMPTY),
    (TxnStatus.PREPARE_COMMIT, EPOCH - 1, True, EndTxnStep.RETRIED),
    (TxnStatus.PREPARE_COMMIT, EPOCH, True, EndTxnStep.FENCED),
])
def test_the_v2_end_txn_table(state, producer_epoch, commit, step):
    assert end_txn_v2_step(txn(state), PID, producer_epoch, commit) == step


def test_an_unknown_id_or_another_producer_id_is_no_mapping():
    assert end_txn_v2_step(None, PID, EPOCH, True) == EndTxnStep.UNKNOWN_PRODUCER_ID
    assert end_txn_v2_step(txn(TxnStatus.ONGOING), PID + 1, EPOCH, True) == EndTxnStep.UNKNOWN_PRODUCER_ID


def test_a_retry_past_an_epoch_overflow_names_the_old_producer_id():
    rotated = TransactionMetadata("t", NEW_PID, 0, 60_000, TxnStatus.COMPLETE_COMMIT, last_producer_id=PID)
    assert end_txn_v2_step(rotated, PID, MAX_PRODUCER_EPOCH - 1, True) == EndTxnStep.RETRIED


def test_the_last_epoch_rotates_the_producer_id_of_a_v2_transaction_only():
    last = MAX_PRODUCER_EPOCH - 1
    ending = prepared_end(txn(TxnStatus.ONGOING, last), True, {("x", 0)}, 1, 2, True, lambda: NEW_PID)
    assert (ending.producer_epoch, ending.producer_after()) == (MAX_PRODUCER_EPOCH, (NEW_PID, 0))
    v2 = fenced_abort(txn(TxnStatus.ONGOING, last, client_transaction_version=TRANSACTION_VERSION_2), 2,
                      lambda: NEW_PID)
    assert v2.producer_after() == (NEW_PID, 0)
    v1 = fenced_abort(txn(TxnStatus.ONGOING, last), 2, lambda: NEW_PID)
    assert (v1.producer_epoch, v1.producer_after()) == (last, (PID, last))   # v1 stays at the last epoch
