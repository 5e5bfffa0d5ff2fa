"""A live consumer group survives a broker restart (same data dir, same port).

Classic: the group's GroupMetadataValue is replayed from __consumer_offsets, so the member keeps
heart-beating in the same generation and no rebalance happens. KIP-848 (librdkafka with
group.protocol=consumer): the ConsumerGroup* records are replayed, so the member keeps heart-beating
with the same member id and epoch and keeps its assignment — no rejoin, no new group epoch. Either
way, no record is lost or read twice.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import free_port
from tidelake.broker.embedded import EmbeddedBroker

CONFIG = {"group.min.session.timeout.ms": "1000", "group.consumer.heartbeat.interval.ms": "300"}


def produce(bs: str, tag: str, n: int) -> list[bytes]:
    p = Producer({"bootstrap.servers": bs})
    values = [f"{tag}-{i:03d}".encode() for i in range(n)]
    for i, v in enumerate(values):
        p.produce("t", value=v, partition=i % 2)
    assert p.flush(15) == 0
    return values


def consume(c: Consumer, n: int, timeout: float = 60) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m.value())
    return got


def _group_view(group) -> dict:
    """What must not change across the restart: the generation (classic) or group/assignment epochs
    (KIP-848), and each member's id, epoch and assignment."""
    if hasattr(group, "generation"):
        return {"generation": group.generation, "leader": group.leader,
                "members": {mid: m.assignment for mid, m in group.members.items()}}
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "members": {mid: (m.epoch, sorted(m.assigned)) for mid, m in group.members.items()}}


def _settle(group, consumers: list[Consumer], members: int, timeout: float = 60) -> None:
    """Poll ``consumers`` until the group has ``members`` members and is Stable (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            assert m is None or m.error() is not None  # nothing new to read while settling
        if len(group.members) == members and group.state == "Stable" and \
                all(getattr(m, "state", "stable") == "stable" for m in group.members.values()):
            if not hasattr(group, "group_epoch") or \
                    sum(len(m.assigned) for m in group.members.values()) == 2:
                return
    raise AssertionError(f"group did not settle: {_group_view(group)} state {group.state}")


def _heard_twice(group, consumer: Consumer, timeout: float = 60) -> None:
    """Poll ``consumer`` until the coordinator has had two more heartbeats from it. A client has one
    heartbeat in flight at a time, so by the second it has read the answer to the first, which carries
    the current epoch / generation: a restart now cannot catch it still holding the previous one (a
    client that comes back with a stale epoch and no owned partitions is fenced and rejoins, in Kafka
    too, which is not what this test is about)."""
    deadline = time.monotonic() + timeout
    for _ in range(2):
        member_id = next(iter(group.members))
        seen = group.members[member_id].last_heartbeat_ms
        while group.members[member_id].last_heartbeat_ms == seen:
            assert time.monotonic() < deadline, "no heartbeat from the consumer"
            m = consumer.poll(0.05)
            assert m is None or m.error() is not None


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_survives_broker_restart(tmp_path, protocol):
    data, port = tmp_path / "data", free_port()
    conf = {"group.id": "rg", "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "reconnect.backoff.max.ms": 500}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 300})
    c = None
    try:
        with EmbeddedBroker(data, port=port, config=CONFIG) as b:
            bs = b.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bs})
            for f in admin.create_topics([NewTopic("t", 2, 1)]).values():
                f.result(15)
            first = produce(bs, "first", 10)
            c = Consumer({**conf, "bootstrap.servers": bs})
            c.subscribe(["t"])
            assert sorted(consume(c, 10)) == first
            c.commit(asynchronous=False)
            # a second member joins and leaves, so the group is past the epoch / generation a fresh
            # join would give: a rejoin after the restart could not look like the same state
            group = b.broker.context.groups.groups["rg"]
            c2 = Consumer({**conf, "bootstrap.servers": bs})
            try:
                c2.subscribe(["t"])
                _settle(group, [c, c2], members=2)
            finally:
                c2.close()
            _settle(group, [c], members=1)
            _heard_twice(group, c)
            before = _group_view(group)
            if protocol == "consumer":
                assert before["group_epoch"] >= 3
                assert before["members"] == {c.memberid(): (before["group_epoch"], [("t", 0), ("t", 1)])}
            else:
                assert before["generation"] >= 3
        with EmbeddedBroker(data, port=port, config=CONFIG) as b:
            second = produce(bs, "second", 10)
            assert sorted(consume(c, 10)) == second  # nothing lost, nothing from before the restart
            c.commit(asynchronous=False)
            group = b.broker.context.groups.groups["rg"]
            assert _group_view(group) == before  # same member id, generation/epoch and assignment
            assert group.state == "Stable"
            if protocol == "consumer":
                assert c.memberid() in before["members"]
            offsets = b.broker.context.groups.offsets.group_offsets("rg")
            assert sum(om.offset for om in offsets.values()) == 20
    finally:
        if c is not None:
            c.close()
