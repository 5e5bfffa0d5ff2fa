"""The reference Java client (kafka-clients 4.4.0, tests/java/ClusterClient.java) against a three-broker cluster: its Admin describes replicas and
ISR, creates a topic with RF=3, reassigns a partition (alter/listPartitionReassignments) and runs a preferred
election; DescribeQuorum and UpdateFeatures answer as a ZooKeeper cluster's; and producers ride through leader changes — librdkafka's (confluent-kafka) and Java's idempotent acks=all
producers write while the leader moves (preferred election, reassignment away from the leader; controlled shutdown
and kill -9 of the leader): no delivery fails and every record is stored once."""
from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, DescribeQuorumRequest, ElectLeadersRequest,
                                  UpdateFeaturesRequest)

from cluster_fixtures import consume_all, metadata, start_cluster, wait_until
from kafka_peer import java_command
from tidelake import errors
from tidelake.protocol.wire_client import WireClient

pytestmark = pytest.mark.java



def _lines(stdout: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)


def test_java_admin_describes_creates_reassigns_and_elects(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3)
    try:
        r = subprocess.run(java_command("ClusterClient", "admin", cluster.bootstrap_servers),
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr[-3000:]
        described = [line.split(" ", 2) for line in r.stdout.splitlines() if line.startswith("DESCRIBE jadmin")]
        assert len(described) == 3
        for _d, _name, rest in described:
            fields = dict(kv.split("=") for kv in rest.split())
            assert sorted(fields["replicas"].split(",")) == ["1", "2", "3"]
            assert sorted(fields["isr"].split(",")) == ["1", "2", "3"]
            assert fields["leader"] == fields["replicas"].split(",")[0]
        out = _lines(r.stdout)
        assert out["ELECT_FIRST"] == "ElectionNotNeededException"
        moved = [line for line in r.stdout.splitlines() if line.startswith("DESCRIBE jmove-0")]
        assert moved[0] == "DESCRIBE jmove-0 leader=2 replicas=2,3 isr=2,3"
        assert out["LEADER_BEFORE"] == "2"
        assert out["ELECT_PREFERRED"] == "NONE"
        assert out["LEADER_AFTER"] == "3"
        assert out["CANCEL"] == "NoReassignmentInProgressException"
        assert out["BAD_TARGET"] == "InvalidReplicaAssignmentException"
        assert not (cluster.brokers[1].data_dir / "jmove-0").exists()
        _quorum_and_features_in_a_cluster(cluster)
    finally:
        cluster.stop()


def _quorum_and_features_in_a_cluster(cluster) -> None:
    """DescribeQuorum names ZooKeeper's controller as the one voter at the controller epoch, the other brokers
    observers, offsets unknown (tidelake/broker/handlers/quorum.py); UpdateFeatures refuses to move a level."""
    controller = metadata(cluster.brokers[1]).controller_id
    quorum_request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])
    with WireClient("127.0.0.1", cluster.brokers[1].port) as c:
        r = c.request(quorum_request, 2)
        [p] = r.topics[0].partitions
        assert (p.error_code, p.leader_id, p.high_watermark) == (0, controller, -1) and p.leader_epoch >= 1
        assert [v.replica_id for v in p.current_voters] == [controller]
        assert sorted(o.replica_id for o in p.observers) == sorted({1, 2, 3} - {controller})
        assert [(n.node_id, n.listeners[0].port) for n in r.nodes] == [(controller, cluster.brokers[controller].port)]
        refused = c.request(UpdateFeaturesRequest(timeout_ms=10000, validate_only=False, feature_updates=[
            UpdateFeaturesRequest.FeatureUpdateKey(feature="transaction.version", max_version_level=1,
                                                   upgrade_type=2)]), 1)
        assert refused.error_code == errors.InvalidUpdateVersion.code
        assert "In a ZooKeeper cluster transaction.version is each broker's config" in refused.error_message


# -- producers riding through leader changes ------------------------------------------------------------------

def _create(cluster, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics([NewTopic(n, num_partitions=1, replica_assignment=[[1, 2, 3]],
                                           config={"min.insync.replicas": "2"}) for n in names],
                                 request_timeout=20).values():
        f.result(30)
    wait_until("every broker to know the leaders", lambda: all(
        all(t.partitions[0].leader_id == 1 for t in metadata(b, names).topics) for b in cluster.brokers.values()))


def _end_offset(cluster, topic: str) -> int:
    live = ",".join(b.bootstrap for b in cluster.brokers.values() if b.alive())  # (a dead one only slows it down)
    c = Consumer({"bootstrap.servers": live, "group.id": "watch"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1]
    finally:
        c.close()


def _leader(cluster, topic: str, via: int) -> int:
    return metadata(cluster.brokers[via], [topic]).topics[0].partitions[0].leader_id


def _ride_through(cluster, tmp_path: Path, move: Callable[[], None]) -> None:
    """librdkafka and Java idempotent acks=all producers write (to `ride-c` and `ride-j`, both led by broker 1)
    while ``move`` changes the leader; then every record each sent is read back once."""
    stop_file = tmp_path / "stop"
    java = subprocess.Popen(java_command("ClusterClient", "produce", cluster.bootstrap_servers, "ride-j",
                                          str(stop_file)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    sent, failures = [0], []

    def write() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 2})

        def on_delivery(err, _m):
            if err is not None:
                failures.append(err)
        while not stop.is_set() or sent[0] < 1000:
            p.produce("ride-c", value=b"c-%07d" % sent[0], partition=0, on_delivery=on_delivery)
            sent[0] += 1
            p.poll(0)
            if sent[0] % 200 == 0:
                p.flush(120)
        if p.flush(120):
            failures.append("undelivered at the end")
    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until("both producers to write before the move",
                   lambda: _end_offset(cluster, "ride-c") > 1000 and _end_offset(cluster, "ride-j") > 1000, 90)
        move()
        after = {t: _end_offset(cluster, t) for t in ("ride-c", "ride-j")}
        wait_until("both producers to write after the move",
                   lambda: all(_end_offset(cluster, t) > after[t] + 1000 for t in after), 90)
    finally:
        stop.set()
        stop_file.write_text("stop")
        writer.join(180)
        try:
            out, err = java.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            java.kill()
            out, err = java.communicate()
    assert not writer.is_alive()
    assert failures == [], f"librdkafka delivery failures: {failures[:3]}"
    assert java.returncode == 0, err[-3000:]
    jout = _lines(out)
    assert jout["FAILED"] == "0", out
    for topic, prefix, n in (("ride-c", b"c-", sent[0]), ("ride-j", b"j-", int(jout["SENT"]))):
        records = consume_all(cluster, topic, 1, n, 120)
        values = [v for _p, _o, v in records]
        assert len(values) == n and len(set(values)) == n, f"{topic}: {len(values)} records, {len(set(values))} " \
                                                          f"distinct, {n} sent"
        assert set(values) == {prefix + b"%07d" % i for i in range(n)}


def _elect_preferred_of(cluster, via: int, topics: list[str]) -> None:
    R = ElectLeadersRequest
    req = R(election_type=0, timeout_ms=10000, topic_partitions=[R.TopicPartitions(topic=t, partitions=[0])
                                                                    for t in topics])
    controller = metadata(cluster.brokers[via]).controller_id
    with WireClient("127.0.0.1", cluster.brokers[controller].port) as c:
        r = c.request(req, 1)
    assert all(p.error_code == errors.NONE for t in r.replica_election_results for p in t.partition_result), r


def _reorder(cluster, topics: list[str], replicas: list[int]) -> None:
    R = AlterPartitionReassignmentsRequest
    controller = metadata(cluster.brokers[1]).controller_id
    req = R(timeout_ms=10000, topics=[R.ReassignableTopic(name=t, partitions=[
        R.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=replicas)]) for t in topics])
    with WireClient("127.0.0.1", cluster.brokers[controller].port) as c:
        r = c.request(req, 0)
    assert all(p.error_code == errors.NONE for t in r.responses for p in t.partitions), r


def test_producers_ride_through_a_preferred_leader_election(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3)
    try:
        topics = ["ride-c", "ride-j"]
        _create(cluster, topics)

        def move() -> None:
            _reorder(cluster, topics, [2, 1, 3])  # broker 2 becomes the preferred replica; 1 still leads
            wait_until("the new order everywhere", lambda: all(
                list(metadata(b, topics).topics[0].partitions[0].replica_nodes) == [2, 1, 3]
                for b in cluster.brokers.values()))
            _elect_preferred_of(cluster, 1, topics)
            wait_until("broker 2 to lead", lambda: all(_leader(cluster, t, 3) == 2 for t in topics))
        _ride_through(cluster, tmp_path, move)
    finally:
        cluster.stop()


def test_producers_ride_through_a_reassignment_away_from_the_leader(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3)
    try:
        topics = ["ride-c", "ride-j"]
        _create(cluster, topics)

        def move() -> None:
            _reorder(cluster, topics, [3, 2])  # broker 1, the leader, leaves the replicas
            wait_until("broker 3 to lead two replicas", lambda: all(
                (p := metadata(b, topics).topics[0].partitions[0]).leader_id == 3 and list(p.replica_nodes) == [3, 2]
                for b in cluster.brokers.values()), 60)
        _ride_through(cluster, tmp_path, move)
    finally:
        cluster.stop()


@pytest.mark.slow_faults
def test_producers_ride_through_a_controlled_shutdown_of_the_leader(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3)
    try:
        topics = ["ride-c", "ride-j"]
        _create(cluster, topics)

        def move() -> None:
            cluster.stop_broker(1)  # SIGTERM: controlled shutdown moves the leaderships first
            wait_until("a new leader", lambda: all(_leader(cluster, t, 2) in (2, 3) for t in topics))
        _ride_through(cluster, tmp_path, move)
    finally:
        cluster.stop()


@pytest.mark.slow_faults
def test_producers_ride_through_a_kill_9_of_the_leader(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3)
    try:
        topics = ["ride-c", "ride-j"]
        _create(cluster, topics)

        def move() -> None:
            cluster.kill_broker(1)  # the controller notices when its ZooKeeper session expires
            wait_until("a new leader", lambda: all(_leader(cluster, t, 2) in (2, 3) for t in topics), 60)
        _ride_through(cluster, tmp_path, move)
    finally:
        cluster.stop()
