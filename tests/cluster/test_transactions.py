"""Transactions in a cluster: the coordinator of a transactional id is the leader of its
__transaction_state partition; markers reach the leaders of the transaction's partitions (other
brokers) through WriteTxnMarkers; a read_committed consumer sees exactly the committed records."""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kazoo.client import KazooClient

from cluster_fixtures import create_topic, metadata, start_cluster, wait_until
from tidelake.coordinator.record_codec import partition_for

TXN_PARTITIONS = 3


def _read_committed(bootstrap: str, topic: str, partitions: int, expected: int, *, settle_s: float = 2.0) -> list:
    """Every record a read_committed consumer sees, once it has ``expected`` of them and nothing more
    arrives for ``settle_s`` (a later, unexpected record would show up as extra)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
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


@pytest.fixture
def txn_cluster(tmp_path):
    c = start_cluster(tmp_path / "c", 3, **{"transaction.state.log.num.partitions": str(TXN_PARTITIONS),
                                            "min.insync.replicas": "2"})
    yield c
    c.stop()


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
    # the coordinator is the leader of the id's __transaction_state partition, replicated to all three
    zk = KazooClient(hosts=c.zookeeper.connect_string, timeout=10)
    zk.start(10)
    try:
        st = _state(zk, "__transaction_state", partition_for("payer-1", TXN_PARTITIONS))
        assert sorted(st["isr"]) == [1, 2, 3]
        cfg = json.loads(zk.get("/config/topics/__transaction_state")[0])["config"]
        assert cfg["min.insync.replicas"] == "2" and cfg["cleanup.policy"] == "compact"
    finally:
        zk.stop()
        zk.close()


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
