"""Consumer groups in a cluster: the coordinator is the leader of the group's __consumer_offsets
partition (replicated), and moves with that leadership when its broker dies."""
from __future__ import annotations

import json
import subprocess
import sys

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from cluster_fixtures import create_topic, produce, start_cluster, wait_until
from conftest import ROOT
from tidelake.coordinator.record_codec import partition_for


def _consume(bootstrap: str, group: str, topic: str, n: int, commit: bool = True) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    got = []
    try:
        wait_until(f"{n} records for group {group}", lambda: got.extend(
            (m.partition(), m.offset(), m.value()) for m in c.consume(200, 0.5) if m.error() is None)
            or len(got) >= n, 90)
        if commit:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def test_a_group_survives_the_death_of_its_coordinator(tmp_path):
    c = start_cluster(tmp_path / "c", 3, **{"offsets.topic.num.partitions": "3",
                                            "offsets.topic.replication.factor": "3"})
    zk = KazooClient(hosts=c.zookeeper.connect_string, timeout=10)
    zk.start(10)
    try:
        create_topic(c, "orders", 3, 3)
        first = produce(c, "orders", 300, prefix=b"first")
        got = _consume(c.bootstrap_servers, "g1", "orders", 300)
        assert sorted((p, o) for p, o, _v in got) == sorted(first)
        offsets_partition = partition_for("g1", 3)
        st = json.loads(zk.get(f"/brokers/topics/__consumer_offsets/partitions/{offsets_partition}/state")[0])
        assert sorted(st["isr"]) == [1, 2, 3]  # the commit is on every replica
        c.kill_broker(st["leader"])
        wait_until("a new leader of the group's offsets partition", lambda: json.loads(zk.get(
            f"/brokers/topics/__consumer_offsets/partitions/{offsets_partition}/state")[0])["leader"]
            not in (st["leader"], -1), 60)
        survivors = ",".join(b.bootstrap for b in c.brokers.values() if b.broker_id != st["leader"])
        second = produce(c, "orders", 200, prefix=b"second")
        again = _consume(survivors, "g1", "orders", 200)
        # the new coordinator has the committed offsets: the group resumes after them, nothing again
        assert sorted((p, o) for p, o, _v in again) == sorted(second)
        admin = AdminClient({"bootstrap.servers": survivors})
        (f,) = admin.describe_consumer_groups(["g1"], request_timeout=20).values()
        assert f.result(30).group_id == "g1"
    finally:
        zk.stop()
        zk.close()
        c.stop()


def test_consume_with_a_group_gives_up_at_its_timeout_naming_why_there_is_no_coordinator(tmp_path):
    """KIP-115: __consumer_offsets is not created with fewer live brokers than its replication factor; the broker
    says why once at WARN and answers COORDINATOR_NOT_AVAILABLE with the reason, which the CLI prints."""
    c = start_cluster(tmp_path / "c", 2, **{"offsets.topic.replication.factor": "3"})
    try:
        create_topic(c, "orders", 1, 2)
        r = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "consume", "orders", "--group", "g1",
                            "-b", c.bootstrap_servers, "--timeout", "3"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 1, r.stderr
        assert r.stderr.count("\n") == 1, r.stderr
        assert "no group coordinator: __consumer_offsets needs 3 brokers, 2 are up" in r.stderr, r.stderr
        warnings = [line for b in c.brokers.values() for line in b.log_path.read_text().splitlines()
                    if "WARNING" in line and "cannot create __consumer_offsets" in line]
        assert warnings and len(warnings) <= len(c.brokers), warnings  # once per broker asked, whatever the retries
        assert "needs 3 brokers, 2 are up" in warnings[0]
    finally:
        c.stop()
