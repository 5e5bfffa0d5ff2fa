"""MirrorMaker 2 both ways between tidelake and a real Kafka 4.4 broker (issue 37 item 3): Connect 4.3.1's
connect-mirror (jvm/kafka's connect-4.3 classpath), one dedicated-mode MirrorMaker process for both flows,
tidelake -> Kafka (`tl.<topic>` on Kafka) and Kafka -> tidelake (`k44.<topic>` on tidelake). Each flow moves a
topic's records, its configs and a consumer group's committed offsets (checkpoints, `sync.group.offsets.enabled`): a group that
read its topic to the end and stopped on one side resumes on the other at exactly the next record — nothing lost,
nothing read twice — and reads the records produced on the old side after it stopped.

Why the group reads to the end before it moves: MirrorMaker translates a committed offset through the offset
syncs it keeps (`OffsetSyncStore`), and only an offset at or one past a kept sync translates exactly; an offset
between two kept syncs translates to one past the older one (re-read records, as MirrorMaker documents), and one
older than every kept sync not at all. The last record's sync is always kept, so a group that caught up moves
exactly — the way the README's recipe "Move a topic and its groups" moves an application."""
from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from conftest import stop_process
from kafka_peer import LOG4J2, TEST_JVM_OPTIONS, classpath
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java

PARTITIONS, BEFORE, AFTER = 2, 50, 20   # records per partition before the group stops, and after
WAIT = 240.0   # a last guard: each wait ends on its condition


def mm2_properties(tidelake: str, kafka: str) -> dict[str, str]:
    internal = {f"{t}.replication.factor": "1" for t in (
        "checkpoints.topic", "heartbeats.topic", "offset-syncs.topic", "offset.storage", "status.storage",
        "config.storage")}
    return {"clusters": "tl, k44", "tl.bootstrap.servers": tidelake, "k44.bootstrap.servers": kafka,
            "tl->k44.enabled": "true", "tl->k44.topics": "mm-orders", "tl->k44.groups": "mm-app",
            "k44->tl.enabled": "true", "k44->tl.topics": "mm-events", "k44->tl.groups": "mm-reader",
            "replication.factor": "1", **internal,
            "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
            "emit.checkpoints.interval.seconds": "1", "refresh.topics.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1", "offset.flush.interval.ms": "1000"}


class MirrorMaker:
    """One dedicated-mode MirrorMaker 2 process, stopped by its pid; its log kept beside its properties."""

    def __init__(self, workdir, properties: dict[str, str]):
        (workdir / "log4j2.properties").write_text(LOG4J2)
        config = workdir / "mm2.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        self.log = workdir / "mm2.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                ["java", "-Xmx384m", *TEST_JVM_OPTIONS, f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
                 "-cp", classpath("connect-4.3"), "org.apache.kafka.connect.mirror.MirrorMaker", str(config)],
                stdout=out, stderr=subprocess.STDOUT)

    def wait_for(self, what: str, condition):
        deadline = time.monotonic() + WAIT
        while not (value := condition()):
            assert self.proc.poll() is None, f"MirrorMaker exited {self.proc.returncode}:\n{self.tail()}"
            assert time.monotonic() < deadline, f"no {what} after {WAIT:.0f}s:\n{self.tail()}"
            time.sleep(0.5)
        return value

    def tail(self) -> str:
        return self.log.read_text()[-4000:]

    def stop(self):
        stop_process(self.proc)


@pytest.fixture(scope="module")
def clusters(kafka44, tmp_path_factory):
    """tidelake's bootstrap, Kafka's, and the MirrorMaker between them (started before any record is produced)."""
    workdir = tmp_path_factory.mktemp("mm2")
    with EmbeddedBroker(workdir / "tidelake", config={"group.initial.rebalance.delay.ms": "0"}) as b:
        create(b.bootstrap_servers, "mm-orders")
        create(kafka44.bootstrap_servers, "mm-events")
        mm2 = MirrorMaker(workdir, mm2_properties(b.bootstrap_servers, kafka44.bootstrap_servers))
        try:
            yield b.bootstrap_servers, kafka44.bootstrap_servers, mm2
        finally:
            mm2.stop()


RETENTION_MS = "86400000"   # a topic config set on the source, copied to the remote topic by MirrorMaker


def create(bootstrap: str, topic: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})   # kept alive until its futures are done
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"retention.ms": RETENTION_MS})]).values():
        f.result(60)


def topic_config(bootstrap: str, topic: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(30)[name].value


def produce(bootstrap: str, topic: str, first: int, count: int):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for q in range(PARTITIONS):
        for i in range(first, first + count):
            p.produce(topic, f"{q}-{i}".encode(), partition=q)
    assert p.flush(60) == 0


def read(bootstrap: str, topic: str, group: str, per_partition: int) -> dict[int, list[bytes]]:
    """The first per_partition records of each partition a member of the group reads, from its committed offsets;
    it commits what it read and leaves."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
    deadline = time.monotonic() + WAIT
    try:
        while any(len(v) < per_partition for v in got.values()):
            assert time.monotonic() < deadline, f"group {group} read {got} of {topic} after {WAIT:.0f}s"
            m = c.poll(0.5)
            if m is not None and m.error() is None and len(got[m.partition()]) < per_partition:
                got[m.partition()].append(m.value())
                c.commit(message=m, asynchronous=False)
    finally:
        c.close()
    return got


def committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """The group's committed offsets (an OffsetFetch by a consumer that does not join the group)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        answer = c.committed([TopicPartition(topic, q) for q in range(PARTITIONS)], timeout=10)
    except KafkaException as e:   # Kafka makes __consumer_offsets on first use: NOT_COORDINATOR until then
        assert e.args[0].retriable() or e.args[0].code() == KafkaError.NOT_COORDINATOR, e
        return {}
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}


def expected(first: int, count: int) -> dict[int, list[bytes]]:
    return {q: [f"{q}-{i}".encode() for i in range(first, first + count)] for q in range(PARTITIONS)}


@pytest.mark.parametrize("direction", ["tidelake to kafka", "kafka to tidelake"])
def test_a_group_moves_with_its_topic_and_resumes_at_the_next_record(clusters, direction):
    tidelake, kafka, mm2 = clusters
    source, target, topic, group, remote = ((tidelake, kafka, "mm-orders", "mm-app", "tl.mm-orders")
                                            if direction == "tidelake to kafka" else
                                            (kafka, tidelake, "mm-events", "mm-reader", "k44.mm-events"))
    produce(source, topic, 0, BEFORE)
    assert read(source, topic, group, BEFORE) == expected(0, BEFORE)   # the group caught up, then stopped
    at_the_end = {q: BEFORE for q in range(PARTITIONS)}
    # Checkpoints only move forward; the wait ends once the target holds the group where it stopped (one past
    # would never end it: the test fails).
    mm2.wait_for(f"{group}'s offsets on the target", lambda: committed(target, remote, group) == at_the_end)
    assert topic_config(target, remote, "retention.ms") == RETENTION_MS

    produce(source, topic, BEFORE, AFTER)   # the old side goes on after the group left it
    assert read(target, remote, group, AFTER) == expected(BEFORE, AFTER)
    assert committed(target, remote, group) == {q: BEFORE + AFTER for q in range(PARTITIONS)}
