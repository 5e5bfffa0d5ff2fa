"""A live consumer group survives a broker restart (same data dir, same port).

Classic: the group's GroupMetadataValue is replayed from __consumer_offsets, so the member keeps
heart-beating in the same generation and no rebalance happens. KIP-848: the coordinator keeps no
member state across restarts; the member is told UNKNOWN_MEMBER_ID, rejoins with epoch 0 and
resumes from its committed offsets. Either way, no record is lost or read twice.
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


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_survives_broker_restart(tmp_path, protocol):
    data, port = tmp_path / "data", free_port()
    conf = {"group.id": "rg", "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "reconnect.backoff.max.ms": 500}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 300})
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
        generation = getattr(b.broker.group_coordinator.groups["rg"], "generation", None)
    try:
        with EmbeddedBroker(data, port=port, config=CONFIG) as b:
            second = produce(bs, "second", 10)
            assert sorted(consume(c, 10)) == second  # nothing lost, nothing from before the restart
            c.commit(asynchronous=False)
            group = b.broker.group_coordinator.groups["rg"]
            assert len(group.members) == 1
            if protocol == "classic":
                assert group.generation == generation and group.state == "Stable"  # no rebalance needed
            offsets = b.broker.group_coordinator.offsets.group_offsets("rg")
            assert sum(om.offset for om in offsets.values()) == 20
    finally:
        c.close()
