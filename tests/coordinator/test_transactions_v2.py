"""Transaction protocol v2 (KIP-890 part 2) in the coordinator state machine: the epoch bump on every
EndTxn v5, markers with the bumped epoch, the producer id rotated past the last epoch, retries, and
the state record that keeps it across a reload."""
from __future__ import annotations

import pytest

from tidelake import errors
from tidelake.coordinator.txn_log import TxnStatus
from tidelake.coordinator.txn_metadata import MAX_PRODUCER_EPOCH, ProducerIdAndEpoch
from tidelake.coordinator.txn_log import decode_value
from tests.coordinator.test_transactions import Harness
from tests.coordinator.test_transactions_cluster import ClusterHarness, _open

TP = ("orders", 0)


@pytest.fixture
def h():
    return Harness()


def _begin(h, pid, epoch, tp=TP):
    h.coord.add_produce_partition("t1", pid, epoch, tp)


def test_commit_and_abort_bump_the_epoch_and_markers_carry_it(h):
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    _begin(h, pid, epoch)
    assert h.coord.describe("t1").state == TxnStatus.ONGOING
    after = h.coord.end_txn("t1", pid, epoch, commit=True, bump_epoch=True)
    assert after == ProducerIdAndEpoch(pid, epoch + 1)
    assert h.markers[-1] == (pid, epoch + 1, True, [TP])
    meta = h.coord.describe("t1")
    assert (meta.state, meta.producer_epoch) == (TxnStatus.COMPLETE_COMMIT, epoch + 1)

    _begin(h, pid, epoch + 1, ("orders", 1))  # the second transaction, with the new epoch
    after = h.coord.end_txn("t1", pid, epoch + 1, commit=False, bump_epoch=True)
    assert after == ProducerIdAndEpoch(pid, epoch + 2)
    assert h.markers[-1] == (pid, epoch + 2, False, [("orders", 1)])


def test_the_previous_epoch_is_fenced_after_a_v2_end(h):
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    _begin(h, pid, epoch)
    h.coord.end_txn("t1", pid, epoch, commit=True, bump_epoch=True)
    with pytest.raises(errors.InvalidProducerEpoch):  # a zombie's Produce, as the partition leader asks
        _begin(h, pid, epoch)
    _begin(h, pid, epoch + 1)
    with pytest.raises(errors.ProducerFenced):  # the zombie's EndTxn
        h.coord.end_txn("t1", pid, epoch - 1, commit=True, bump_epoch=True)
    assert h.coord.describe("t1").state == TxnStatus.ONGOING


def test_a_retried_v2_end_txn_gets_the_same_answer(h):
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    _begin(h, pid, epoch)
    first = h.coord.end_txn("t1", pid, epoch, commit=True, bump_epoch=True)
    markers = len(h.markers)
    assert h.coord.end_txn("t1", pid, epoch, commit=True, bump_epoch=True) == first
    assert len(h.markers) == markers  # nothing written again
    with pytest.raises(errors.InvalidTxnState):  # a retry must end the same way
        h.coord.end_txn("t1", pid, epoch, commit=False, bump_epoch=True)


def test_end_txn_past_the_last_epoch_rotates_the_producer_id(h):
    pid, _ = h.coord.init_producer_id("t1", 30_000)
    last = MAX_PRODUCER_EPOCH - 1
    h.coord.transactions["t1"].producer_epoch = last  # as after 32766 transactions
    _begin(h, pid, last)
    after = h.coord.end_txn("t1", pid, last, commit=True, bump_epoch=True)
    assert after.producer_id != pid and after.producer_epoch == 0
    assert h.markers[-1] == (pid, MAX_PRODUCER_EPOCH, True, [TP])  # the old id at the top epoch
    assert h.coord.end_txn("t1", pid, last, commit=True, bump_epoch=True) == after  # retried with the old id
    _begin(h, after.producer_id, 0)
    assert h.coord.end_txn("t1", after.producer_id, 0, commit=False, bump_epoch=True) == (after.producer_id, 1)


def test_the_v2_state_survives_a_reload(h):
    pid, _ = h.coord.init_producer_id("t1", 30_000)
    last = MAX_PRODUCER_EPOCH - 1
    h.coord.transactions["t1"].producer_epoch = last
    _begin(h, pid, last)
    after = h.coord.end_txn("t1", pid, last, commit=True, bump_epoch=True)
    # the Prepare* record names the next producer id (the tagged fields of TransactionLogValue v1)
    prepared = [decode_value(v) for _, _, v in h.state_records if v is not None
                and decode_value(v).status == TxnStatus.PREPARE_COMMIT][-1]
    assert (prepared.next_producer_id, prepared.client_transaction_version) == (after.producer_id, 2)
    fresh = h.reload()
    meta = fresh.describe("t1")
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_id) == (after.producer_id, 0, pid)
    assert meta.transactions_v2
    assert fresh.end_txn("t1", pid, last, commit=True, bump_epoch=True) == after


def test_a_v1_end_txn_does_not_bump(h):
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    h.coord.add_partitions("t1", pid, epoch, [TP])
    assert h.coord.end_txn("t1", pid, epoch, commit=True) == (pid, epoch)
    assert h.markers[-1] == (pid, epoch, True, [TP])
    assert decode_value(h.state_records[-1][2]).client_transaction_version == 0


def test_txn_offsets_join_a_v2_transaction_implicitly(h):
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    tp = h.coord.add_offsets("t1", pid, epoch, "g1", client_transaction_version=2)
    h.coord.check_txn_offset_commit("t1", pid, epoch, "g1")
    assert h.coord.end_txn("t1", pid, epoch, commit=True, bump_epoch=True) == (pid, epoch + 1)
    assert h.markers[-1] == (pid, epoch + 1, True, [tp])


def test_in_a_cluster_v2_end_txn_answers_the_bumped_epoch_before_its_markers_are_written():
    h = ClusterHarness()
    p, pid, epoch = _open(h)
    after = h.coord.end_txn("t", pid, epoch, commit=True, bump_epoch=True)
    assert after == (pid, epoch + 1) and h.coord.describe("t").state == TxnStatus.PREPARE_COMMIT
    ((_txn, marker_pid, marker_epoch, commit, _ce, _parts, _done),) = h.sent
    assert (marker_pid, marker_epoch, commit) == (pid, epoch + 1, True)
    assert h.coord.client_transaction_version("t") == 2  # the markers name it (WriteTxnMarkers v2)
    with pytest.raises(errors.ConcurrentTransactions):  # retried while the markers are in flight
        h.coord.end_txn("t", pid, epoch, commit=True, bump_epoch=True)
    with pytest.raises(errors.ConcurrentTransactions):  # the next transaction's Produce waits for them
        h.coord.add_produce_partition("t", pid, epoch + 1, TP)
    h.deliver()
    assert h.coord.describe("t").state == TxnStatus.COMPLETE_COMMIT
    assert h.coord.end_txn("t", pid, epoch, commit=True, bump_epoch=True) == after
    h.coord.add_produce_partition("t", pid, epoch + 1, TP)
    # the next coordinator loads the v2 transaction as it was
    fresh = h.new_coordinator(p, 5)
    meta = fresh.describe("t")
    assert (meta.state, meta.producer_epoch, meta.transactions_v2) == (TxnStatus.ONGOING, epoch + 1, True)


def test_a_new_session_aborts_the_open_v2_transaction_and_fences_it(h):
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    _begin(h, pid, epoch)
    assert h.coord.init_producer_id("t1", 30_000) == (pid, epoch + 2)  # the abort's fence, then the new session
    assert h.markers[-1] == (pid, epoch + 1, False, [TP])
    with pytest.raises(errors.InvalidProducerEpoch):
        _begin(h, pid, epoch)
    with pytest.raises(errors.ProducerFenced):
        h.coord.end_txn("t1", pid, epoch, commit=True, bump_epoch=True)


def test_a_timed_out_v2_transaction_is_aborted_with_a_bumped_epoch(h):
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    _begin(h, pid, epoch)
    h.now += 30_000
    assert h.coord.abort_timed_out() == ["t1"]
    assert h.markers[-1] == (pid, epoch + 1, False, [TP])
    with pytest.raises(errors.InvalidProducerEpoch):  # the producer that went quiet
        _begin(h, pid, epoch)


def test_after_an_overflow_the_new_producer_id_waits_for_the_markers_in_a_cluster():
    h = ClusterHarness()
    p, pid, _ = _open(h)
    last = MAX_PRODUCER_EPOCH - 1
    h.coord.transactions["t"].producer_epoch = last
    after = h.coord.end_txn("t", pid, last, commit=True, bump_epoch=True)
    assert after.producer_id != pid and after.producer_epoch == 0
    with pytest.raises(errors.ConcurrentTransactions):  # retriable, not INVALID_PRODUCER_ID_MAPPING
        h.coord.add_produce_partition("t", after.producer_id, 0, TP)
    h.deliver()
    h.coord.add_produce_partition("t", after.producer_id, 0, TP)
    assert h.coord.describe("t").state == TxnStatus.ONGOING


def test_a_v2_transaction_fenced_at_the_last_epoch_rotates_the_producer_id(h):
    pid, _ = h.coord.init_producer_id("t1", 30_000)
    last = MAX_PRODUCER_EPOCH - 1
    h.coord.transactions["t1"].producer_epoch = last
    _begin(h, pid, last)
    h.now += 30_000
    assert h.coord.abort_timed_out() == ["t1"]
    # the ABORT markers carry an epoch past the records' (a v2 marker at their epoch would be refused)
    assert h.markers[-1] == (pid, MAX_PRODUCER_EPOCH, False, [TP])
    meta = h.coord.describe("t1")
    assert meta.producer_id != pid and meta.producer_epoch == 0


def test_a_v2_abort_with_nothing_open_bumps_the_epoch(h):
    """Kafka's v2 table: an abort with no partition added is accepted (the producer fences its own earlier
    requests after a failure it cannot classify); a commit of nothing is INVALID_TXN_STATE."""
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    markers = len(h.markers)
    assert h.coord.end_txn("t1", pid, epoch, commit=False, bump_epoch=True) == (pid, epoch + 1)
    assert h.coord.describe("t1").state == TxnStatus.COMPLETE_ABORT and len(h.markers) == markers  # nothing to mark
    with pytest.raises(errors.InvalidTxnState):
        h.coord.end_txn("t1", pid, epoch + 1, commit=True, bump_epoch=True)
    assert h.coord.end_txn("t1", pid, epoch + 1, commit=False, bump_epoch=True) == (pid, epoch + 2)
    _begin(h, pid, epoch + 2)
    assert h.coord.end_txn("t1", pid, epoch + 2, commit=True, bump_epoch=True) == (pid, epoch + 3)
