"""DeleteRecords and acks=all on a real three-broker cluster, as Kafka's ReplicaManager answers them: only the
leader deletes (a follower answers NOT_LEADER_OR_FOLLOWER and no replica changes), the followers' log starts
follow the leader's (their Fetch names it back: DeleteRecords answers once every live replica has it), so a new
leader after a kill -9 starts exactly where the old one did; an acks=all append whose ISR shrinks below
min.insync.replicas before the high watermark passes it is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
from __future__ import annotations

import json
import signal

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.protocol.admin import DeleteRecordsRequest, DescribeLogDirsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

from cluster_fixtures import create_topic, metadata, start_cluster, wait_until, zookeeper_client
from tidelake import errors
from tidelake.clock import wall_ms
from tidelake.protocol.records import Record, build_batch
from tidelake.protocol.wire_client import WireClient

# small segments: a DeleteRecords past a few of them removes whole files, which every replica's log dir shows
SMALL_SEGMENTS = {"segment.bytes": "1024", "min.insync.replicas": "2"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("delete-records"), 3)
    yield c
    c.stop()


def leader_and_followers(cluster, topic: str) -> tuple[int, list[int]]:
    part = metadata(cluster.brokers[1], [topic]).topics[0].partitions[0]
    return part.leader_id, [b for b in part.replica_nodes if b != part.leader_id]


def ask(cluster, broker_id: int, request, version: int):
    b = cluster.brokers[broker_id]
    with WireClient("127.0.0.1", b.port, timeout=60) as c:
        return c.request(request, version)


def delete_records(cluster, broker_id: int, topic: str, offset: int) -> tuple[int, int]:
    D = DeleteRecordsRequest
    r = ask(cluster, broker_id, D(timeout_ms=30_000, topics=[D.DeleteRecordsTopic(name=topic, partitions=[
        D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=offset)])]), 2)
    p = r.topics[0].partitions[0]
    return p.error_code, p.low_watermark


def earliest(cluster, broker_id: int, topic: str) -> tuple[int, int]:
    L = ListOffsetsRequest
    r = ask(cluster, broker_id, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)])]), 7)
    p = r.topics[0].partitions[0]
    return p.error_code, p.offset


def replica_sizes(cluster, topic: str) -> dict[int, int]:
    """Each live replica's size of the partition on its disk (DescribeLogDirs, which any replica answers)."""
    D = DescribeLogDirsRequest
    out = {}
    for bid, b in cluster.brokers.items():
        if not b.alive():
            continue
        r = ask(cluster, bid, D(topics=[D.DescribableLogDirTopic(topic=topic, partitions=[0])]), 4)
        sizes = [p.partition_size for res in r.results for t in res.topics if t.name == topic for p in t.partitions]
        out[bid] = sizes[0] if sizes else None
    return out


def produce_batches(cluster, topic: str, batches: int) -> dict[int, bytes]:
    """``batches`` acks=all batches of ten ~100-byte records to the leader, each over segment.bytes (a segment
    of its own); {offset: value}."""
    leader, _followers = leader_and_followers(cluster, topic)
    P = ProduceRequest
    acked, now = {}, wall_ms()   # (a timestamp of long ago is past retention.ms at once)
    with WireClient("127.0.0.1", cluster.brokers[leader].port, timeout=60) as c:
        for b in range(batches):
            values = [b"%06d" % (b * 10 + i) + b"x" * 100 for i in range(10)]
            req = P(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[P.TopicProduceData(
                name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(
                    index=0, records=bytes(build_batch([Record(i, now, None, v) for i, v in enumerate(values)])))])])
            part = c.request(req, 9).responses[0].partition_responses[0]
            assert part.error_code == errors.NONE, part
            acked.update({part.base_offset + i: v for i, v in enumerate(values)})
    return acked


def same_size_everywhere(cluster, topic: str) -> int:
    """Wait until every replica has the leader's whole log (the same bytes, so the same size); that size."""
    def same() -> int | None:
        sizes = set(replica_sizes(cluster, topic).values())
        return sizes.pop() if len(sizes) == 1 else None
    return wait_until(f"every replica of {topic} to hold the same log", same, 60)


def test_delete_records_sent_to_a_follower_is_refused_and_changes_no_replica(cluster):
    create_topic(cluster, "trim-follower", 1, 3, **SMALL_SEGMENTS)
    produce_batches(cluster, "trim-follower", 20)
    before = same_size_everywhere(cluster, "trim-follower")
    leader, followers = leader_and_followers(cluster, "trim-follower")
    for f in followers:
        assert delete_records(cluster, f, "trim-follower", 50) == (errors.NotLeaderOrFollower.code, -1)
    assert earliest(cluster, leader, "trim-follower") == (errors.NONE, 0)
    assert replica_sizes(cluster, "trim-follower") == {1: before, 2: before, 3: before}
    # ListOffsets stays the leader's: a follower refuses it too
    assert earliest(cluster, followers[0], "trim-follower")[0] == errors.NotLeaderOrFollower.code


def test_delete_records_through_the_leader_moves_every_replicas_log_start(cluster):
    create_topic(cluster, "trim-all", 1, 3, **SMALL_SEGMENTS)
    produce_batches(cluster, "trim-all", 20)
    before = same_size_everywhere(cluster, "trim-all")
    leader, _followers = leader_and_followers(cluster, "trim-all")
    # answered with the low watermark once the followers' Fetch names the new log start back
    assert delete_records(cluster, leader, "trim-all", 120) == (errors.NONE, 120)
    after = replica_sizes(cluster, "trim-all")   # at once: no replica still holds the deleted segments
    assert len(set(after.values())) == 1 and after[leader] < before, (before, after)
    assert earliest(cluster, leader, "trim-all") == (errors.NONE, 120)
    # -1: up to the high watermark
    assert delete_records(cluster, leader, "trim-all", -1) == (errors.NONE, 200)


def send_acks_all(cluster, broker_id: int, topic: str, value: bytes) -> int:
    P = ProduceRequest
    req = P(transactional_id=None, acks=-1, timeout_ms=60_000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=bytes(build_batch([Record(0, wall_ms(), b"k", value)])))])])
    return ask(cluster, broker_id, req, 9).responses[0].partition_responses[0].error_code


def isr(cluster, topic: str) -> list[int]:
    """The ISR as the leader last wrote it to ZooKeeper."""
    with zookeeper_client(cluster) as zk:
        return sorted(json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])["isr"])


def test_acks_all_is_refused_when_the_isr_shrinks_below_min_insync_replicas_before_the_high_watermark(cluster):
    """RF 2, min.insync.replicas=2: the follower is stopped, an acks=all record is appended while the ISR still
    names it (2), and the high watermark passes the record only once the leader has dropped the silent follower
    (replica.lag.time.max.ms=2000): the ISR holding it is the leader alone, so the answer is
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, not an acknowledgement."""
    create_topic(cluster, "acks-shrink", 1, 2, **{"min.insync.replicas": "2"})
    leader, (follower,) = leader_and_followers(cluster, "acks-shrink")
    assert send_acks_all(cluster, leader, "acks-shrink", b"both") == errors.NONE
    codes = []
    while True:   # an ISR already shrunk when the record arrives refuses it before appending (19): once more
        wait_until("the ISR of both replicas", lambda: isr(cluster, "acks-shrink") == sorted([leader, follower]), 60)
        cluster.signal_broker(follower, signal.SIGSTOP)
        try:
            codes.append(send_acks_all(cluster, leader, "acks-shrink", b"alone"))
        finally:
            cluster.signal_broker(follower, signal.SIGCONT)
        if codes[-1] != errors.NotEnoughReplicas.code or len(codes) == 5:
            break
    assert codes[-1] == errors.NotEnoughReplicasAfterAppend.code, codes
    # healed: the follower catches up and rejoins (the leader adopts the ISR just after ZooKeeper holds it: until
    # then a record is refused before it is appended), and acks=all is acknowledged again
    wait_until("the follower back in the ISR", lambda: isr(cluster, "acks-shrink") == sorted([leader, follower]), 60)
    wait_until("acks=all acknowledged again", lambda: send_acks_all(cluster, leader, "acks-shrink", b"healed")
               == errors.NONE, 60, interval_s=0.2)


def test_after_a_delete_and_a_kill_9_of_the_leader_the_new_leader_starts_where_the_old_one_did(cluster):
    create_topic(cluster, "trim-failover", 1, 3, **SMALL_SEGMENTS)
    acked = produce_batches(cluster, "trim-failover", 20)
    same_size_everywhere(cluster, "trim-failover")
    leader, followers = leader_and_followers(cluster, "trim-failover")
    assert delete_records(cluster, leader, "trim-failover", 30) == (errors.NONE, 30)
    cluster.kill_broker(leader)
    try:
        def elected():
            named = metadata(cluster.brokers[followers[0]], ["trim-failover"]).topics[0].partitions[0].leader_id
            return named if named in followers else None
        new = wait_until("a new leader", elected, 60)

        def answered():
            code, offset = earliest(cluster, new, "trim-failover")
            return (code, offset) if code == errors.NONE else None
        assert wait_until("the new leader to answer ListOffsets", answered) == (errors.NONE, 30)
        c = Consumer({"bootstrap.servers": cluster.brokers[new].bootstrap, "group.id": "trim", "enable.auto.commit":
                      False, "enable.partition.eof": False})
        c.assign([TopicPartition("trim-failover", 0, 30)])
        got: dict[int, bytes] = {}
        try:
            wait_until("records 30-199 from the new leader", lambda: got.update(
                (m.offset(), m.value()) for m in c.consume(200, 0.5) if m.error() is None) or len(got) >= 170, 60)
        finally:
            c.close()
        assert got == {o: v for o, v in acked.items() if o >= 30}
    finally:
        cluster.start_broker(leader)
