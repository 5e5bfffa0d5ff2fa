"""The Apache Kafka 4.4 peer itself (tests/kafka_peer.py): one KRaft broker and a 3-node KRaft cluster start from
the pinned jars, serve a produce and a consume with confluent-kafka, and stop by their pids."""
from __future__ import annotations

import socket

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.java


def produce(bootstrap: str, topic: str, n: int) -> None:
    delivered = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, key=b"k%d" % (i % 7), value=b"v%d" % i, on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(60) == 0
    assert delivered == [None] * n


def consume(bootstrap: str, topic: str, group: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "group.protocol": "consumer"})   # KIP-848, Kafka 4's default group protocol
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(600):   # a last guard; the loop ends on the count
            if len(got) >= n:
                break
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def create(bootstrap: str, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})   # kept alive until its futures are answered
    for f in admin.create_topics([topic]).values():
        f.result(60)


def is_listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) == 0


def test_one_broker_serves_produce_and_a_group_consume(kafka44):
    bs = kafka44.bootstrap_servers
    create(bs, NewTopic("peer-one", 3, 1))
    produce(bs, "peer-one", 300)
    assert sorted(consume(bs, "peer-one", "peer-one-group", 300)) == sorted(b"v%d" % i for i in range(300))
    md = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=30)
    assert [b.id for b in md.brokers.values()] == [1] and md.controller_id == 1
    assert len(md.topics["peer-one"].partitions) == 3


def test_one_broker_stops_by_its_pid(kafka44):
    node = kafka44.nodes[0]
    assert is_listening(node.address)
    kafka44.stop()
    assert node.proc.returncode is not None and not is_listening(node.address)
    assert "Kafka Server started" in node.log.read_text()   # the log is kept


def test_three_nodes_replicate_with_min_insync_two(kafka44_cluster):
    bs = kafka44_cluster.bootstrap_servers
    create(bs, NewTopic("peer-rf3", 2, 3, config={"min.insync.replicas": "2"}))
    md = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=30)
    assert sorted(b.id for b in md.brokers.values()) == [1, 2, 3]
    for p in md.topics["peer-rf3"].partitions.values():
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3]
    produce(bs, "peer-rf3", 200)
    assert sorted(consume(bs, "peer-rf3", "peer-rf3-group", 200)) == sorted(b"v%d" % i for i in range(200))


def test_the_cluster_stops_by_its_pids(kafka44_cluster):
    kafka44_cluster.stop()
    for node in kafka44_cluster.nodes:
        assert node.proc.returncode is not None and not is_listening(node.address)
