"""The transaction coordinator as one broker of a cluster runs it (no network): it owns only the
``__transaction_state`` partitions loaded into it, markers are sent asynchronously (``send_markers``
calls back when the partitions' leaders have written them), and the partition's leader epoch is the
coordinator epoch its markers carry."""
from __future__ import annotations

import pytest

from tidelake import errors
from tidelake.coordinator.transactions import TransactionCoordinator, TxnStatus
from tidelake.coordinator.txn_log import partition_for

PARTITIONS = 3


class ClusterHarness:
    """A coordinator whose state records are kept per partition and whose marker sends are held
    until the test answers them (``deliver``)."""

    def __init__(self):
        self.now = 1_000_000
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
        self.sent: list[tuple] = []  # (txn id, pid, epoch, commit, coordinator epoch, partitions, done)
        self.next_pid = 1000
        self.coord = self.make()

    def make(self) -> TransactionCoordinator:
        return TransactionCoordinator(write_state=self.write_state, write_markers=self.no_sync_markers,
                                      send_markers=self.send_markers, allocate_producer_id=self.allocate,
                                      clock_ms=lambda: self.now, num_partitions=PARTITIONS)

    def write_state(self, partition, key, value):
        self.log[partition].append((key, value))

    @staticmethod
    def no_sync_markers(*_args):
        raise AssertionError("a cluster's coordinator sends markers asynchronously")

    def send_markers(self, txn_id, pid, epoch, commit, coordinator_epoch, partitions, done):
        self.sent.append((txn_id, pid, epoch, commit, coordinator_epoch, list(partitions), done))

    def allocate(self):
        self.next_pid += 1
        return self.next_pid

    def deliver(self, ok: bool = True) -> None:
        sent, self.sent = self.sent, []
        for *_rest, done in sent:
            done(ok)

    def new_coordinator(self, partition: int, epoch: int) -> TransactionCoordinator:
        """Another broker becoming the partition's leader: it loads the replicated log."""
        fresh = self.make()
        fresh.load_partition(partition, epoch, self.log[partition])
        return fresh


@pytest.fixture
def h():
    return ClusterHarness()


def _open(h: ClusterHarness, txn_id: str = "t"):
    p = partition_for(txn_id, PARTITIONS)
    h.coord.load_partition(p, 4, [])
    pid, epoch = h.coord.init_producer_id(txn_id, 30_000)
    h.coord.add_partitions(txn_id, pid, epoch, [("a", 0), ("b", 1)])
    return p, pid, epoch


def test_end_txn_answers_at_prepare_and_completes_when_the_markers_are_written(h):
    p, pid, epoch = _open(h)
    h.coord.end_txn("t", pid, epoch, commit=True)
    assert h.coord.describe("t").state == TxnStatus.PREPARE_COMMIT
    ((txn_id, _pid, _epoch, commit, coordinator_epoch, partitions, _done),) = h.sent
    assert (txn_id, commit, coordinator_epoch, partitions) == ("t", True, 4, [("a", 0), ("b", 1)])
    with pytest.raises(errors.ConcurrentTransactions):  # the next transaction waits for the markers
        h.coord.add_partitions("t", pid, epoch, [("a", 0)])
    assert len(h.sent) == 1  # not sent twice while in flight
    h.deliver()
    assert h.coord.describe("t").state == TxnStatus.COMPLETE_COMMIT
    h.coord.add_partitions("t", pid, epoch, [("a", 0)])
    assert h.coord.describe("t").state == TxnStatus.ONGOING


def test_failed_marker_send_leaves_prepare_and_the_periodic_check_sends_again(h):
    p, pid, epoch = _open(h)
    h.coord.end_txn("t", pid, epoch, commit=False)
    h.deliver(ok=False)
    assert h.coord.describe("t").state == TxnStatus.PREPARE_ABORT
    h.coord.tick()
    assert len(h.sent) == 1
    h.deliver()
    assert h.coord.describe("t").state == TxnStatus.COMPLETE_ABORT


def test_the_next_coordinator_completes_a_transaction_found_in_prepare(h):
    p, pid, epoch = _open(h)
    h.coord.end_txn("t", pid, epoch, commit=True)
    h.sent.clear()  # the old coordinator dies before its markers are written
    new = h.new_coordinator(p, 5)
    assert new.prepared_ids(p) == ["t"]
    new.complete_prepared()
    ((_t, _pid, _epoch, commit, coordinator_epoch, partitions, done),) = h.sent
    assert commit and coordinator_epoch == 5 and partitions == [("a", 0), ("b", 1)]
    done(True)
    assert new.describe("t").state == TxnStatus.COMPLETE_COMMIT
    assert new.prepared_ids(p) == []


def test_an_open_transaction_survives_the_move_and_is_committed_by_the_next_coordinator(h):
    p, pid, epoch = _open(h)
    new = h.new_coordinator(p, 5)
    assert new.describe("t").state == TxnStatus.ONGOING
    new.end_txn("t", pid, epoch, commit=True)
    h.deliver()
    assert new.describe("t").state == TxnStatus.COMPLETE_COMMIT


def test_unloading_forgets_the_partition_and_a_late_callback_persists_nothing(h):
    p, pid, epoch = _open(h)
    h.coord.end_txn("t", pid, epoch, commit=True)
    written = len(h.log[p])
    assert h.coord.unload_partition(p) == ["t"]
    assert p not in h.coord.partition_epochs
    h.deliver()  # the sender finishing after the move: the next coordinator owns the outcome
    assert len(h.log[p]) == written
    with pytest.raises(errors.TransactionalIdNotFound):
        h.coord.describe("t")


def test_a_partition_holds_only_its_own_transactional_ids(h):
    ids = [f"id-{i}" for i in range(12)]
    for t in ids:
        h.coord.load_partition(partition_for(t, PARTITIONS), 1, h.log[partition_for(t, PARTITIONS)])
        h.coord.init_producer_id(t, 30_000)
    for p in range(PARTITIONS):
        fresh = h.new_coordinator(p, 2)
        assert sorted(fresh.transactions) == sorted(t for t in ids if partition_for(t, PARTITIONS) == p)
