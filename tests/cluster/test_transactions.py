"""Transactions in a cluster: the coordinator of a transactional id is the leader of its
__transaction_state partition; markers reach the leaders of the transaction's partitions (other
brokers) through WriteTxnMarkers; a read_committed consumer sees exactly the committed records."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
                                     TxnOffsetCommitRequest)
from kazoo.client import KazooClient

from cluster_fixtures import (TXN_STATE_PARTITIONS, create_topic, find_coordinator, metadata, wait_until,
                              zookeeper_client)
from txn_helpers import check_transaction_outcomes
from tidelake.coordinator.record_codec import partition_for
from tidelake.protocol.wire_client import WireClient



def _read_committed(bootstrap: str, topic: str, partitions: int, expected: int, *, settle_s: float = 2.0,
                    isolation: str = "read_committed") -> list:
    """Every record a read_committed consumer sees, once it has ``expected`` of them and nothing more
    arrives for ``settle_s`` (a later, unexpected record would show up as extra)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    try:
        wait_until(f"{expected} committed records of {topic}", lambda: out.extend(
            m.value() for m in c.consume(500, 0.5) if m.error() is None) or len(out) >= expected, 60)
        out.extend(m.value() for m in c.consume(500, settle_s) if m.error() is None)
    finally:
        c.close()
    return out


def _leaders(cluster, topic: str) -> dict[int, int]:
    (t,) = metadata(next(iter(cluster.brokers.values())), [topic]).topics
    return {p.partition_index: p.leader_id for p in t.partitions}


def _state(zk: KazooClient, topic: str, partition: int) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])


def test_commit_and_abort_across_partitions_led_by_different_brokers(txn_cluster):
    c = txn_cluster
    create_topic(c, "payments", 3, 3)
    leaders = _leaders(c, "payments")
    assert len(set(leaders.values())) == 3  # each partition's markers go to another broker
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": "payer-1", "linger.ms": 5})
    p.init_transactions(60)
    committed, aborted = [], []
    for txn in range(6):
        p.begin_transaction()
        values = [b"t%d-r%03d" % (txn, i) for i in range(30)]
        for i, v in enumerate(values):
            p.produce("payments", value=v, partition=i % 3)
        assert p.flush(30) == 0  # in the logs (and so to be hidden by the ABORT markers) before the outcome
        if txn % 3 == 2:
            p.abort_transaction(60)
            aborted.extend(values)
        else:
            p.commit_transaction(60)
            committed.extend(values)
    p.flush(30)
    got = _read_committed(c.bootstrap_servers, "payments", 3, len(committed))
    assert sorted(got) == sorted(committed)
    assert not set(got) & set(aborted)
    # the aborted records are in the logs: only the ABORT markers hide them
    everything = _read_committed(c.bootstrap_servers, "payments", 3, len(committed) + len(aborted),
                                 isolation="read_uncommitted")
    assert sorted(everything) == sorted(committed + aborted)
    # the coordinator is the leader of the id's __transaction_state partition, replicated to all three
    zk = KazooClient(hosts=c.zookeeper.connect_string, timeout=10)
    zk.start(10)
    try:
        st = _state(zk, "__transaction_state", partition_for("payer-1", TXN_STATE_PARTITIONS))
        assert sorted(st["isr"]) == [1, 2, 3]
        cfg = json.loads(zk.get("/config/topics/__transaction_state")[0])["config"]
        assert cfg["min.insync.replicas"] == "2" and cfg["cleanup.policy"] == "compact"
    finally:
        zk.stop()
        zk.close()
    # the operator's view: each broker lists the transactional ids it coordinates
    described = _cli(c, "transactions", "describe", "payer-1")
    assert (described["coordinator"], described["state"]) == (st["leader"], "CompleteAbort")  # the last one aborted
    listed = _cli(c, "transactions", "list")
    assert [(t["transactional_id"], t["coordinator"]) for t in listed] == [("payer-1", st["leader"])]


def _cli(cluster, *args: str):
    r = subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args, "-b", cluster.bootstrap_servers, "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_only_the_leader_of_the_state_partition_coordinates_a_transactional_id(txn_cluster):
    c = txn_cluster
    coordinator = find_coordinator(c, 1, "owned")
    answers = {}
    for bid, b in c.brokers.items():
        with WireClient("127.0.0.1", b.port) as w:
            r = w.request(InitProducerIdRequest(transactional_id="owned", transaction_timeout_ms=60000,
                                                producer_id=-1, producer_epoch=-1), 3)
        answers[bid] = (r.error_code, r.producer_epoch)
    assert answers.pop(coordinator) == (0, 0)
    assert set(answers.values()) == {(16, -1)}  # NOT_COORDINATOR: the client asks FindCoordinator again


def test_transactional_offsets_reach_a_group_coordinated_by_another_broker(txn_cluster):
    """The wire steps of sendOffsetsToTransaction when the group's coordinator is not the transaction's:
    TxnOffsetCommit at the group coordinator is checked with the transaction coordinator (refused before
    AddOffsetsToTxn), and the offsets become visible there when the COMMIT marker arrives through
    WriteTxnMarkers."""
    c = txn_cluster
    create_topic(c, "source", 3, 3)
    txn_coordinator = find_coordinator(c, 1, "offsets-txn")
    group = next(g for g in (f"remote-group-{i}" for i in range(100)) if find_coordinator(c, 0, g) != txn_coordinator)
    group_coordinator = find_coordinator(c, 0, group)

    def ask(broker_id: int, request, version: int):
        with WireClient("127.0.0.1", c.brokers[broker_id].port) as w:
            return w.request(request, version)
    r = ask(txn_coordinator, InitProducerIdRequest(transactional_id="offsets-txn", transaction_timeout_ms=60000,
                                                   producer_id=-1, producer_epoch=-1), 3)
    pid, epoch = r.producer_id, r.producer_epoch
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    commit = TxnOffsetCommitRequest(
        transactional_id="offsets-txn", group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1,
        member_id="", group_instance_id=None, topics=[T(name="source", partitions=[
            T.TxnOffsetCommitRequestPartition(partition_index=1, committed_offset=42, committed_leader_epoch=-1,
                                              committed_metadata="m")])])

    def commit_codes():
        return [p.error_code for t in ask(group_coordinator, commit, 3).topics for p in t.partitions]
    assert commit_codes() == [48]  # INVALID_TXN_STATE: the group is not in the transaction yet
    assert ask(txn_coordinator, AddOffsetsToTxnRequest(transactional_id="offsets-txn", producer_id=pid,
                                                       producer_epoch=epoch, group_id=group), 3).error_code == 0
    assert commit_codes() == [0]
    fetch = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
        name="source", partition_indexes=[1])], require_stable=True)

    def fetched():
        (t,) = ask(group_coordinator, fetch, 7).topics
        (p,) = t.partitions
        return p.error_code, p.committed_offset
    assert fetched() == (88, -1)  # UNSTABLE_OFFSET_COMMIT: pending until the transaction ends
    assert ask(txn_coordinator, EndTxnRequest(transactional_id="offsets-txn", producer_id=pid, producer_epoch=epoch,
                                              committed=True), 3).error_code == 0
    wait_until("the committed offset at the group coordinator", lambda: fetched() == (0, 42))


def test_a_zombie_is_fenced_across_the_cluster(txn_cluster):
    c = txn_cluster
    create_topic(c, "fenced", 3, 3)
    old = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": "zombie"})
    old.init_transactions(60)
    old.begin_transaction()
    for i in range(9):
        old.produce("fenced", value=b"old-%d" % i, partition=i % 3)
    old.flush(30)
    new = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": "zombie"})
    new.init_transactions(60)  # fences the old session and aborts its open transaction
    new.begin_transaction()
    for i in range(9):
        new.produce("fenced", value=b"new-%d" % i, partition=i % 3)
    new.commit_transaction(60)
    with pytest.raises(KafkaException):
        old.commit_transaction(30)
    got = _read_committed(c.bootstrap_servers, "fenced", 3, 9)
    assert sorted(got) == sorted(b"new-%d" % i for i in range(9))


class TxnRun:
    """A transactional producer that keeps going across coordinator failures, as an application
    would: a retriable error retries the same call, an abortable one aborts, a fatal one (or
    PRODUCER_FENCED) starts a new producer with the same transactional id. Every transaction gets
    values of its own; the outcome of each is recorded: committed (commit acknowledged), aborted
    (abort acknowledged, or the open transaction a new session aborted) or unknown (a commit whose
    answer was lost: all of it or none of it may be visible, never part)."""

    def __init__(self, bootstrap: str, txn_id: str, topic: str, partitions: int):
        self.bootstrap, self.txn_id, self.topic, self.partitions = bootstrap, txn_id, topic, partitions
        self.committed: dict[int, list[bytes]] = {}
        self.aborted: dict[int, list[bytes]] = {}
        self.unknown: dict[int, list[bytes]] = {}
        self.new_sessions = 0
        self.producer = self._new_producer()
        self.next_txn = 0

    def _new_producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id, "linger.ms": 5,
                      "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
        self._retry(lambda: p.init_transactions(30), "init_transactions")
        return p

    @staticmethod
    def _retry(call, what: str, attempts: int = 10):
        for attempt in range(attempts):
            try:
                return call()
            except KafkaException as e:
                err = e.args[0]
                if not err.retriable() or attempt == attempts - 1:
                    raise
        raise AssertionError(f"{what} kept failing")

    def values(self, txn: int, n: int) -> list[bytes]:
        return [b"%s-t%04d-r%03d" % (self.txn_id.encode(), txn, i) for i in range(n)]

    def begin_and_produce(self, n: int) -> int:
        txn = self.next_txn
        self.next_txn += 1
        self.producer.begin_transaction()
        for i, v in enumerate(self.values(txn, n)):
            self.producer.produce(self.topic, value=v, partition=i % self.partitions)
        self.producer.flush(60)
        return txn

    def finish(self, txn: int, n: int, commit: bool = True) -> None:
        values = self.values(txn, n)
        try:
            if commit:
                self._retry(lambda: self.producer.commit_transaction(30), "commit_transaction")
                self.committed[txn] = values
            else:
                self._retry(lambda: self.producer.abort_transaction(30), "abort_transaction")
                self.aborted[txn] = values
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                self._retry(lambda: self.producer.abort_transaction(30), "abort_transaction")
                self.aborted[txn] = values
                return
            # fatal (fenced, or an unknown outcome): a new session; it aborts what is still open
            (self.unknown if commit else self.aborted)[txn] = values
            self.new_sessions += 1
            self.producer = self._new_producer()

    def transaction(self, n: int, commit: bool = True) -> None:
        for _attempt in range(5):
            try:
                txn = self.begin_and_produce(n)
            except KafkaException as e:
                if e.args[0].txn_requires_abort():
                    self._retry(lambda: self.producer.abort_transaction(30), "abort_transaction")
                else:
                    self.new_sessions += 1
                    self.producer = self._new_producer()
                continue
            self.finish(txn, n, commit)
            if not commit or txn in self.committed:
                return
        raise AssertionError(f"{self.txn_id}: no transaction committed in 5 attempts")

    def check(self, visible: list[bytes]) -> None:
        """Committed transactions visible exactly once, aborted ones not at all, unknown ones whole or not."""
        check_transaction_outcomes(visible, self.committed, self.aborted, self.unknown)

    def expected_visible(self) -> int:
        return sum(map(len, self.committed.values()))


def _coordinator(zk: KazooClient, txn_id: str) -> int:
    return _state(zk, "__transaction_state", partition_for(txn_id, TXN_STATE_PARTITIONS))["leader"]


def _new_coordinator(zk: KazooClient, txn_id: str, dead: int) -> int:
    return wait_until(f"a new coordinator of {txn_id}",
                      lambda: (lambda leader: leader if leader not in (dead, -1) else None)(_coordinator(zk, txn_id)),
                      60)


@pytest.fixture
def zk(txn_cluster):
    with zookeeper_client(txn_cluster) as client:
        yield client


def _survivors(cluster, dead: int) -> str:
    return ",".join(b.bootstrap for b in cluster.brokers.values() if b.broker_id != dead)


@pytest.mark.slow_faults
def test_producer_keeps_going_when_the_coordinator_is_killed_between_transactions(txn_cluster, zk):
    c = txn_cluster
    create_topic(c, "ledger", 3, 3, **{"min.insync.replicas": "2"})
    run = TxnRun(c.bootstrap_servers, "between", "ledger", 3)
    for i in range(4):
        run.transaction(20, commit=i != 2)
    coordinator = _coordinator(zk, "between")
    c.kill_broker(coordinator)
    for i in range(4):
        run.transaction(20, commit=i != 1)
    new = _new_coordinator(zk, "between", coordinator)
    assert new != coordinator
    visible = _read_committed(_survivors(c, coordinator), "ledger", 3, run.expected_visible())
    run.check(visible)
    assert len(run.committed) >= 6  # the transactions after the kill committed too


@pytest.mark.slow_faults
def test_a_transaction_in_flight_survives_the_kill_of_its_coordinator(txn_cluster, zk):
    c = txn_cluster
    create_topic(c, "inflight", 3, 3, **{"min.insync.replicas": "2"})
    run = TxnRun(c.bootstrap_servers, "in-flight", "inflight", 3)
    run.transaction(20)
    committing = run.begin_and_produce(30)  # open, its records on every partition's ISR
    coordinator = _coordinator(zk, "in-flight")
    c.kill_broker(coordinator)
    run.finish(committing, 30)  # the new coordinator loaded the open transaction and commits it
    aborting = run.begin_and_produce(30)
    run.finish(aborting, 30, commit=False)
    run.transaction(20)
    visible = _read_committed(_survivors(c, coordinator), "inflight", 3, run.expected_visible())
    run.check(visible)
    assert committing in run.committed or committing in run.unknown
    assert aborting in run.aborted


@pytest.mark.slow_faults
def test_an_open_transaction_is_aborted_by_the_new_coordinator_when_the_producer_dies_too(txn_cluster, zk):
    """The coordinator and the producer die together mid-transaction: the next session's
    InitProducerId at the new coordinator aborts the open transaction, whose records never show."""
    c = txn_cluster
    create_topic(c, "orphans", 3, 3, **{"min.insync.replicas": "2"})
    first = TxnRun(c.bootstrap_servers, "orphan", "orphans", 3)
    first.transaction(15)
    orphan = first.begin_and_produce(15)
    coordinator = _coordinator(zk, "orphan")
    c.kill_broker(coordinator)
    del first.producer  # the application is gone with its open transaction
    second = TxnRun(_survivors(c, coordinator), "orphan", "orphans", 3)
    second.next_txn = 100  # values of its own
    second.transaction(15)
    second.committed.update(first.committed)
    second.aborted[orphan] = first.values(orphan, 15)
    visible = _read_committed(_survivors(c, coordinator), "orphans", 3, second.expected_visible())
    second.check(visible)


@pytest.mark.slow_faults
def test_a_commit_left_in_prepare_is_completed_by_the_next_coordinator(txn_cluster, zk):
    """EndTxn(commit) is acknowledged once PrepareCommit is on the in-sync replicas; the markers cannot
    reach the data partition's leader (stopped), and the coordinator is killed before they do. The
    next coordinator finds the transaction in PrepareCommit when it loads the partition and writes the
    markers itself: the committed records become visible."""
    c = txn_cluster
    a = find_coordinator(c, 1, "prepared")
    b, spare = [bid for bid in c.brokers if bid != a]
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    (f,) = admin.create_topics([NewTopic("held", 1, replica_assignment=[[b, spare, a]],
                                         config={"min.insync.replicas": "1"})], request_timeout=20).values()
    f.result(30)
    wait_until("the leader of held-0 to be known", lambda: _leaders(c, "held").get(0) == b)
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": "prepared", "linger.ms": 5})
    p.init_transactions(60)
    p.begin_transaction()
    values = [b"held-%02d" % i for i in range(20)]
    for v in values:
        p.produce("held", value=v, partition=0)
    assert p.flush(30) == 0
    c.signal_broker(b, signal.SIGSTOP)  # the marker for held-0 cannot be written now
    try:
        p.commit_transaction(60)  # answered once PrepareCommit is replicated (to the spare broker)
        c.kill_broker(a)
    finally:
        c.signal_broker(b, signal.SIGCONT)
    new = _new_coordinator(zk, "prepared", a)
    got = _read_committed(_survivors(c, a), "held", 1, len(values))
    assert sorted(got) == values
    log = c.brokers[new].log_path.read_text()
    assert "completing the transactions found in Prepare* in __transaction_state-" in log
    assert "['prepared']" in log


def _describe_at(cluster, broker_id: int, txn_id: str):
    with WireClient("127.0.0.1", cluster.brokers[broker_id].port) as w:
        (st,) = w.request(DescribeTransactionsRequest(transactional_ids=[txn_id]), 0).transaction_states
    return st


@pytest.mark.slow_faults
def test_coordination_moves_back_with_a_preferred_leader_election(txn_cluster, zk):
    """The coordinator's broker is killed and restarted: the interim leader coordinates, the restarted
    broker answers NOT_COORDINATOR; a preferred leader election gives the partition back, the interim
    broker unloads (NOT_COORDINATOR) and the restarted one loads the same state. The producer follows."""
    c = txn_cluster
    create_topic(c, "moves", 3, 3, **{"min.insync.replicas": "2"})
    state_partition = partition_for("mover", TXN_STATE_PARTITIONS)
    first = find_coordinator(c, 1, "mover")
    run = TxnRun(c.bootstrap_servers, "mover", "moves", 3)
    run.transaction(10)
    c.kill_broker(first)
    interim = _new_coordinator(zk, "mover", first)
    run.transaction(10)
    c.start_broker(first)
    wait_until(f"broker {first} back in the ISR of the state partition",
               lambda: first in _state(zk, "__transaction_state", state_partition)["isr"], 60)
    assert _describe_at(c, first, "mover").error_code == 16  # NOT_COORDINATOR: a follower now
    before = _describe_at(c, interim, "mover")
    assert (before.error_code, before.transaction_state) == (0, "CompleteCommit")
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("__transaction_state", state_partition)]).result(60)
    assert _state(zk, "__transaction_state", state_partition)["leader"] == first
    wait_until(f"broker {interim} to unload the transactional id",
               lambda: _describe_at(c, interim, "mover").error_code == 16)
    after = wait_until(f"broker {first} to load the transactional id",
                       lambda: (lambda st: st if st.error_code == 0 else None)(_describe_at(c, first, "mover")))
    assert (after.producer_id, after.producer_epoch, after.transaction_state) == \
        (before.producer_id, before.producer_epoch, "CompleteCommit")
    run.transaction(10)
    visible = _read_committed(c.bootstrap_servers, "moves", 3, run.expected_visible())
    run.check(visible)
    assert len(run.committed) == 3
