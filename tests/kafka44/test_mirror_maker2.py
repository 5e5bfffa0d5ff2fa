"""MirrorMaker 2 (Connect 4.3.1's connect-mirror, jvm/kafka's connect-4.3 classpath; dedicated mode) from tidelake to a
real Kafka 4.4 broker: the topic is replicated as `tl.<topic>` with its records, the consumer group's committed
offsets are translated (offset syncs at every record: offset.lag.max=0) and written to Kafka
(sync.group.offsets.enabled), and the group resumes on Kafka where it stopped on tidelake: nothing lost, nothing
read twice. (Kafka to tidelake, and the README recipe, are issue 37 item 3's rest.)"""
from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import stop_process
from kafka_peer import TEST_JVM_OPTIONS, classpath
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java

TOPIC, GROUP, PARTITIONS, PER_PARTITION, COMMITTED = "mm-orders", "mm-app", 2, 50, 30


def mm2_properties(source: str, target: str) -> dict[str, str]:
    single_broker = {f"{t}.replication.factor": "1" for t in (
        "checkpoints.topic", "heartbeats.topic", "offset-syncs.topic", "offset.storage", "status.storage",
        "config.storage")}
    return {"clusters": "tl, k44", "tl.bootstrap.servers": source, "k44.bootstrap.servers": target,
            "tl->k44.enabled": "true", "tl->k44.topics": TOPIC, "tl->k44.groups": GROUP, "k44->tl.enabled": "false",
            "replication.factor": "1", **single_broker,
            "offset.lag.max": "0",   # an offset sync per record: the group's offsets translate exactly
            "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
            "emit.checkpoints.interval.seconds": "1", "refresh.topics.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1"}


def wait_for(what: str, condition, proc: subprocess.Popen, log, timeout: float = 240):
    deadline = time.monotonic() + timeout   # a last guard: each wait ends on its condition
    while not (value := condition()):
        assert proc.poll() is None, f"MirrorMaker exited {proc.returncode}:\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout}s:\n{log.read_text()[-4000:]}"
        time.sleep(0.5)
    return value


def group_offsets(admin: AdminClient, topic: str) -> dict[int, int]:
    try:
        answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(10)
    except Exception:   # the group is not on the target yet
        return {}
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == topic and tp.offset >= 0}


def test_a_topic_and_its_group_move_from_tidelake_to_kafka(kafka44, tmp_path):
    with EmbeddedBroker(tmp_path / "tidelake", config={"group.initial.rebalance.delay.ms": "0"}) as b:
        tl = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": tl})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": tl})
        for i in range(PARTITIONS * PER_PARTITION):
            p.produce(TOPIC, b"v%d" % i, partition=i % PARTITIONS)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": tl, "group.id": GROUP, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(TOPIC, q, COMMITTED) for q in range(PARTITIONS)], asynchronous=False)
        c.close()

        config = tmp_path / "mm2.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in mm2_properties(tl, kafka44.bootstrap_servers).items()))
        log = tmp_path / "mm2.log"
        with open(log, "w") as out:
            mm2 = subprocess.Popen(["java", "-Xmx384m", *TEST_JVM_OPTIONS, "-cp", classpath("connect-4.3"),
                                    "org.apache.kafka.connect.mirror.MirrorMaker", str(config)],
                                   stdout=out, stderr=subprocess.STDOUT)
        try:
            target = AdminClient({"bootstrap.servers": kafka44.bootstrap_servers})
            remote = f"tl.{TOPIC}"
            # Checkpoints move up as offset syncs arrive: the wait ends once both partitions are where the group
            # committed on tidelake (a translation past it would never end the wait: the test fails).
            expected = {q: COMMITTED for q in range(PARTITIONS)}
            wait_for("translated offsets", lambda: group_offsets(target, remote) == expected, mm2, log)
        finally:
            stop_process(mm2)

    # The group resumes on Kafka: exactly the records after its commit on tidelake.
    c = Consumer({"bootstrap.servers": kafka44.bootstrap_servers, "group.id": GROUP, "auto.offset.reset": "earliest"})
    c.subscribe([remote])
    rest: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 120
    while len(rest) < PARTITIONS * (PER_PARTITION - COMMITTED) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            rest.append((m.partition(), m.value()))
    c.close()
    assert sorted(rest) == sorted((i % PARTITIONS, b"v%d" % i) for i in range(PARTITIONS * PER_PARTITION)
                                  if i // PARTITIONS >= COMMITTED)
