"""The epoch and producer-id rules of a transactional id: each state transition as a function from the current
``TransactionMetadata`` to the next one, and the step a v2 EndTxn takes. Nothing is written or logged here: the
coordinator persists what these return and answers the errors.

Transaction protocol v2 (KIP-890 part 2) bumps the epoch on every commit and abort; at epoch 32766 the bump
rotates to a new producer id (``next_producer_id``, taken from Complete* on, with epoch 0). A v2 EndTxn follows
Kafka's v2 table (``end_txn_v2_step``): a retry is recognised by the epoch it bumped.
"""
from __future__ import annotations

import enum
from typing import Callable

from tidelake.coordinator.txn_log import TxnStatus
from tidelake.coordinator.txn_metadata import (MAX_PRODUCER_EPOCH, TRANSACTION_VERSION_0, TRANSACTION_VERSION_2,
                                               TransactionMetadata)
from tidelake.coordinator.txn_outputs import TopicPartition

ProducerIdAllocator = Callable[[], int]


def initialized(meta: TransactionMetadata, timeout_ms: int, now: int,
                allocate_producer_id: ProducerIdAllocator) -> TransactionMetadata:
    """InitProducerId: Empty with the epoch bumped (a new producer id past the last epoch)."""
    new = TransactionMetadata(meta.transactional_id, meta.producer_id, meta.producer_epoch + 1, timeout_ms,
                              TxnStatus.EMPTY, set(), -1, now)
    if meta.producer_epoch >= 0:  # remembered so a retried InitProducerId (KIP-360) is recognised
        new.last_producer_id, new.last_producer_epoch = meta.producer_id, meta.producer_epoch
    if meta.epoch_exhausted:
        new.producer_id, new.producer_epoch = allocate_producer_id(), 0
    return new


def fenced_abort(meta: TransactionMetadata, now: int, allocate_producer_id: ProducerIdAllocator
                 ) -> TransactionMetadata:
    """PrepareAbort with the epoch bumped, so the current holder is fenced. A v2 transaction's epoch is bumped
    even at 32766 (its markers must carry an epoch past its records') and its producer id rotates then, as
    after a v2 EndTxn; a v1 one's stays at the last epoch."""
    epoch, next_producer_id = meta.producer_epoch + 1, -1
    if meta.epoch_exhausted:
        if meta.transactions_v2:
            next_producer_id = allocate_producer_id()
        else:
            epoch = meta.producer_epoch
    return TransactionMetadata(meta.transactional_id, meta.producer_id, epoch, meta.timeout_ms,
                               TxnStatus.PREPARE_ABORT, set(meta.partitions), meta.start_ms, now,
                               meta.last_producer_id, meta.last_producer_epoch,
                               next_producer_id=next_producer_id,
                               client_transaction_version=meta.client_transaction_version)


def ongoing(meta: TransactionMetadata, added: set[TopicPartition], now: int,
            client_transaction_version: int) -> TransactionMetadata:
    """AddPartitions: Ongoing with ``added`` (a new transaction, started now, unless one is open)."""
    starting = meta.state != TxnStatus.ONGOING
    return TransactionMetadata(meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms,
                               TxnStatus.ONGOING, (set() if starting else set(meta.partitions)) | added,
                               now if starting else meta.start_ms, now,
                               meta.last_producer_id, meta.last_producer_epoch,
                               client_transaction_version=client_transaction_version)


def prepared_end(meta: TransactionMetadata, commit: bool, partitions: set[TopicPartition], start_ms: int, now: int,
                 bump_epoch: bool, allocate_producer_id: ProducerIdAllocator) -> TransactionMetadata:
    """EndTxn: PrepareCommit/PrepareAbort of ``partitions`` (the epoch bumped for v2; at 32766 the producer id
    rotates, Kafka's order)."""
    epoch, next_producer_id = meta.producer_epoch, -1
    if bump_epoch:
        epoch += 1  # never past MAX_PRODUCER_EPOCH: at 32766 the producer id rotates
        if meta.epoch_exhausted:
            next_producer_id = allocate_producer_id()
    return TransactionMetadata(
        meta.transactional_id, meta.producer_id, epoch, meta.timeout_ms,
        TxnStatus.PREPARE_COMMIT if commit else TxnStatus.PREPARE_ABORT, partitions,
        start_ms, now, meta.last_producer_id, meta.last_producer_epoch,
        next_producer_id=next_producer_id,
        client_transaction_version=TRANSACTION_VERSION_2 if bump_epoch else TRANSACTION_VERSION_0)


def completed(meta: TransactionMetadata, now: int) -> TransactionMetadata:
    """The markers of a Prepare* transaction are written: Complete*, under the producer id and epoch its
    producer holds from now on."""
    commit = meta.state == TxnStatus.PREPARE_COMMIT
    after = meta.producer_after()
    # past an epoch overflow (v2) the old producer id is kept: a retried EndTxn names it
    last_producer_id = meta.producer_id if meta.next_producer_id >= 0 else meta.last_producer_id
    return TransactionMetadata(meta.transactional_id, after.producer_id, after.producer_epoch, meta.timeout_ms,
                               TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT, set(),
                               meta.start_ms, now, last_producer_id, meta.last_producer_epoch,
                               client_transaction_version=meta.client_transaction_version)


class EndTxnStep(enum.Enum):
    """What an EndTxn of transaction protocol v2 does, or the error it is answered."""
    UNKNOWN_PRODUCER_ID = "unknown_producer_id"  # INVALID_PRODUCER_ID_MAPPING
    FENCED = "fenced"  # PRODUCER_FENCED
    NOTHING_TO_COMMIT = "nothing_to_commit"  # INVALID_TXN_STATE
    PREPARE = "prepare"  # end the open transaction
    ABORT_EMPTY = "abort_empty"  # an abort with no partition added: nothing to mark, the epoch bumps
    RETRIED = "retried"  # the transaction is already ending: a retry


def end_txn_v2_step(meta: TransactionMetadata | None, producer_id: int, producer_epoch: int,
                    commit: bool) -> EndTxnStep:
    """Kafka's EndTxn table of transaction protocol v2, whose epoch moved with the producer's last EndTxn:
    a retry names the epoch before that bump (or the old producer id past an overflow), and an abort
    with no transaction open (no partition added) is accepted and bumps the epoch, so a producer can
    fence its own earlier requests after a failure it cannot classify."""
    if meta is None or meta.state == TxnStatus.DEAD:
        return EndTxnStep.UNKNOWN_PRODUCER_ID
    retry_on_overflow = (meta.last_producer_id == producer_id and producer_epoch == MAX_PRODUCER_EPOCH - 1
                         and meta.producer_epoch == 0)
    retry_on_bump = meta.producer_id == producer_id and meta.producer_epoch == producer_epoch + 1
    if meta.producer_id != producer_id and not retry_on_overflow:
        return EndTxnStep.UNKNOWN_PRODUCER_ID
    state, retried = meta.state, retry_on_bump or retry_on_overflow
    completed_already = state in (TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT)
    if state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
        valid = retry_on_bump
    elif completed_already:
        valid = retried or producer_epoch == meta.producer_epoch
    else:
        valid = producer_epoch == meta.producer_epoch
    if not valid:
        return EndTxnStep.FENCED
    if state == TxnStatus.ONGOING:
        return EndTxnStep.PREPARE
    if not commit and (state == TxnStatus.EMPTY or completed_already and not retried):
        return EndTxnStep.ABORT_EMPTY
    if completed_already and not retried:
        return EndTxnStep.NOTHING_TO_COMMIT
    return EndTxnStep.RETRIED
