"""Seed 000's consumer-group scenario with real clients (librdkafka via confluent-kafka).

topic1 has partitions 0, 1, 2. consumer1..consumer4 join group1 one by one, then consumer1, 2, 3
leave; at every step the range assignment is what the seed's text says. Then broadcast vs unicast:
a group with one consumer receives keys 1, 2, 3; a group with three consumers gets one key each.
Members are ordered by member id = client.id + "-" + uuid, so client ids consumer1..4 keep the
seed's order.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelake.broker.embedded import EmbeddedBroker


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        yield b


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


def consumer(bootstrap: str, group: str, client_id: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                  "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["topic1"])
    return c


def assignments(consumers: dict[str, Consumer]) -> dict[str, list[int]]:
    return {name: sorted(tp.partition for tp in c.assignment()) for name, c in consumers.items()}


def wait_for_assignment(consumers: dict[str, Consumer], expected: dict[str, list[int]], timeout: float = 60) -> None:
    """Poll every consumer (rebalances run inside poll) until the assignment is the expected one."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        for c in consumers.values():
            c.poll(0.05)
        seen = assignments(consumers)
        if seen == expected:
            return
    raise AssertionError(f"assignment never became {expected}; last seen {seen}")


def test_seed_000_join_one_by_one_then_leave(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "topic1", 3)
    steps_join = [
        {"consumer1": [0, 1, 2]},
        {"consumer1": [0, 1], "consumer2": [2]},
        {"consumer1": [0], "consumer2": [1], "consumer3": [2]},
        {"consumer1": [0], "consumer2": [1], "consumer3": [2], "consumer4": []},  # consumer4 idle
    ]
    group: dict[str, Consumer] = {}
    try:
        for i, expected in enumerate(steps_join, start=1):
            group[f"consumer{i}"] = consumer(bs, "group1", f"consumer{i}")
            wait_for_assignment(group, expected)
        steps_leave = [
            ("consumer1", {"consumer2": [0], "consumer3": [1], "consumer4": [2]}),
            ("consumer2", {"consumer3": [0, 1], "consumer4": [2]}),
            ("consumer3", {"consumer4": [0, 1, 2]}),  # the last one takes over everything
        ]
        for leaving, expected in steps_leave:
            group.pop(leaving).close()  # close() sends LeaveGroup
            wait_for_assignment(group, expected)
    finally:
        for c in group.values():
            c.close()


def test_seed_000_broadcast_vs_unicast(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "topic1", 3)
    group1 = {"g1-consumer": consumer(bs, "group1", "g1-consumer")}
    group2 = {f"consumer{i}": consumer(bs, "group2", f"consumer{i}") for i in (1, 2, 3)}
    everyone = {**group1, **group2}
    try:
        wait_for_assignment(group1, {"g1-consumer": [0, 1, 2]})
        wait_for_assignment(group2, {"consumer1": [0], "consumer2": [1], "consumer3": [2]})
        producer = Producer({"bootstrap.servers": bs})
        for key in (1, 2, 3):  # key k into partition k-1, so each key has its own partition
            producer.produce("topic1", key=str(key).encode(), value=f"message {key}".encode(), partition=key - 1)
        assert producer.flush(15) == 0
        received: dict[str, list[bytes]] = {name: [] for name in everyone}
        deadline = time.monotonic() + 60
        while sum(map(len, received.values())) < 6 and time.monotonic() < deadline:
            for name, c in everyone.items():
                m = c.poll(0.05)
                if m is not None and m.error() is None:
                    received[name].append(m.key())
        assert sorted(received["g1-consumer"]) == [b"1", b"2", b"3"]  # broadcast: the whole group gets all
        assert {n: received[n] for n in group2} == {"consumer1": [b"1"], "consumer2": [b"2"], "consumer3": [b"3"]}
    finally:
        for c in everyone.values():
            c.close()
