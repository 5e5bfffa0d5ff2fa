"""Share groups (KIP-932) in a 3-broker ZooKeeper cluster: librdkafka's ShareConsumers read a replicated topic while
the leader of one of its partitions, or the share coordinator holding a partition's state, is kill -9'd. Every
record is acknowledged in the end (none lost; a record a dead leader had handed out comes again, as at-least-once
allows), and the state the share coordinators persisted says so: each share-partition's start offset reached the
end of its partition, nothing in flight, and the group's coordinator describes those start offsets. The inter-broker
share-state APIs answer over the wire. Alter/DeleteShareGroupOffsets change the state at the share coordinator, and
the partition's leader, still holding the share-partition, serves the changed state to the next consumers; the group's
coordinator reports the lag of a partition it does not lead."""
from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, ShareConsumer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                   ResourceType)
from kafka.protocol.admin import DescribeConfigsRequest, ListGroupsRequest
from kafka.protocol.metadata import MetadataRequest

from cluster_fixtures import create_topic, find_coordinator, metadata, produce, start_cluster, wait_until
from tidelake.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateKey, state_partition, tombstone_key
from tidelake.protocol.messages import (AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
                                        DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
                                        DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
                                        DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
                                        InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
                                        ReadShareGroupStateRequest, ReadShareGroupStateResponse,
                                        ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
                                        WriteShareGroupStateRequest, WriteShareGroupStateResponse)
from tidelake.protocol.wire_client import WireClient

TOPIC, RECORDS = "jobs", 300
CONFIGS = {"offsets.topic.replication.factor": "3", "share.coordinator.state.topic.replication.factor": "3",
           "share.coordinator.state.topic.num.partitions": "3", "group.share.heartbeat.interval.ms": "500",
           "group.share.record.lock.duration.ms": "3000", "group.share.session.timeout.ms": "10000"}
WORK_S = 0.2  # how long a reader works on what it polled before acknowledging it


class ShareReader(threading.Thread):
    """One ShareConsumer polling and acknowledging every record until stopped; what it was handed is kept as
    (partition, offset, value, delivery count)."""

    def __init__(self, bootstrap: str, group: str, name: str):
        super().__init__(name=name, daemon=True)
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                       "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
        self.consumer.subscribe([TOPIC])
        self.delivered: list[tuple[int, int, bytes, int]] = []
        self.failures: list[str] = []  # errors poll raised (the broker answered something the client gives up on)
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                got = [m for m in self.consumer.poll(0.3) if m.error() is None]
            except KafkaException as e:
                self.failures.append(str(e))
                continue
            self.delivered.extend((m.partition(), m.offset(), m.value(), m.delivery_count()) for m in got)
            self.stopping.wait(WORK_S if got else 0)  # working on them: the records stay acquired meanwhile
            for m in got:
                self.consumer.acknowledge(m)
            try:
                self.consumer.commit_sync(5)
            except Exception:  # a partition's leader or coordinator is moving: the records come again
                pass
        self.consumer.close()


def any_broker(cluster):
    return next(b for b in cluster.brokers.values() if b.alive())


def topic_id(cluster) -> uuid.UUID:
    with WireClient("127.0.0.1", any_broker(cluster).port) as c:
        md = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=TOPIC)],
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                       12)
    return md.topics[0].topic_id


def persisted_state(cluster, group: str, tid: uuid.UUID, partition: int):
    """The share coordinator's answer for (group, TOPIC, partition): asked of every live broker, the one that
    coordinates it answers without error; (its broker id, its answer), None while none does."""
    R = ReadShareGroupStateRequest.ReadStateData
    for b in cluster.brokers.values():
        if not b.alive():
            continue
        with WireClient("127.0.0.1", b.port) as c:
            r = c.request(ReadShareGroupStateRequest(group_id=group, topics=[R(topic_id=tid, partitions=[
                R.PartitionData(partition=partition, leader_epoch=-1)])]), 0, ReadShareGroupStateResponse)
        (p,) = r.results[0].partitions
        if p.error_code == 0:
            return b.broker_id, p
    return None


def produce_once_initialized(cluster, group: str, tid: uuid.UUID, partitions: int) -> dict:
    """Produce RECORDS records to TOPIC once each of its share-partitions is initialized at 0 (the group's
    share.auto.offset.reset is "latest": a record produced before would not be delivered); what was acknowledged."""
    for p in range(partitions):
        wait_until(f"{TOPIC}-{p}'s share-partition initialized", lambda p=p: (
            lambda s: s is not None and s[1].start_offset == 0)(persisted_state(cluster, group, tid, p)), 60)
    return produce(cluster, TOPIC, RECORDS)


def delivered_values(readers) -> set[bytes]:
    """The values the readers were delivered, so far."""
    return {v for r in readers for _p, _o, v, _c in list(r.delivered)}


def create_topic_broker_3_leads_none(cluster) -> None:
    """TOPIC with two partitions led by brokers 1 and 2, broker 3 a follower of both: a broker whose kill moves
    a coordination but no partition's leadership."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1, 2, 3], [2, 1, 3]])
    for f in admin.create_topics([new]).values():
        f.result(30)


def leaders(cluster, topic: str) -> dict[int, int]:
    md = metadata(any_broker(cluster), [topic])
    return {p.partition_index: p.leader_id for p in md.topics[0].partitions}


def consume_with_a_kill(cluster, group: str, victim: int) -> None:
    """Two ShareConsumers of ``group`` read RECORDS records of TOPIC; once about a third are in, broker ``victim``
    is kill -9'd. Every record must be delivered and acknowledged, and persisted as such."""
    tid = topic_id(cluster)
    partitions = len(leaders(cluster, TOPIC))
    readers = [ShareReader(cluster.bootstrap_servers, group, f"reader-{i}") for i in range(2)]
    try:
        for r in readers:
            r.start()
        acked = produce_once_initialized(cluster, group, tid, partitions)
        wanted = set(acked.values())

        def seen() -> set[bytes]:
            return delivered_values(readers)
        wait_until("a third of the records delivered", lambda: len(seen()) >= RECORDS // 3, 60)
        cluster.kill_broker(victim)
        assert len(seen()) < RECORDS, "every record was delivered before the kill: nothing was tested"
        wait_until("every record delivered after the kill", lambda: seen() >= wanted, 60)
        ends = {p: max(o for (pp, o) in acked if pp == p) + 1 for p in range(partitions)}
        # the persisted state: every record acknowledged (the start offset at the partition's end, nothing in flight)
        for p in range(partitions):
            wait_until(f"{TOPIC}-{p}'s persisted state at its end {ends[p]}", lambda p=p: (
                lambda s: s is not None and s[1].start_offset == ends[p] and not s[1].state_batches)(
                persisted_state(cluster, group, tid, p)), 60)
        # and so says DescribeShareGroupOffsets, asked of the group's coordinator
        R = DescribeShareGroupOffsetsRequest
        with WireClient("127.0.0.1", cluster.brokers[find_coordinator(cluster, 0, group)].port) as c:
            r = c.request(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1,
                          DescribeShareGroupOffsetsResponse)
        assert {(t.topic_name, p.partition_index): p.start_offset for t in r.groups[0].topics
                for p in t.partitions} == {(TOPIC, p): end for p, end in ends.items()}
        delivered = [d for r in readers for d in r.delivered]
        assert {v for _p, _o, v, _c in delivered} == wanted
        assert not [f for r in readers for f in r.failures]
        # a record delivered again (its leader gone, or its lock expired meanwhile) says so: each of its deliveries
        # has its own delivery count
        counts: dict[tuple[int, int], list[int]] = {}
        for partition, offset, _v, count in delivered:
            counts.setdefault((partition, offset), []).append(count)
        twice = {f"{TOPIC}-{p}@{o}": c for (p, o), c in counts.items() if len(set(c)) < len(c)}
        assert not twice, f"records delivered again with a delivery count already seen: {twice}"
    finally:
        for r in readers:
            r.stopping.set()
        for r in readers:
            r.join(30)


@pytest.mark.slow_faults
def test_share_consumers_lose_nothing_when_a_partition_leader_is_killed(tmp_path):
    """...and when the killed broker comes back and leads its partition again, it serves the state its successor
    persisted (new consumers of the group read only the new records)."""
    cluster = start_cluster(tmp_path / "c", 3, **CONFIGS)
    try:
        create_topic(cluster, TOPIC, 3, 3)
        victim = leaders(cluster, TOPIC)[0]
        consume_with_a_kill(cluster, "workers", victim)
        cluster.start_broker(victim)
        wait_until(f"broker {victim} back in the ISR of {TOPIC}-0", lambda: victim in next(
            p.isr_nodes for p in metadata(any_broker(cluster), [TOPIC]).topics[0].partitions if p.partition_index == 0),
            60)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(60)
        wait_until(f"broker {victim} leading {TOPIC}-0 again", lambda: leaders(cluster, TOPIC)[0] == victim, 60)
        readers = [ShareReader(cluster.bootstrap_servers, "workers", f"again-{i}") for i in range(2)]
        try:
            for r in readers:
                r.start()
            later = produce(cluster, TOPIC, 60, prefix=b"later")
            wait_until("the later records delivered", lambda: {
                v for r in readers for _p, _o, v, _c in list(r.delivered)} >= set(later.values()), 60)
            assert any(p == 0 for p, _o in later)  # some from the partition its old leader leads again
            delivered = {v for r in readers for _p, _o, v, _c in r.delivered}
            assert delivered == set(later.values())  # nothing of the first round again: it was all acknowledged
            assert not [f for r in readers for f in r.failures]
        finally:
            for r in readers:
                r.stopping.set()
            for r in readers:
                r.join(30)
    finally:
        cluster.stop()


@pytest.mark.slow_faults
def test_share_consumers_lose_nothing_when_a_share_coordinator_is_killed(tmp_path):
    """Broker 3 leads no partition of the topic but is the share coordinator of its partition 0's state (the
    group id is chosen so): its kill moves only the share state, which the next coordinator replays."""
    cluster = start_cluster(tmp_path / "c", 3, **CONFIGS)
    try:
        create_topic_broker_3_leads_none(cluster)
        wait_until(f"{TOPIC}'s leaders", lambda: leaders(cluster, TOPIC) == {0: 1, 1: 2})
        # a first share group's fetch creates the state topic, then the group is chosen by where its state lands
        warmup = ShareReader(cluster.bootstrap_servers, "warmup", "warmup")
        warmup.start()
        try:
            state_leaders = wait_until(f"{SHARE_STATE_TOPIC}'s leaders", lambda: (
                lambda ls: ls if ls and all(b > 0 for b in ls.values()) else None)(leaders(cluster, SHARE_STATE_TOPIC)),
                60)
        finally:
            warmup.stopping.set()
            warmup.join(30)
        led_by_3 = {p for p, b in state_leaders.items() if b == 3}
        assert led_by_3, f"broker 3 leads no {SHARE_STATE_TOPIC} partition: {state_leaders}"
        tid = topic_id(cluster)
        group = next(g for g in (f"workers-{i}" for i in range(1000))
                     if state_partition(ShareStateKey(g, tid, 0), len(state_leaders)) in led_by_3)
        consume_with_a_kill(cluster, group, 3)
    finally:
        cluster.stop()


def test_the_share_state_apis_at_the_share_coordinator(tmp_path):
    """Initialize, Read, Write and DeleteShareGroupState over the wire at a one-broker cluster's share coordinator
    (its state topic created by a first share consumer's fetch); a write to a deleted state is fenced, and a new
    initialization is at a newer state epoch."""
    cluster = start_cluster(tmp_path / "c", 1)
    try:
        create_topic(cluster, TOPIC, 1, 1)
        warmup = ShareReader(cluster.bootstrap_servers, "warmup", "warmup")
        warmup.start()
        try:
            wait_until(f"{SHARE_STATE_TOPIC}'s leaders", lambda: (
                lambda ls: ls and all(b > 0 for b in ls.values()))(leaders(cluster, SHARE_STATE_TOPIC)), 60)
        finally:
            warmup.stopping.set()
            warmup.join(30)
        tid = topic_id(cluster)
        broker = next(iter(cluster.brokers.values()))
        I, W, D = (InitializeShareGroupStateRequest.InitializeStateData, WriteShareGroupStateRequest.WriteStateData,
                   DeleteShareGroupStateRequest.DeleteStateData)
        with WireClient.connect(broker.bootstrap) as w:
            # (asked until the broker has loaded the state partition it was just made leader of)
            wait_until("InitializeShareGroupState answered", lambda: w.request(
                InitializeShareGroupStateRequest(group_id="g", topics=[I(topic_id=tid, partitions=[
                    I.PartitionData(partition=0, state_epoch=0, start_offset=7)])]), 0,
                InitializeShareGroupStateResponse).results[0].partitions[0].error_code == 0, 30)
            assert persisted_state(cluster, "g", tid, 0)[1].start_offset == 7
            r = w.request(WriteShareGroupStateRequest(group_id="g", topics=[W(topic_id=tid, partitions=[
                W.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=7, state_batches=[
                    W.PartitionData.StateBatch(first_offset=7, last_offset=9, delivery_state=0, delivery_count=2)])])]),
                0, WriteShareGroupStateResponse)
            assert r.results[0].partitions[0].error_code == 0
            read = persisted_state(cluster, "g", tid, 0)[1]
            assert (read.start_offset, [(b.first_offset, b.last_offset, b.delivery_count)
                                        for b in read.state_batches]) == (7, [(7, 9, 2)])
            r = w.request(DeleteShareGroupStateRequest(group_id="g", topics=[D(topic_id=tid, partitions=[
                D.PartitionData(partition=0)])]), 0, DeleteShareGroupStateResponse)
            assert r.results[0].partitions[0].error_code == 0
            assert persisted_state(cluster, "g", tid, 0)[1].start_offset == -1  # no state: uninitialized
            r = w.request(WriteShareGroupStateRequest(group_id="g", topics=[W(topic_id=tid, partitions=[
                W.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=7, state_batches=[])])]),
                0, WriteShareGroupStateResponse)
            assert r.results[0].partitions[0].error_code == 124  # FENCED_STATE_EPOCH: a deleted state stays deleted
            r = w.request(InitializeShareGroupStateRequest(group_id="g", topics=[I(topic_id=tid, partitions=[
                I.PartitionData(partition=0, state_epoch=0, start_offset=3)])]), 0, InitializeShareGroupStateResponse)
            assert r.results[0].partitions[0].error_code == 124  # not newer than the deleted state's epoch
            assert persisted_state(cluster, "g", tid, 0)[1].state_epoch == 0  # which a read names
    finally:
        cluster.stop()


def share_offsets_request(cluster, group: str, request, response_cls, refused_while_members: int = 68):
    """An Alter/DeleteShareGroupOffsets request at the group's coordinator, sent again while the group still has a
    member (NON_EMPTY_GROUP: a closed consumer's leaving heartbeat may not have arrived yet); its answer."""
    def send():
        with WireClient("127.0.0.1", cluster.brokers[find_coordinator(cluster, 0, group)].port) as c:
            r = c.request(request, 0, response_cls)
        return None if r.error_code == refused_while_members else r
    return wait_until(f"{group} empty and its offsets changed", send, 30)


def described_group_configs(port: int, group: str) -> dict[str, str]:
    """The configs a broker describes as the group's own (source GROUP_CONFIG)."""
    R = DescribeConfigsRequest
    with WireClient("127.0.0.1", port) as c:
        r = c.request(R(resources=[R.DescribeConfigsResource(resource_type=32, resource_name=group,
                                                             configuration_keys=None)],
                        include_synonyms=False, include_documentation=False), 4)
    return {e.name: e.value for e in r.results[0].configs if e.config_source == 8}


def described_offsets(cluster, group: str, *, every: bool = False) -> dict[int, tuple[int, int]]:
    """DescribeShareGroupOffsets v1 at the group's coordinator, of TOPIC's partition 0 (``every``: of every partition
    the group has state of): (start offset, lag) by partition."""
    R = DescribeShareGroupOffsetsRequest
    G = R.DescribeShareGroupOffsetsRequestGroup
    topics = None if every else [G.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[0])]
    with WireClient("127.0.0.1", cluster.brokers[find_coordinator(cluster, 0, group)].port) as c:
        r = c.request(R(groups=[G(group_id=group, topics=topics)]), 1, DescribeShareGroupOffsetsResponse)
    return {p.partition_index: (p.start_offset, p.lag) for t in r.groups[0].topics for p in t.partitions}


def consume_until(cluster, group: str, wanted: set[bytes]) -> list[tuple[int, bytes]]:
    """One ShareConsumer of ``group`` polling until it was handed every value of ``wanted``, acknowledging each
    record (committed after each poll), then closed; what it was handed, as (offset, value)."""
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([TOPIC])
    got: list[tuple[int, bytes]] = []

    def poll() -> bool:
        polled = [m for m in consumer.poll(0.5) if m.error() is None]
        for m in polled:
            consumer.acknowledge(m)
        if polled:
            consumer.commit_sync(5)
        got.extend((m.offset(), m.value()) for m in polled)
        return {v for _o, v in got} >= wanted
    try:
        wait_until(f"{len(wanted)} records for {group}", poll, 60)
    finally:
        consumer.close()
    return got


def test_altered_and_deleted_share_offsets_are_served_by_the_partition_leader_that_held_the_old_state(tmp_path):
    """AlterShareGroupOffsets at the group's coordinator (broker 1, no replica of the partition) while the
    partition's leader (broker 2) still holds the share-partition: the next consumer starts at the altered offset,
    and the coordinator reports the lag from the leader's high watermark. DeleteShareGroupOffsets: the next one
    starts over by share.auto.offset.reset (earliest)."""
    cluster = start_cluster(tmp_path / "c", 3, **CONFIGS)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for f in admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[2, 3]])]).values():
            f.result(30)
        wait_until(f"{TOPIC}'s leader", lambda: leaders(cluster, TOPIC) == {0: 2})
        # the group's coordinator holds no replica of the partition
        group = next(g for g in (f"altered-{i}" for i in range(1000)) if find_coordinator(cluster, 0, g) == 1)
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        # the KIP-848 one reaches every broker as the share.* ones do (ZooKeeper's /config/groups)
        wait_until("every broker describes the group's configs", lambda: all(
            described_group_configs(b.port, group) == {"share.auto.offset.reset": "earliest",
                                                       "consumer.session.timeout.ms": "50000"}
            for b in cluster.brokers.values()))
        acked = produce(cluster, TOPIC, 30)
        by_offset = {o: v for (_p, o), v in acked.items()}
        consume_until(cluster, group, set(by_offset.values()))
        tid = topic_id(cluster)
        wait_until("every record acknowledged", lambda: persisted_state(cluster, group, tid, 0)[1].start_offset == 30)
        A = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
        r = share_offsets_request(cluster, group, AlterShareGroupOffsetsRequest(group_id=group, topics=[A(
            topic_name=TOPIC, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                                   start_offset=10)])]),
            AlterShareGroupOffsetsResponse)
        assert (r.error_code, r.error_message) == (0, None)
        assert [(p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [(0, 0)]
        assert persisted_state(cluster, group, tid, 0)[1].start_offset == 10
        # the lag, from the group's coordinator, which does not lead the partition: it asks the leader's high watermark
        assert described_offsets(cluster, group) == {0: (10, 20)}
        again = consume_until(cluster, group, {by_offset[o] for o in range(10, 30)})
        assert min(o for o, _v in again) == 10  # nothing before the altered offset
        wait_until("the altered range acknowledged", lambda: persisted_state(
            cluster, group, tid, 0)[1].start_offset == 30)
        assert described_offsets(cluster, group) == {0: (30, 0)}
        # the group is empty and its coordinator leads no partition: its partitions come from the group's records
        assert described_offsets(cluster, group, every=True) == {0: (30, 0)}
        # an alter creates a group never seen (as Kafka's), which then lists its partition like any other
        fresh = next(g for g in (f"fresh-{i}" for i in range(1000)) if find_coordinator(cluster, 0, g) == 1)
        r = share_offsets_request(cluster, fresh, AlterShareGroupOffsetsRequest(group_id=fresh, topics=[A(
            topic_name=TOPIC, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                                   start_offset=25)])]),
            AlterShareGroupOffsetsResponse)
        assert [(p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [(0, 0)]
        assert described_offsets(cluster, fresh, every=True) == {0: (25, 5)}
        with WireClient("127.0.0.1", cluster.brokers[1].port) as c:
            listed = c.request(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5)
        assert fresh in {g.group_id for g in listed.groups}
        D = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
        r = share_offsets_request(cluster, group, DeleteShareGroupOffsetsRequest(group_id=group, topics=[D(
            topic_name=TOPIC)]), DeleteShareGroupOffsetsResponse)
        assert [(t.topic_name, t.error_code) for t in r.responses] == [(TOPIC, 0)]
        assert persisted_state(cluster, group, tid, 0)[1].start_offset == -1
        from_start = consume_until(cluster, group, set(by_offset.values()))
        assert min(o for o, _v in from_start) == 0  # started over at the earliest offset
    finally:
        cluster.stop()


def state_topic_records(cluster) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) of __share_group_state, read from its start (read_committed, as the coordinators replay)."""
    partitions = len(leaders(cluster, SHARE_STATE_TOPIC))
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "state-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(SHARE_STATE_TOPIC, p, 0) for p in range(partitions)])
    out, done = [], set()
    try:
        def read_to_end() -> bool:
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    out.append((m.key(), m.value()))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
            return len(done) == partitions
        wait_until(f"{SHARE_STATE_TOPIC} read to its end", read_to_end, 30)
    finally:
        c.close()
    return out


def test_a_deleted_topics_share_state_is_tombstoned_and_a_topic_created_again_starts_fresh(tmp_path):
    """The share coordinator forgets a deleted topic's share state with a tombstone in __share_group_state (so
    compaction can drop it); the topic created again under the same name (a new id) is delivered from its start,
    each record with delivery count 1."""
    cluster = start_cluster(tmp_path / "c", 3, **{**CONFIGS, "share.coordinator.state.topic.num.partitions": "1"})
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

        def create() -> None:
            for f in admin.create_topics([NewTopic(TOPIC, num_partitions=1,
                                                   replica_assignment=[[2, 3, 1]])]).values():
                f.result(30)
            wait_until(f"{TOPIC}'s leader on every broker", lambda: all(
                {p.partition_index: p.leader_id for p in metadata(b, [TOPIC]).topics[0].partitions} == {0: 2}
                for b in cluster.brokers.values()), 60)
        create()
        group = "gone"
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        first = produce(cluster, TOPIC, 20)
        consume_until(cluster, group, set(first.values()))
        old_id = topic_id(cluster)
        wait_until("the first records acknowledged", lambda: persisted_state(cluster, group, old_id, 0)[1]
                   .start_offset == 20)
        for f in admin.delete_topics([TOPIC], request_timeout=20).values():
            f.result(30)
        wait_until(f"{TOPIC}'s share state gone", lambda: persisted_state(cluster, group, old_id, 0)[1]
                   .start_offset == -1, 30)
        tombstone = tombstone_key(ShareStateKey(group, old_id, 0))
        assert [v for k, v in state_topic_records(cluster) if k == tombstone][-1] is None
        wait_until(f"{TOPIC} gone from every broker", lambda: all(
            metadata(b, [TOPIC]).topics[0].error_code == 3 for b in cluster.brokers.values()), 60)
        create()
        assert topic_id(cluster) != old_id
        again = produce(cluster, TOPIC, 10, prefix=b"again")
        consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
        consumer.subscribe([TOPIC])
        got = []
        try:
            wait_until("the new topic's records", lambda: got.extend(
                (m.offset(), m.value(), m.delivery_count()) for m in consumer.poll(0.5) if m.error() is None) or {
                v for _o, v, _c in got} >= set(again.values()), 60)
        finally:
            consumer.close()
        assert sorted(o for o, _v, _c in got) == list(range(10)) and {c for _o, _v, c in got} == {1}
    finally:
        cluster.stop()


def test_a_partition_is_assigned_once_its_share_state_is_initialized_at_its_share_coordinator(tmp_path):
    """The group's coordinator (broker 1, leading no partition of the topic) does not hand a member partitions
    whose share state does not exist yet: it initializes the state at the share coordinators first (without a start
    offset, which the partition's leader resolves by share.auto.offset.reset), then assigns them."""
    cluster = start_cluster(tmp_path / "c", 3, **CONFIGS)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for f in admin.create_topics([NewTopic(TOPIC, num_partitions=2,
                                               replica_assignment=[[2, 3], [3, 2]])]).values():
            f.result(30)
        wait_until(f"{TOPIC}'s leaders", lambda: leaders(cluster, TOPIC) == {0: 2, 1: 3})
        group = next(g for g in (f"gated-{i}" for i in range(1000)) if find_coordinator(cluster, 0, g) == 1)
        tid = topic_id(cluster)
        with WireClient("127.0.0.1", cluster.brokers[1].port) as c:
            def heartbeat(epoch: int, topics):
                return c.request(ShareGroupHeartbeatRequest(group_id=group, member_id="m-1", member_epoch=epoch,
                                                            rack_id=None, subscribed_topic_names=topics), 1,
                                 ShareGroupHeartbeatResponse)
            hb = heartbeat(0, [TOPIC])
            assert hb.error_code == 0, hb.error_message
            assert not (hb.assignment and hb.assignment.topic_partitions)  # nothing initialized yet
            assert hb.heartbeat_interval_ms <= 500  # come back soon for them

            def assigned():
                nonlocal hb
                hb = heartbeat(hb.member_epoch, None)
                return sorted(p for tp in (hb.assignment.topic_partitions if hb.assignment else [])
                              for p in tp.partitions) == [0, 1]
            wait_until("both partitions assigned", assigned, 30)
        for p in (0, 1):  # the state exists (an initialization's state epoch), its start offset not resolved yet
            _broker, state = persisted_state(cluster, group, tid, p)
            assert state.state_epoch >= 1
    finally:
        cluster.stop()
