"""Share groups (KIP-932) in a 3-broker ZooKeeper cluster: librdkafka's ShareConsumers read a replicated topic while
the leader of one of its partitions, or the share coordinator holding a partition's state, is kill -9'd. Every
record is acknowledged in the end (none lost; a record a dead leader had handed out comes again, as at-least-once
allows), and the state the share coordinators persisted says so: each share-partition's start offset reached the
end of its partition. The offsets admin APIs are still a single broker's, and a cluster says so."""
from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import ShareConsumer
from kafka.protocol.metadata import MetadataRequest

from cluster_fixtures import create_topic, metadata, produce, start_cluster, wait_until
from tidelake.protocol.messages import (DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
                                        ReadShareGroupStateRequest, ReadShareGroupStateResponse)
from tidelake.protocol.wire_client import WireClient

TOPIC, GROUP, PARTITIONS, RECORDS = "jobs", "workers", 3, 300
CONFIGS = {"offsets.topic.replication.factor": "3", "share.coordinator.state.topic.replication.factor": "3",
           "share.coordinator.state.topic.num.partitions": "3", "group.share.heartbeat.interval.ms": "500",
           "group.share.record.lock.duration.ms": "3000", "group.share.session.timeout.ms": "10000"}


class ShareReader(threading.Thread):
    """One ShareConsumer polling and acknowledging every record until stopped; what it was handed is kept as
    (partition, offset, value, delivery count)."""

    def __init__(self, bootstrap: str, name: str):
        super().__init__(name=name, daemon=True)
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                       "share.acknowledgement.mode": "explicit", "client.id": name})
        self.consumer.subscribe([TOPIC])
        self.delivered: list[tuple[int, int, bytes, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for m in self.consumer.poll(0.3):
                if m.error() is None:
                    self.delivered.append((m.partition(), m.offset(), m.value(), m.delivery_count()))
                    self.consumer.acknowledge(m)
            try:
                self.consumer.commit_sync(5)
            except Exception:  # a partition's leader or coordinator is moving: the records come again
                pass
        self.consumer.close()


def topic_id(cluster) -> uuid.UUID:
    with WireClient("127.0.0.1", next(b for b in cluster.brokers.values() if b.alive()).port) as c:
        md = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=TOPIC)],
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                       12)
    return md.topics[0].topic_id


def persisted_state(cluster, tid: uuid.UUID, partition: int):
    """The share coordinator's answer for (GROUP, TOPIC, partition): asked of every live broker, the one that
    coordinates it answers without error (None while none does)."""
    R = ReadShareGroupStateRequest.ReadStateData
    for b in cluster.brokers.values():
        if not b.alive():
            continue
        with WireClient("127.0.0.1", b.port) as c:
            r = c.request(ReadShareGroupStateRequest(group_id=GROUP, topics=[R(topic_id=tid, partitions=[
                R.PartitionData(partition=partition, leader_epoch=-1)])]), 0, ReadShareGroupStateResponse)
        (p,) = r.results[0].partitions
        if p.error_code == 0:
            return b.broker_id, p
    return None


def coordinator_of_state(cluster, tid: uuid.UUID, partition: int) -> int:
    return wait_until(f"the share coordinator of {TOPIC}-{partition}", lambda: persisted_state(cluster, tid, partition),
                      60)[0]


def leader_of(cluster, partition: int) -> int:
    md = metadata(next(b for b in cluster.brokers.values() if b.alive()), [TOPIC])
    return next(p.leader_id for p in md.topics[0].partitions if p.partition_index == partition)


def consume_with_a_kill(tmp_path, choose_victim) -> None:
    """Two ShareConsumers read RECORDS records; once about a third are in, ``choose_victim(cluster, topic id)``'s
    broker is kill -9'd. Every record must be delivered and acknowledged, and persisted as such."""
    cluster = start_cluster(tmp_path / "c", 3, **CONFIGS)
    readers: list[ShareReader] = []
    try:
        create_topic(cluster, TOPIC, PARTITIONS, 3)
        tid = topic_id(cluster)
        readers = [ShareReader(cluster.bootstrap_servers, f"reader-{i}") for i in range(2)]
        for r in readers:
            r.start()
        # share.auto.offset.reset is "latest": produce once every share-partition is initialized (at 0)
        for p in range(PARTITIONS):
            wait_until(f"{TOPIC}-{p}'s share-partition initialized", lambda p=p: (
                lambda s: s is not None and s[1].start_offset == 0)(persisted_state(cluster, tid, p)), 60)
        victim = choose_victim(cluster, tid)
        acked = produce(cluster, TOPIC, RECORDS)
        wanted = set(acked.values())

        def seen() -> set[bytes]:
            return {v for r in readers for _p, _o, v, _c in list(r.delivered)}
        wait_until("a third of the records delivered", lambda: len(seen()) >= RECORDS // 3, 60)
        cluster.kill_broker(victim)
        wait_until("every record delivered after the kill", lambda: seen() >= wanted, 60)
        ends = {p: max(o for (pp, o) in acked if pp == p) + 1 for p in range(PARTITIONS)}
        # the persisted state: every record acknowledged (the start offset at the partition's end, nothing in flight)
        for p in range(PARTITIONS):
            wait_until(f"{TOPIC}-{p}'s persisted state at its end {ends[p]}", lambda p=p: (
                lambda s: s is not None and s[1].start_offset == ends[p] and not s[1].state_batches)(
                persisted_state(cluster, tid, p)), 60)
        delivered = [d for r in readers for d in r.delivered]
        assert {v for _p, _o, v, _c in delivered} == wanted
    finally:
        for r in readers:
            r.stopping.set()
        for r in readers:
            r.join(30)
        cluster.stop()


@pytest.mark.slow_faults
def test_share_consumers_lose_nothing_when_a_partition_leader_is_killed(tmp_path):
    consume_with_a_kill(tmp_path, lambda cluster, _tid: leader_of(cluster, 0))


@pytest.mark.slow_faults
def test_share_consumers_lose_nothing_when_a_share_coordinator_is_killed(tmp_path):
    def coordinator_not_leading(cluster, tid):
        # the coordinator of a share-partition whose partition another broker leads, if there is one
        pairs = [(coordinator_of_state(cluster, tid, p), leader_of(cluster, p)) for p in range(PARTITIONS)]
        return next((c for c, leader in pairs if c != leader), pairs[0][0])
    consume_with_a_kill(tmp_path, coordinator_not_leading)


def test_a_cluster_refuses_the_share_offsets_admin_apis_with_the_reason(tmp_path):
    cluster = start_cluster(tmp_path / "c", 1)
    try:
        broker = next(iter(cluster.brokers.values()))
        R = DescribeShareGroupOffsetsRequest
        with WireClient.connect(broker.bootstrap) as w:
            r = w.request(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=None)]), 1,
                          DescribeShareGroupOffsetsResponse)
        assert r.groups[0].error_code == 35 or r.error_code == 35
    finally:
        cluster.stop()
