"""KIP-320 on a three-broker cluster: Metadata names each partition's leader epoch, and the leader checks the
epoch a client's Fetch, ListOffsets and OffsetForLeaderEpoch carry (older: FENCED_LEADER_EPOCH, newer:
UNKNOWN_LEADER_EPOCH) — with raw wire requests, and with a confluent-kafka consumer reading across a leader
change (the partition is reassigned away from its leader), every record once."""
from __future__ import annotations

import json
import threading

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import AlterPartitionReassignmentsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kazoo.client import KazooClient

from cluster_fixtures import metadata, produce, wait_until
from tidelake import errors
from tidelake.protocol.wire_client import WireClient

TOPIC = "epochs"


def _create(cluster, name: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)],
                                 request_timeout=20).values():
        f.result(30)
    wait_until(f"every broker to know the leaders of {name}", lambda: all(
        all(p.leader_id > 0 for p in metadata(b, [name]).topics[0].partitions) for b in cluster.brokers.values()))


def _leader(cluster, topic: str) -> tuple[int, int]:
    """(leader, leader epoch) of partition 0 as Metadata names them."""
    (t,) = metadata(cluster.brokers[1], [topic]).topics
    (p,) = t.partitions
    return p.leader_id, p.leader_epoch


def _state(cluster, topic: str) -> dict:
    client = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    client.start(10)
    try:
        return json.loads(client.get(f"/brokers/topics/{topic}/partitions/0/state")[0])
    finally:
        client.stop()
        client.close()


def _fetch(port: int, epoch: int) -> int:
    R = FetchRequest
    req = R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[R.FetchTopic(topic=TOPIC, partitions=[R.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    with WireClient("127.0.0.1", port) as c:
        return c.request(req, 12).responses[0].partitions[0].error_code


def _list_offsets(port: int, epoch: int) -> int:
    R = ListOffsetsRequest
    req = R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name=TOPIC, partitions=[
        R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch, timestamp=-1)])])
    with WireClient("127.0.0.1", port) as c:
        return c.request(req, 7).topics[0].partitions[0].error_code


def _offset_for_epoch(port: int, epoch: int) -> int:
    R = OffsetForLeaderEpochRequest
    req = R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic=TOPIC, partitions=[
        R.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, current_leader_epoch=epoch, leader_epoch=0)])])
    with WireClient("127.0.0.1", port) as c:
        return c.request(req, 4).topics[0].partitions[0].error_code


def _move(cluster, replicas: list[int]) -> None:
    """Reassign partition 0 (the controller carries it out) and wait until it is done."""
    controller = metadata(cluster.brokers[1]).controller_id
    R = AlterPartitionReassignmentsRequest
    req = R(timeout_ms=10000, topics=[R.ReassignableTopic(name=TOPIC, partitions=[
        R.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=replicas)])])
    with WireClient("127.0.0.1", cluster.brokers[controller].port) as c:
        assert c.request(req, 0).responses[0].partitions[0].error_code == errors.NONE
    wait_until(f"{TOPIC}-0 to move to {replicas}", lambda: all(
        sorted(metadata(b, [TOPIC]).topics[0].partitions[0].replica_nodes) == sorted(replicas)
        and metadata(b, [TOPIC]).topics[0].partitions[0].leader_id in replicas for b in cluster.brokers.values()), 60)


def test_the_leader_fences_older_epochs_and_refuses_unknown_newer_ones(cluster):
    _create(cluster, TOPIC, [[1, 2]])
    produce(cluster, TOPIC, 50)
    leader, epoch = _leader(cluster, TOPIC)
    assert (leader, epoch) == (_state(cluster, TOPIC)["leader"], _state(cluster, TOPIC)["leader_epoch"])
    port = cluster.brokers[leader].port
    for call in (_fetch, _list_offsets, _offset_for_epoch):
        assert call(port, epoch) == errors.NONE, call.__name__
        assert call(port, -1) == errors.NONE, call.__name__  # no epoch known: not checked
        assert call(port, epoch + 1) == errors.UnknownLeaderEpoch.code, call.__name__
        if epoch > 0:
            assert call(port, epoch - 1) == errors.FencedLeaderEpoch.code, call.__name__
        assert call(cluster.brokers[3].port, epoch) == errors.NotLeaderOrFollower.code, call.__name__

    _move(cluster, [2, 3])  # broker 1 leads no more: a new leader in a newer epoch
    new_leader, new_epoch = wait_until("a new leader", lambda: _leader(cluster, TOPIC)[0] in (2, 3)
                                       and _leader(cluster, TOPIC))
    assert new_epoch > epoch and new_epoch == _state(cluster, TOPIC)["leader_epoch"]
    port = cluster.brokers[new_leader].port
    for call in (_fetch, _list_offsets, _offset_for_epoch):
        assert call(port, epoch) == errors.FencedLeaderEpoch.code, call.__name__
        assert call(port, new_epoch) == errors.NONE, call.__name__
        assert call(port, new_epoch + 1) == errors.UnknownLeaderEpoch.code, call.__name__


def test_a_consumer_reads_every_record_once_across_a_leader_change(cluster):
    _create(cluster, TOPIC, [[1, 2]])
    total = 6000
    acked: dict[int, bytes] = {}
    failures = []

    def write() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 2})

        def on_delivery(err, m):
            (failures.append(err) if err is not None else acked.__setitem__(m.offset(), m.value()))
        for i in range(total):
            p.produce(TOPIC, value=b"c-%06d" % i, partition=0, on_delivery=on_delivery)
            p.poll(0)
            if i % 300 == 0:
                p.flush(30)
        if p.flush(60):
            failures.append("not all delivered")
    writer = threading.Thread(target=write)
    writer.start()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "epochs-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False})
    seen: list[tuple[int, bytes]] = []
    consumer_errors = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])

        def read(until: int):
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    seen.append((m.offset(), m.value()))
                else:
                    consumer_errors.append(m.error())
            return len(seen) >= until
        wait_until("the consumer to read the first records", lambda: read(500), 60)
        old_epoch = _leader(cluster, TOPIC)[1]
        _move(cluster, [2, 3])
        assert _leader(cluster, TOPIC)[1] > old_epoch
        writer.join(120)
        assert not writer.is_alive() and failures == [], failures[:3]
        wait_until(f"the consumer to read all {total} records", lambda: read(total), 90)
    finally:
        consumer.close()
        writer.join(120)
    offsets = [o for o, _v in seen]
    assert offsets == sorted(set(offsets)), "a record was read twice or out of order"
    assert dict(seen) == acked
    assert len({v for _o, v in seen}) == total
    assert [e for e in consumer_errors if e.fatal()] == []
