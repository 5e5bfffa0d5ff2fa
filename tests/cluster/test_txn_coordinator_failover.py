"""Transactions across coordinator failovers: a librdkafka transactional producer commits and aborts
while the broker coordinating its transactional id is kill -9'd and restarted again and again
(leadership of the state partition moving to another broker, and back by a preferred election). The
producer gets no fatal error other than fencing, and a read_committed consumer sees every committed
record exactly once and nothing of an aborted transaction.

Also the state a coordinator is in right after it loaded a transaction in PrepareCommit: the commit was
acknowledged, its markers are not all written yet, and the producer's next transaction is refused
(CONCURRENT_TRANSACTIONS) until they are; aborting that next transaction must not be fatal."""
from __future__ import annotations

import json
import signal
import threading
from dataclasses import dataclass, field

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_fixtures import create_topic, find_coordinator, metadata, start_cluster, wait_until, zookeeper_client
from txn_helpers import check_transaction_outcomes, read_all

TOPIC = "failover-ledger"
PARTITIONS = 3
TXN_ID = "failover-producer"
ROUNDS = 4
# fencing is the one fatal error a transactional producer is expected to see (then it is recreated)
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


@dataclass
class Outcomes:
    committed: dict[int, list[str]] = field(default_factory=dict)
    aborted: dict[int, list[str]] = field(default_factory=dict)
    unknown: dict[int, list[str]] = field(default_factory=dict)  # a commit whose outcome the producer lost
    fatal: list[str] = field(default_factory=list)  # fatal errors other than fencing
    fenced: int = 0


def _retrying(call, attempts: int = 30):
    """librdkafka lets a commit/abort/init that failed with a retriable error be called again."""
    for attempt in range(attempts):
        try:
            return call()
        except KafkaException as e:
            if not e.args[0].retriable() or attempt == attempts - 1:
                raise


def _new_producer(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID, "linger.ms": 5,
                  "transaction.timeout.ms": 60000, "message.timeout.ms": 30000})
    _retrying(lambda: p.init_transactions(30))
    return p


def _produce_transactions(bootstrap: str, stop: threading.Event, out: Outcomes) -> None:
    producer = _new_producer(bootstrap)
    txn = 0
    while not stop.is_set():
        values = [f"t{txn:05d}-r{i:02d}" for i in range(10)]
        commit = txn % 3 != 2
        try:
            try:
                producer.begin_transaction()
                for i, v in enumerate(values):
                    producer.produce(TOPIC, value=v.encode(), partition=i % PARTITIONS)
                if commit:
                    _retrying(lambda: producer.commit_transaction(30))
                    out.committed[txn] = values
                else:
                    _retrying(lambda: producer.abort_transaction(30))
                    out.aborted[txn] = values
            except KafkaException as e:
                if not e.args[0].txn_requires_abort():
                    raise
                _retrying(lambda: producer.abort_transaction(30))
                out.aborted[txn] = values
        except KafkaException as e:
            err = e.args[0]
            if err.code() in FENCED:
                out.fenced += 1
            else:
                out.fatal.append(f"transaction {txn} ({'commit' if commit else 'abort'}): {err}")
            (out.unknown if commit else out.aborted)[txn] = values
            producer = _new_producer(bootstrap)
        txn += 1


def _state_partition(zk) -> dict:
    return json.loads(zk.get("/brokers/topics/__transaction_state/partitions/0/state")[0])


@pytest.mark.slow_faults
def test_transactions_survive_repeated_coordinator_kills(tmp_path):
    c = start_cluster(tmp_path / "c", 3, **{"transaction.state.log.num.partitions": "1",
                                            "min.insync.replicas": "2"})
    try:
        create_topic(c, TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
        out = Outcomes()
        stop = threading.Event()
        worker = threading.Thread(target=_produce_transactions, args=(c.bootstrap_servers, stop, out), daemon=True)
        worker.start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        with zookeeper_client(c) as zk:
            wait_until("the first transactions", lambda: len(out.committed) >= 3, 60)
            for round_ in range(ROUNDS):
                coordinator = _state_partition(zk)["leader"]
                c.kill_broker(coordinator)
                wait_until("a new coordinator", lambda: _state_partition(zk)["leader"] not in (coordinator, -1), 60)
                done = len(out.committed)
                wait_until("transactions at the new coordinator", lambda: len(out.committed) >= done + 2, 60)
                c.start_broker(coordinator)
                wait_until(f"broker {coordinator} back in the state partition's ISR",
                           lambda: coordinator in _state_partition(zk)["isr"], 60)
                if round_ % 2:  # coordination moves to the preferred replica, mid-stream
                    wait_until("a preferred leader election of the state partition", lambda: admin.elect_leaders(
                        ElectionType.PREFERRED, [TopicPartition("__transaction_state", 0)]).result(30) is not None, 60)
                done = len(out.committed)
                wait_until("transactions after the failover healed", lambda: len(out.committed) >= done + 3, 60)
        stop.set()
        worker.join(120)
        assert not worker.is_alive(), "the producer hung"
        assert out.fatal == []
        visible = read_all(c.bootstrap_servers, TOPIC, PARTITIONS, "read_committed", timeout=60)
        check_transaction_outcomes(visible, out.committed, out.aborted, out.unknown)
    finally:
        c.stop()


@pytest.mark.slow_faults
def test_aborting_the_next_transaction_while_the_commit_before_it_completes(tmp_path):
    """The previous commit is acknowledged (PrepareCommit on the in-sync replicas) but one of its markers
    cannot be written yet (that partition's leader is stopped), as after a coordinator failover while
    the new coordinator completes what it loaded. The producer begins the next transaction (its
    AddPartitionsToTxn is refused until the commit completes) and aborts it: librdkafka still sends
    EndTxn(abort), which found the coordinator in PrepareCommit and got INVALID_TXN_STATE, fatal. It
    ends an empty transaction: the abort succeeds, and the producer goes on once the markers are in."""
    # DEBUG: the coordinator's line saying it refused the next transaction's AddPartitionsToTxn
    c = start_cluster(tmp_path / "c", 3, log_level="DEBUG", **{"transaction.state.log.num.partitions": "1"})
    try:
        coordinator = find_coordinator(c, 1, "next-after-commit")
        held_leader = next(b for b in c.brokers if b != coordinator)
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        for f in admin.create_topics([NewTopic("held", 1, replica_assignment=[[held_leader]]),
                                      NewTopic("free", 1, replica_assignment=[[coordinator]])]).values():
            f.result(30)
        wait_until("the leaders of held and free", lambda: all(
            p.leader_id >= 0 for t in metadata(c.brokers[coordinator], ["held", "free"]).topics for p in t.partitions))
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": "next-after-commit",
                      "linger.ms": 5})
        p.init_transactions(60)
        p.begin_transaction()
        p.produce("held", value=b"committed-held", partition=0)
        p.produce("free", value=b"committed-free", partition=0)
        assert p.flush(30) == 0
        c.signal_broker(held_leader, signal.SIGSTOP)  # the COMMIT marker of held-0 waits for it
        try:
            p.commit_transaction(60)
            p.begin_transaction()
            p.produce("free", value=b"aborted", partition=0)
            wait_until("the next transaction's AddPartitionsToTxn refused while the commit completes",
                       lambda: "begins a transaction while the previous one is PrepareCommit"
                       in c.brokers[coordinator].log_path.read_text())
            p.abort_transaction(60)
        finally:
            c.signal_broker(held_leader, signal.SIGCONT)
        p.begin_transaction()
        p.produce("free", value=b"after", partition=0)
        p.commit_transaction(60)
        assert read_all(c.bootstrap_servers, "free", 1, "read_committed", timeout=60) == ["after", "committed-free"]
        assert read_all(c.bootstrap_servers, "held", 1, "read_committed", timeout=60) == ["committed-held"]
        log = c.brokers[coordinator].log_path.read_text()
        assert "EndTxn(abort) of producer" in log and "ends a transaction with no partition added" in log
    finally:
        c.stop()


@pytest.mark.slow_faults
def test_markers_wait_until_the_decision_is_on_the_in_sync_replicas(tmp_path):
    """EndTxn(commit) while the state partition's followers are stopped: PrepareCommit is in the
    coordinator's log only. No COMMIT marker may be written before it is on the in-sync replicas (as in
    Kafka): a coordinator elected now would load the transaction as Ongoing, and could abort what the
    markers had already committed. Once the followers are back, the commit completes."""
    c = start_cluster(tmp_path / "c", 3, **{"transaction.state.log.num.partitions": "1",
                                            "replica.lag.time.max.ms": "60000",
                                            "zookeeper.session.timeout.ms": "60000"})
    try:
        coordinator = find_coordinator(c, 1, "decided-first")
        followers = [b for b in c.brokers if b != coordinator]
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic("local", 1, replica_assignment=[[coordinator]])])["local"].result(30)
        wait_until("the leader of local", lambda: all(
            p.leader_id >= 0 for t in metadata(c.brokers[coordinator], ["local"]).topics for p in t.partitions))
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": "decided-first", "linger.ms": 5})
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(3):
            p.produce("local", value=b"v%d" % i, partition=0)
        assert p.flush(30) == 0
        for b in followers:
            c.signal_broker(b, signal.SIGSTOP)
        try:
            with pytest.raises(KafkaException) as e:
                p.commit_transaction(5)  # PrepareCommit cannot reach the in-sync replicas
            assert e.value.args[0].retriable()
            assert read_all(c.brokers[coordinator].bootstrap, "local", 1, "read_committed", timeout=30) == []
        finally:
            for b in followers:
                c.signal_broker(b, signal.SIGCONT)
        p.commit_transaction(60)
        assert read_all(c.bootstrap_servers, "local", 1, "read_committed", timeout=60) == ["v0", "v1", "v2"]
    finally:
        c.stop()
