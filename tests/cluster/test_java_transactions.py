"""The reference Java client (kafka-clients) in a cluster: a consume-transform-produce application —
a consumer group member and a transactional producer sending its offsets to the transaction — keeps
working when the broker coordinating both its group and its transaction is killed (kill -9), and the
output holds every input record exactly once."""
from __future__ import annotations

import json
import subprocess
import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kazoo.client import KazooClient

from cluster_fixtures import create_topic, find_coordinator, start_cluster, wait_until
from kafka_peer import java_command
from tidelake.coordinator.record_codec import partition_for

pytestmark = [pytest.mark.java, pytest.mark.slow_faults]

PARTITIONS = 3  # of the input and output topics and of both internal topics
TXN_ID = "java-ctp"


def _leader(zk: KazooClient, topic: str, partition: int) -> int:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])["leader"]


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), key=b"k%d" % i, partition=i % PARTITIONS)
    assert p.flush(60) == 0


def _produce_slowly(bootstrap: str, topic: str, values: list[str], unsent: list[int], per_round: int = 20) -> None:
    """Produce in small rounds (about ten a second) through an idempotent acks=all producer that rides
    through a broker's death; ``unsent`` gets the count of records not acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    failed = []
    for start in range(0, len(values), per_round):
        for i in range(start, min(start + per_round, len(values))):
            p.produce(topic, values[i].encode(), key=b"k%d" % i, partition=i % PARTITIONS,
                      on_delivery=lambda err, _m: err is not None and failed.append(err))
        p.poll(0.1)
    unsent.append(p.flush(90) + len(failed))


def _read_committed(bootstrap: str, topic: str, expected: int) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: list[str] = []
    try:
        wait_until(f"{expected} committed records of {topic}", lambda: out.extend(
            m.value().decode() for m in c.consume(500, 0.5) if m.error() is None) or len(out) >= expected, 60)
        out.extend(m.value().decode() for m in c.consume(500, 2.0) if m.error() is None)
    finally:
        c.close()
    return out


def test_java_consume_transform_produce_survives_the_kill_of_its_coordinator(tmp_path):
    c = start_cluster(tmp_path / "c", 3, **{"transaction.state.log.num.partitions": str(PARTITIONS),
                                            "offsets.topic.num.partitions": str(PARTITIONS),
                                            "min.insync.replicas": "2", "group.initial.rebalance.delay.ms": "0"})
    zk = KazooClient(hosts=c.zookeeper.connect_string, timeout=10)
    zk.start(10)
    java = None
    try:
        create_topic(c, "in", PARTITIONS, 3)
        create_topic(c, "out", PARTITIONS, 3)
        coordinator = find_coordinator(c, 1, TXN_ID)
        find_coordinator(c, 0, "any-group")
        assert coordinator == _leader(zk, "__transaction_state", partition_for(TXN_ID, PARTITIONS))
        # a group coordinated by the same broker: one kill takes both coordinators away
        group = next(g for g in (f"java-group-{i}" for i in range(200))
                     if _leader(zk, "__consumer_offsets", partition_for(g, PARTITIONS)) == coordinator)
        inputs = [f"record-{i:05d}" for i in range(600)]
        _produce(c.bootstrap_servers, "in", inputs[:100])

        java = subprocess.Popen(java_command("ClusterCtpClient", c.bootstrap_servers, "in", "out", group, TXN_ID,
                                              str(len(inputs)), "100000"),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines: list[list[str]] = []
        reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n").split("\t") for line in java.stdout),
                                  daemon=True)
        reader.start()

        def progress() -> int:
            return max((int(f[1]) for f in list(lines) if f[0] == "progress"), default=0)
        wait_until("the Java application to commit its first records", lambda: progress() >= 40, 90)
        # the rest arrives while the application runs, so the kill lands mid-stream
        unsent: list[int] = []
        feeder = threading.Thread(target=_produce_slowly, args=(c.bootstrap_servers, "in", inputs[100:], unsent),
                                  daemon=True)
        feeder.start()
        wait_until("the Java application to commit 150 records", lambda: progress() >= 150, 90)
        c.kill_broker(coordinator)
        survivors = ",".join(b.bootstrap for b in c.brokers.values() if b.broker_id != coordinator)
        feeder.join(90)
        assert unsent == [0]  # every input acknowledged
        assert java.wait(120) == 0, lines[-5:]
        reader.join(10)
        assert ["done", str(len(inputs))] in lines
        new_txn = _leader(zk, "__transaction_state", partition_for(TXN_ID, PARTITIONS))
        new_group = _leader(zk, "__consumer_offsets", partition_for(group, PARTITIONS))
        assert coordinator not in (new_txn, new_group)

        out = _read_committed(survivors, "out", len(inputs))
        assert sorted(out) == sorted(v.upper() for v in inputs)  # every input exactly once
        check = Consumer({"bootstrap.servers": survivors, "group.id": group, "enable.auto.commit": False})
        try:
            committed = check.committed([TopicPartition("in", p) for p in range(PARTITIONS)], timeout=30)
        finally:
            check.close()
        assert sum(tp.offset for tp in committed) == len(inputs)  # the group's offsets went with the output
    finally:
        if java is not None and java.poll() is None:
            java.kill()
            java.wait(10)
        zk.stop()
        zk.close()
        c.stop()
