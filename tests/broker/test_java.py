"""The reference Java client (kafka-clients 4.4.0, tests/java/BrokerSmoke.java) against the broker: admin create/describe
(DescribeTopicPartitions), the producer's defaults (idempotent, acks=all), a read_committed consumer
with fetch sessions, offsetsForTimes."""
from __future__ import annotations

import subprocess

import pytest

from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java



def test_java_admin_producer_defaults_and_read_committed_consumer(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        r = subprocess.run(java_command("BrokerSmoke", b.bootstrap_servers),
                           capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert lines["PARTITIONS"] == "3 LEADER 1"
    assert lines["LAST"] == "1000"
    assert lines["CONSUMED"] == "1001 ORDERED true"
    assert lines["TIMES"] == "500"
