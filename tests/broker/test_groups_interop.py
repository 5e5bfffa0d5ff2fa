"""Consumer groups with every client: librdkafka (range, roundrobin, cooperative-sticky and the
KIP-848 protocol), kafka-python, aiokafka, and the Java client (classic and KIP-848). Each group
splits the partitions between its members, commits, and a later member resumes exactly after the
committed offsets. A broker restart keeps committed offsets and the classic group's generation."""
from __future__ import annotations

import asyncio
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_peer import java_command
from tidelake.broker.embedded import EmbeddedBroker

PARTITIONS = 4
CONFIG = {"group.min.session.timeout.ms": "1000", "group.consumer.heartbeat.interval.ms": "300"}


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", config=CONFIG) as b:
        yield b


def create_topic(bs: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(15)


def produce(bs: str, topic: str, tag: str, n: int) -> set[bytes]:
    p = Producer({"bootstrap.servers": bs})
    values = {f"{tag}-{i}".encode() for i in range(n)}
    for i, v in enumerate(sorted(values)):
        p.produce(topic, value=v, partition=i % PARTITIONS)
    assert p.flush(15) == 0
    return values


def confluent_consumer(bs: str, group: str, **extra) -> Consumer:
    conf = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "heartbeat.interval.ms": 300, "session.timeout.ms": 6000}
    conf.update(extra)
    if conf.get("group.protocol") == "consumer":  # KIP-848: the broker owns these
        for k in ("heartbeat.interval.ms", "session.timeout.ms", "partition.assignment.strategy"):
            conf.pop(k, None)
    return Consumer(conf)


def partitions_of(c: Consumer) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


CONFLUENT_VARIANTS = {
    "range": {"partition.assignment.strategy": "range"},
    "roundrobin": {"partition.assignment.strategy": "roundrobin"},
    "cooperative-sticky": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer-uniform": {"group.protocol": "consumer", "group.remote.assignor": "uniform"},
    "consumer-range": {"group.protocol": "consumer", "group.remote.assignor": "range"},
}


@pytest.mark.parametrize("variant", sorted(CONFLUENT_VARIANTS))
def test_confluent_two_members_split_commit_and_resume(broker, variant):
    bs = broker.bootstrap_servers
    create_topic(bs, "t")
    extra = CONFLUENT_VARIANTS[variant]
    first = produce(bs, "t", "first", 40)
    members = [confluent_consumer(bs, "g", **extra), confluent_consumer(bs, "g", **extra)]
    got: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        for c in members:
            c.subscribe(["t"])
        deadline = time.monotonic() + 60
        split = False
        while time.monotonic() < deadline:
            for i, c in enumerate(members):
                m = c.poll(0.05)
                if m is not None and m.error() is None:
                    got[i].append(m.value())
            a, b = partitions_of(members[0]), partitions_of(members[1])
            split = split or (bool(a) and bool(b) and sorted(a + b) == list(range(PARTITIONS)))
            if split and set(got[0]) | set(got[1]) == first:
                break
        assert split, f"members never split the partitions: {partitions_of(members[0])} {partitions_of(members[1])}"
        assert set(got[0]) | set(got[1]) == first
        assert not set(partitions_of(members[0])) & set(partitions_of(members[1]))
        for c in members:
            c.commit(asynchronous=False)
    finally:
        for c in members:
            c.close()
    second = produce(bs, "t", "second", 12)
    resumed = confluent_consumer(bs, "g", **extra)
    resumed.subscribe(["t"])
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while set(seen) != second and time.monotonic() < deadline:
            m = resumed.poll(0.1)
            if m is not None and m.error() is None:
                seen.append(m.value())
        assert sorted(seen) == sorted(second)  # nothing before the committed offsets, nothing twice
    finally:
        resumed.close()


def test_kafka_python_group_commit_and_resume(broker):
    from kafka import KafkaConsumer
    bs = broker.bootstrap_servers
    create_topic(bs, "t")
    first = produce(bs, "t", "first", 20)

    def consume_until(want: set[bytes]) -> list[bytes]:
        c = KafkaConsumer("t", bootstrap_servers=bs, group_id="kp", auto_offset_reset="earliest",
                          enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
        seen: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while set(seen) != want and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=200).values():
                    seen.extend(r.value for r in recs)
            assert sorted(c.assignment(), key=lambda tp: tp.partition)
            c.commit()
        finally:
            c.close()
        return seen

    assert sorted(consume_until(first)) == sorted(first)
    second = produce(bs, "t", "second", 8)
    assert sorted(consume_until(second)) == sorted(second)
    gc = broker.broker.context.groups
    assert sum(om.offset for om in gc.offsets.group_offsets("kp").values()) == 28


def test_aiokafka_group_commit_and_resume(broker):
    from aiokafka import AIOKafkaConsumer
    bs = broker.bootstrap_servers
    create_topic(bs, "t")
    first = produce(bs, "t", "first", 20)

    async def consume_until(want: set[bytes]) -> list[bytes]:
        c = AIOKafkaConsumer("t", bootstrap_servers=bs, group_id="aio", auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
        await c.start()
        seen: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while set(seen) != want and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    seen.extend(r.value for r in recs)
            await c.commit()
        finally:
            await c.stop()
        return seen

    assert sorted(asyncio.run(consume_until(first))) == sorted(first)
    second = produce(bs, "t", "second", 8)
    assert sorted(asyncio.run(consume_until(second))) == sorted(second)




def run_java(*args: str) -> list[bytes]:
    """tests/java/GroupConsumer.java: consume `want` records in a group, commit, print them."""
    proc = subprocess.run(java_command("GroupConsumer", *args),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"ASSIGNED {PARTITIONS}" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    return [line[6:].encode() for line in proc.stdout.splitlines() if line.startswith("VALUE ")]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_group_commit_and_resume(broker, protocol):
    bs = broker.bootstrap_servers
    create_topic(bs, "t")
    first = produce(bs, "t", "first", 20)
    assert sorted(run_java(bs, "jg", protocol, "t", "20", "range")) == sorted(first)
    second = produce(bs, "t", "second", 8)
    assert sorted(run_java(bs, "jg", protocol, "t", "8", "range")) == sorted(second)
    group = broker.broker.context.groups.groups["jg"]
    assert group.protocol_kind == protocol


def test_restart_keeps_offsets_and_group(tmp_path):
    data = tmp_path / "data"
    with EmbeddedBroker(data, config=CONFIG) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "t")
        produce(bs, "t", "first", 20)
        c = confluent_consumer(bs, "rg", **{"partition.assignment.strategy": "range"})
        c.subscribe(["t"])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 20 and time.monotonic() < deadline:
            m = c.poll(0.1)
            seen += m is not None and m.error() is None
        c.commit(asynchronous=False)
        committed = {tp.partition: tp.offset for tp in c.committed(c.assignment(), timeout=10)}
        generation = b.broker.context.groups.groups["rg"].generation
        c.close()
    assert sum(committed.values()) == 20
    with EmbeddedBroker(data, config=CONFIG) as b:
        gc = b.broker.context.groups
        assert {p: om.offset for (t, p), om in gc.offsets.group_offsets("rg").items()} == committed
        # the group came back Empty (its last member left) with the generation it had reached
        assert gc.groups["rg"].state == "Empty" and gc.groups["rg"].generation == generation + 1
        bs = b.bootstrap_servers
        produce(bs, "t", "second", 4)
        c = confluent_consumer(bs, "rg", **{"partition.assignment.strategy": "range"})
        c.subscribe(["t"])
        values = []
        deadline = time.monotonic() + 60
        while len(values) < 4 and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                values.append(m.value())
        c.close()
        assert sorted(values) == [b"second-0", b"second-1", b"second-2", b"second-3"]


def test_static_members_come_back_without_a_rebalance(broker):
    """librdkafka static members (group.instance.id) leave no LeaveGroup on close; a restarted
    member with the same instance id gets its partitions back in the same generation."""
    bs = broker.bootstrap_servers
    create_topic(bs, "t")

    def member(instance: str) -> Consumer:
        c = confluent_consumer(bs, "sg", **{"partition.assignment.strategy": "range", "group.instance.id": instance})
        c.subscribe(["t"])
        return c

    def wait_split(members: list[Consumer]) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for c in members:
                c.poll(0.05)
            if all(partitions_of(c) for c in members) and \
                    sorted(sum((partitions_of(c) for c in members), [])) == list(range(PARTITIONS)):
                return
        raise AssertionError("static members never split the partitions")

    a, b = member("static-a"), member("static-b")
    wait_split([a, b])
    group = broker.broker.context.groups.groups["sg"]
    generation, b_parts = group.generation, partitions_of(b)
    old_b_id = group.static_members["static-b"]
    b.close()
    b2 = member("static-b")
    try:
        wait_split([a, b2])
        assert partitions_of(b2) == b_parts and group.generation == generation
        assert group.static_members["static-b"] != old_b_id  # new member id, old one fenced
    finally:
        a.close()
        b2.close()


def test_mixed_clients_share_one_group(broker):
    """A librdkafka member and a kafka-python member in one classic group (both offer `range`):
    whichever leads assigns for both, and they split the partitions."""
    from kafka import KafkaConsumer
    bs = broker.bootstrap_servers
    create_topic(bs, "t")
    rd = confluent_consumer(bs, "mixed", **{"partition.assignment.strategy": "range"})
    rd.subscribe(["t"])
    kp = KafkaConsumer("t", bootstrap_servers=bs, group_id="mixed", enable_auto_commit=False,
                       session_timeout_ms=10000, heartbeat_interval_ms=300)
    try:
        deadline = time.monotonic() + 60
        rd_parts, kp_parts = [], []
        while time.monotonic() < deadline:
            rd.poll(0.05)
            kp.poll(timeout_ms=50)
            rd_parts, kp_parts = partitions_of(rd), sorted(tp.partition for tp in kp.assignment())
            if rd_parts and kp_parts and sorted(rd_parts + kp_parts) == list(range(PARTITIONS)):
                break
        group = broker.broker.context.groups.groups["mixed"]
        assert rd_parts and kp_parts and sorted(rd_parts + kp_parts) == list(range(PARTITIONS)), (
            rd_parts, kp_parts, group.state, group.generation_id,
            {m.member_id: (m.client_id, m.assignment) for m in group.members.values()})
        assert group.protocol == "range" and len(group.members) == 2
    finally:
        rd.close()
        kp.close()


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_confluent_assign_only_consumer_commits_repeatedly(broker, protocol):
    """librdkafka's 0030: a consumer that only assign()s commits again and again. With the KIP-848
    protocol it sends its member id with epoch -1; the first commit makes an empty (simple) group, the
    next ones must be accepted too, as Kafka's: an epoch/generation < 0 on an empty group is a simple
    commit whatever the member id."""
    from confluent_kafka import TopicPartition
    bs = broker.bootstrap_servers
    create_topic(bs, "t")
    produce(bs, "t", "v", 8)
    c = Consumer({"bootstrap.servers": bs, "group.id": f"assign-{protocol}", "group.protocol": protocol,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition("t", p) for p in range(PARTITIONS)])
        for n in range(1, 4):
            done = c.commit(offsets=[TopicPartition("t", p, n) for p in range(PARTITIONS)], asynchronous=False)
            assert [(tp.partition, tp.offset, tp.error) for tp in done] == [
                (p, n, None) for p in range(PARTITIONS)]
        got = c.committed([TopicPartition("t", p) for p in range(PARTITIONS)], timeout=15)
        assert [tp.offset for tp in got] == [3] * PARTITIONS
    finally:
        c.close()
