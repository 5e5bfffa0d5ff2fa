"""The transaction coordinator state machine (no network); its records: test_txn_log.py."""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings, strategies as st

from tidelake import errors
from tidelake.coordinator.transactions import TransactionCoordinator, TxnStatus
from tidelake.coordinator.txn_log import partition_for


class Harness:
    """The coordinator with its two outputs captured: state records and markers."""

    def __init__(self, fail_markers: bool = False):
        self.now = 1_000_000
        self.state_records: list[tuple[int, bytes, bytes | None]] = []
        self.markers: list[tuple[int, int, bool, list]] = []
        self.fail_markers = fail_markers
        self.next_pid = 1000
        self.coord = self.make()

    def make(self) -> TransactionCoordinator:
        return TransactionCoordinator(write_state=self.write_state, write_markers=self.write_markers,
                                      allocate_producer_id=self.allocate, clock_ms=lambda: self.now,
                                      max_timeout_ms=60_000, id_expiration_ms=3_600_000)

    def write_state(self, partition, key, value):
        self.state_records.append((partition, key, value))

    def write_markers(self, pid, epoch, commit, coordinator_epoch, partitions):
        if self.fail_markers:
            raise OSError("disk full")
        self.markers.append((pid, epoch, commit, list(partitions)))

    def allocate(self):
        self.next_pid += 1
        return self.next_pid

    def reload(self) -> TransactionCoordinator:
        fresh = self.make()
        fresh.load((k, v) for _, k, v in self.state_records)
        return fresh


@pytest.fixture
def h():
    return Harness()


def test_init_new_id_then_epoch_bump(h):
    pid, epoch = h.coord.init_producer_id("t1", 30_000)
    assert epoch == 0 and pid == 1001
    assert h.coord.init_producer_id("t1", 30_000) == (pid, 1)
    meta = h.coord.describe("t1")
    assert meta.state == TxnStatus.EMPTY and meta.timeout_ms == 30_000
    # every transition was written to the partition of the id
    assert {p for p, _, _ in h.state_records} == {partition_for("t1")}


def test_timeout_validation(h):
    with pytest.raises(errors.InvalidTransactionTimeout):
        h.coord.init_producer_id("t", 60_001)
    with pytest.raises(errors.InvalidTransactionTimeout):
        h.coord.init_producer_id("t", 0)
    assert h.coord.init_producer_id("t", 60_000)[1] == 0


def test_commit_writes_markers_to_every_partition(h):
    pid, epoch = h.coord.init_producer_id("t", 30_000)
    h.coord.add_partitions("t", pid, epoch, [("a", 0), ("b", 1)])
    h.coord.add_partitions("t", pid, epoch, [("a", 0)])  # idempotent
    tp = h.coord.add_offsets("t", pid, epoch, "group-1")
    assert tp == ("__consumer_offsets", partition_for("group-1"))
    h.coord.check_txn_offset_commit("t", pid, epoch, "group-1")
    assert h.coord.describe("t").state == TxnStatus.ONGOING
    h.coord.end_txn("t", pid, epoch, commit=True)
    assert h.markers == [(pid, epoch, True, sorted([("a", 0), ("b", 1), tp]))]
    meta = h.coord.describe("t")
    assert meta.state == TxnStatus.COMPLETE_COMMIT and not meta.partitions
    h.coord.end_txn("t", pid, epoch, commit=True)  # a retry is answered OK, no new markers
    assert len(h.markers) == 1
    with pytest.raises(errors.InvalidTxnState):
        h.coord.end_txn("t", pid, epoch, commit=False)
    # the next transaction starts fresh
    h.coord.add_partitions("t", pid, epoch, [("c", 0)])
    h.coord.end_txn("t", pid, epoch, commit=False)
    assert h.markers[-1] == (pid, epoch, False, [("c", 0)])
    assert h.coord.describe("t").state == TxnStatus.COMPLETE_ABORT


def test_end_txn_without_transaction_is_invalid(h):
    pid, epoch = h.coord.init_producer_id("t", 30_000)
    with pytest.raises(errors.InvalidTxnState):
        h.coord.end_txn("t", pid, epoch, commit=True)
    with pytest.raises(errors.InvalidTxnState):
        h.coord.check_txn_offset_commit("t", pid, epoch, "g")


def test_zombie_is_fenced_and_its_open_transaction_aborted(h):
    pid, old_epoch = h.coord.init_producer_id("t", 30_000)
    h.coord.add_partitions("t", pid, old_epoch, [("a", 0)])
    # a second instance with the same transactional.id
    pid2, new_epoch = h.coord.init_producer_id("t", 30_000)
    assert pid2 == pid and new_epoch == old_epoch + 2  # +1 to fence and abort, +1 for the new session
    assert h.markers == [(pid, old_epoch + 1, False, [("a", 0)])]
    for call in (lambda: h.coord.add_partitions("t", pid, old_epoch, [("a", 1)]),
                 lambda: h.coord.end_txn("t", pid, old_epoch, True),
                 lambda: h.coord.add_offsets("t", pid, old_epoch, "g"),
                 lambda: h.coord.check_txn_offset_commit("t", pid, old_epoch, "g")):
        with pytest.raises(errors.ProducerFenced):
            call()
    with pytest.raises(errors.InvalidProducerIdMapping):
        h.coord.add_partitions("t", pid + 5, new_epoch, [("a", 0)])
    with pytest.raises(errors.InvalidProducerIdMapping):
        h.coord.add_partitions("unknown", pid, new_epoch, [("a", 0)])


def test_kip360_init_with_current_and_stale_epoch(h):
    pid, e0 = h.coord.init_producer_id("t", 30_000)
    assert h.coord.init_producer_id("t", 30_000, pid, e0) == (pid, e0 + 1)
    # retry of the same request: answered again without another bump
    assert h.coord.init_producer_id("t", 30_000, pid, e0) == (pid, e0 + 1)
    with pytest.raises(errors.ProducerFenced):
        h.coord.init_producer_id("t", 30_000, pid, e0 - 1 if e0 > 0 else 99)


def test_epoch_exhaustion_allocates_new_producer_id(h):
    pid, _ = h.coord.init_producer_id("t", 30_000)
    h.coord.transactions["t"].producer_epoch = 32766
    pid2, epoch2 = h.coord.init_producer_id("t", 30_000)
    assert pid2 != pid and epoch2 == 0


def test_timeout_aborts_and_fences(h):
    pid, epoch = h.coord.init_producer_id("t", 10_000)
    h.coord.add_partitions("t", pid, epoch, [("a", 0)])
    h.now += 9_999
    assert h.coord.abort_timed_out() == []
    h.now += 1
    assert h.coord.abort_timed_out() == ["t"]
    assert h.markers == [(pid, epoch + 1, False, [("a", 0)])]
    meta = h.coord.describe("t")
    assert meta.state == TxnStatus.COMPLETE_ABORT and meta.producer_epoch == epoch + 1
    with pytest.raises(errors.ProducerFenced):
        h.coord.end_txn("t", pid, epoch, commit=True)


def test_verify_only(h):
    pid, epoch = h.coord.init_producer_id("t", 10_000)
    h.coord.add_partitions("t", pid, epoch, [("a", 0)])
    assert h.coord.verify_partitions("t", pid, epoch, [("a", 0), ("a", 1)]) == {
        ("a", 0): 0, ("a", 1): errors.InvalidTxnState.code}
    assert h.coord.describe("t").partitions == {("a", 0)}  # verify never adds


def test_reload_restores_state_and_completes_prepared():
    h = Harness(fail_markers=True)
    pid, epoch = h.coord.init_producer_id("t", 30_000)
    h.coord.add_partitions("t", pid, epoch, [("a", 0), ("a", 1)])
    h.coord.end_txn("t", pid, epoch, commit=True)  # markers fail: stays PrepareCommit
    assert h.coord.describe("t").state == TxnStatus.PREPARE_COMMIT
    pid_b, epoch_b = h.coord.init_producer_id("open", 30_000)
    h.coord.add_partitions("open", pid_b, epoch_b, [("b", 0)])
    # "restart": a new coordinator replays the state records
    h.fail_markers = False
    fresh = h.reload()
    assert fresh.describe("t").state == TxnStatus.PREPARE_COMMIT
    assert fresh.describe("open").state == TxnStatus.ONGOING
    assert fresh.describe("open").partitions == {("b", 0)}
    assert fresh.complete_prepared() == ["t"]
    assert h.markers == [(pid, epoch, True, [("a", 0), ("a", 1)])]
    assert fresh.describe("t").state == TxnStatus.COMPLETE_COMMIT
    # the open one is aborted by its timeout, measured from its start time that was persisted
    h.now += 30_000
    assert fresh.abort_timed_out() == ["open"]
    assert h.markers[-1] == (pid_b, epoch_b + 1, False, [("b", 0)])


def test_list_describe_and_expiration(h):
    p1, e1 = h.coord.init_producer_id("alpha", 10_000)
    p2, e2 = h.coord.init_producer_id("beta", 10_000)
    h.coord.add_partitions("beta", p2, e2, [("a", 0)])
    txns, unknown = h.coord.list_transactions()
    assert [m.transactional_id for m in txns] == ["alpha", "beta"] and unknown == []
    txns, unknown = h.coord.list_transactions(state_filters=["Ongoing", "Bogus"])
    assert [m.transactional_id for m in txns] == ["beta"] and unknown == ["Bogus"]
    assert [m.transactional_id for m in h.coord.list_transactions(producer_id_filters=[p1])[0]] == ["alpha"]
    assert [m.transactional_id for m in h.coord.list_transactions(transactional_id_pattern="^al")[0]] == ["alpha"]
    h.now += 5_000
    assert [m.transactional_id for m in h.coord.list_transactions(duration_filter_ms=4_000)[0]] == ["beta"]
    assert h.coord.list_transactions(duration_filter_ms=6_000)[0] == []
    with pytest.raises(errors.TransactionalIdNotFound):
        h.coord.describe("gamma")
    h.coord.end_txn("beta", p2, e2, commit=True)
    h.now += 3_600_000
    assert sorted(h.coord.expire_transactional_ids()) == ["alpha", "beta"]
    assert h.state_records[-1][2] is None  # tombstone
    assert h.reload().transactions == {}


def test_resolve_transactional_offset_records():
    from tidelake.coordinator.txn_offsets import PendingTxnOffsets, resolve_transactional_records
    from tidelake.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, Record, build_batch, \
        build_control_batch, parse_header

    def b(data):
        return parse_header(data), data

    batches = [
        b(build_batch([Record(0, 1, b"k-plain", b"v1")])),
        b(build_batch([Record(0, 1, b"k-committed", b"v2")], producer_id=7, producer_epoch=0, transactional=True)),
        b(build_batch([Record(0, 1, b"k-aborted", b"v3")], producer_id=8, producer_epoch=0, transactional=True)),
        b(build_batch([Record(0, 1, b"k-open", b"v4")], producer_id=9, producer_epoch=0, transactional=True)),
        b(build_control_batch(CONTROL_ABORT, producer_id=8, producer_epoch=0, coordinator_epoch=0, timestamp=2)),
        b(build_control_batch(CONTROL_COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=2)),
    ]
    applied, open_txns = resolve_transactional_records(batches)
    assert applied == [(b"k-plain", b"v1"), (b"k-committed", b"v2")]
    assert open_txns == {9: [(b"k-open", b"v4")]}

    from tidelake.coordinator.offsets import offset_commit_key
    pending = PendingTxnOffsets()
    pending.add(7, 3, "g", [(offset_commit_key("g", "t", 0), b"x")])
    assert pending.has_pending("g", "t", 0) and not pending.has_pending("g", "t", 1)
    assert not pending.has_pending("other")
    assert pending.complete(7, 2, True) == []  # another offsets partition
    assert pending.complete(7, 3, False) == []  # aborted: dropped
    assert not pending.has_pending("g")


_OPS = st.lists(st.tuples(
    st.sampled_from(["init", "add", "add", "offsets", "commit", "commit", "abort", "abort", "tick", "stale_add",
                     "advance"]),
    st.sampled_from(["a", "b"]),  # transactional id
    st.sampled_from([("t", 0), ("t", 1), ("u", 0)]),
    st.integers(0, 12_000)), min_size=4, max_size=40)


@settings(max_examples=300, deadline=None)
@given(_OPS)
@example([("init", "a", ("t", 0), 0), ("add", "a", ("t", 0), 0), ("commit", "a", ("t", 0), 0),
          ("commit", "a", ("t", 0), 0), ("abort", "a", ("t", 0), 0)])
def test_random_operations_keep_invariants_and_reload_identically(ops):
    """Whatever clients do, (1) the state replayed from the records equals the live state, (2) every
    marker names only partitions of the transaction it ends, with that producer's current id, and
    (3) each transaction is completed (markers written) at most once."""
    h = Harness()
    h.coord.max_timeout_ms = 60_000
    sessions: dict[str, tuple[int, int]] = {}
    open_parts: dict[str, set] = {}
    outcomes: dict[tuple[str, int], bool] = {}
    instance: dict[str, int] = {}  # counts the transactions each id has started
    for op, txn, tp, n in ops:
        before = len(h.markers)
        try:
            if op == "init":
                sessions[txn] = h.coord.init_producer_id(txn, 10_000)
            elif op == "advance":
                h.now += n
            elif op == "tick":
                h.coord.tick()
            elif txn in sessions:
                pid, epoch = sessions[txn]
                if op == "add":
                    h.coord.add_partitions(txn, pid, epoch, [tp])
                elif op == "offsets":
                    h.coord.add_offsets(txn, pid, epoch, "grp")
                elif op in ("commit", "abort"):
                    h.coord.end_txn(txn, pid, epoch, op == "commit")
                elif op == "stale_add":
                    h.coord.add_partitions(txn, pid, epoch - 1, [tp])
        except errors.KafkaApiError:
            pass
        for pid, epoch, commit, parts in h.markers[before:]:
            txn_id = next(t for t, m in h.coord.transactions.items() if m.producer_id == pid)
            assert set(parts) <= open_parts.get(txn_id, set())
            assert pid == h.coord.transactions[txn_id].producer_id
            key = (txn_id, instance[txn_id])
            assert key not in outcomes, "a transaction was completed twice"
            outcomes[key] = commit
        for t, m in h.coord.transactions.items():
            if m.state == TxnStatus.ONGOING and not open_parts.get(t):
                instance[t] = instance.get(t, 0) + 1
            open_parts[t] = set(m.partitions) if m.state == TxnStatus.ONGOING else set()
    fresh = h.reload()
    live = {t: (m.producer_id, m.producer_epoch, m.state, m.partitions, m.start_ms, m.timeout_ms)
            for t, m in h.coord.transactions.items()}
    assert live == {t: (m.producer_id, m.producer_epoch, m.state, m.partitions, m.start_ms, m.timeout_ms)
                    for t, m in fresh.transactions.items()}
