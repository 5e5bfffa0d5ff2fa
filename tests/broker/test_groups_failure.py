"""Failure detection: a consumer process killed with SIGKILL (no LeaveGroup) loses its partitions to
the surviving member once its session times out — for the classic and the KIP-848 protocol."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelake.broker.embedded import EmbeddedBroker

CHILD = r"""
import json, sys
from confluent_kafka import Consumer
conf = json.loads(sys.argv[1])
c = Consumer(conf)
c.subscribe(["t"])
last = None
while True:
    c.poll(0.1)
    now = sorted(tp.partition for tp in c.assignment())
    if now != last:
        print(json.dumps(now), flush=True)
        last = now
"""

SESSION_MS = 2000


@pytest.fixture
def broker(tmp_path):
    # short sessions keep the test quick: Kafka's lower bound (6 s) lowered for this broker
    with EmbeddedBroker(tmp_path / "data", config={"group.min.session.timeout.ms": "1000",
                                                   "group.consumer.session.timeout.ms": str(SESSION_MS),
                                                   "group.consumer.heartbeat.interval.ms": "300"}) as b:
        yield b


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_killed_consumer_loses_its_partitions(broker, protocol):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("t", 4, 1)]).values():
        f.result(15)
    conf = {"bootstrap.servers": bs, "group.id": f"g-{protocol}", "auto.offset.reset": "earliest"}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300,
                     "partition.assignment.strategy": "range"})
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(conf)], stdout=subprocess.PIPE, text=True)
    survivor = Consumer(conf)
    survivor.subscribe(["t"])
    try:
        # both members own partitions
        child_parts: list[int] = []
        os.set_blocking(child.stdout.fileno(), False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            survivor.poll(0.1)
            line = child.stdout.readline()
            if line:
                child_parts = json.loads(line)
            mine = sorted(tp.partition for tp in survivor.assignment())
            if child_parts and mine and sorted(child_parts + mine) == [0, 1, 2, 3]:
                break
        else:
            raise AssertionError(f"never split between two members: child {child_parts}, survivor {mine}")

        os.kill(child.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout can tell
        child.wait(10)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            survivor.poll(0.1)
            if sorted(tp.partition for tp in survivor.assignment()) == [0, 1, 2, 3]:
                break
        else:
            raise AssertionError(f"partitions of the killed member never moved: {survivor.assignment()}")
        gc = broker.broker.context.groups
        assert len(gc.groups[f"g-{protocol}"].members) == 1  # the dead member was expelled
    finally:
        survivor.close()
        if child.poll() is None:
            child.kill()
            child.wait(10)
