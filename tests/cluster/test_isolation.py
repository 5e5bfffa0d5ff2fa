"""A partition leader isolated from ZooKeeper and the other brokers (seed 004: an ISR member must hold a live
ZooKeeper session). Cut off, the leader cannot shrink its ISR (that is a ZooKeeper write) and its followers
cannot fetch, so it acknowledges no acks=all write; its session expires, the controller elects another
leader from the ISR, the producer moves there, and nothing the old leader acknowledged is lost. When it is
reachable again it learns it follows, truncates what only it had and catches up.

Isolation by a network namespace (the leader's broker runs in one, joined by a veth pair whose link is cut)
needs root; the SIGSTOP variant (the leader frozen: the same silence as seen from outside) always runs.
Slow (sessions must expire): marker slow_faults.
"""
from __future__ import annotations

import json
import signal

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kazoo.client import KazooClient

from cluster_fixtures import consume_all, replica_batches, require_zookeeper, wait_until
from fault_load import LoadProducer, check_exactly_once_in_order
from network_namespace import NetworkNamespace, unavailable
from tidelake import errors
from tidelake.cluster.local_cluster import LocalCluster
from tidelake.protocol.records import Record, build_batch, decode_records
from tidelake.protocol.wire_client import WireClient

pytestmark = pytest.mark.slow_faults

SETTINGS = {"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "2000",
            "offsets.topic.num.partitions": "3", "controlled.shutdown.retry.backoff.ms": "500"}
# librdkafka's idempotent producer resends to the new leader only once its requests in flight to the silent
# one have timed out: after socket.timeout.ms (60 s by default); 5 s here
PRODUCER = {"request.timeout.ms": 5000, "socket.timeout.ms": 5000}
NOT_ACKNOWLEDGED = {errors.RequestTimedOut.code, errors.NotEnoughReplicasAfterAppend.code,
                    errors.NotLeaderOrFollower.code}


def state(zk, topic: str) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])


def acks_all_write(host: str, port: int, topic: str, value: bytes, timeout_ms: int = 3000) -> int:
    """One acks=all Produce of one record, straight to ``host:port``; the partition's error code."""
    P = ProduceRequest
    batch = bytes(build_batch([Record(0, 1, None, value)]))
    req = P(transactional_id=None, acks=-1, timeout_ms=timeout_ms, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    with WireClient(host, port, timeout=timeout_ms / 1000 + 30) as c:
        return c.request(req, 9).responses[0].partition_responses[0].error_code


def knows_the_cluster(cluster: LocalCluster) -> bool:
    for b in cluster.brokers.values():
        with WireClient(b.host, b.port) as c:
            md = c.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9)
        if md.controller_id < 0 or len(md.brokers) != len(cluster.brokers):
            return False
    return True


def create_led_by(cluster: LocalCluster, zk, topic: str, replicas: list[int]) -> None:
    """One partition on ``replicas``, the first its leader, min.insync.replicas=2."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})
    for f in admin.create_topics([new], request_timeout=20).values():
        f.result(30)
    wait_until(f"{topic}-0 led by {replicas[0]} with a full ISR", lambda: (
        (s := state(zk, topic))["leader"] == replicas[0] and sorted(s["isr"]) == sorted(replicas)), 30)


def values_of(cluster: LocalCluster, broker_id: int, topic: str) -> list[bytes]:
    return [r.value for _b, _l, _e, data in replica_batches(cluster, broker_id, topic, 0)
            for r in decode_records(data, 0)]


def controller(zk) -> int:
    return json.loads(zk.get("/controller")[0])["brokerid"]


def start_with_controller(cluster: LocalCluster, zk, first: int) -> None:
    """ZooKeeper, then broker ``first`` alone until it is the controller, then the others."""
    cluster.root.mkdir(parents=True, exist_ok=True)
    cluster.zookeeper.start()
    zk.start(10)
    cluster.start_broker(first, timeout_s=90)
    wait_until(f"broker {first} to be the controller", lambda: controller(zk) == first, 60)
    for b in cluster.brokers:
        if b != first:
            cluster.start_broker(b, timeout_s=90)


@pytest.mark.parametrize("controller_isolated", [False, True], ids=["leader", "leader-and-controller"])
def test_a_leader_cut_off_by_its_network_namespace_stops_acknowledging_and_loses_nothing(tmp_path,
                                                                                        controller_isolated):
    """Broker 3 leads the partition; the controller is broker 1, or broker 3 itself (then the others must also
    elect a new controller, and the deposed one's writes are fenced by the controller epoch)."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"{reason}: no network namespaces here; "
                    "test_a_stopped_leader_stops_acknowledging_and_loses_nothing isolates the leader by SIGSTOP")
    require_zookeeper()
    ns = NetworkNamespace()
    try:
        ns.create()
        # ZooKeeper and brokers 1 and 2 on the outside end of the veth, broker 3 alone inside
        cluster = LocalCluster(tmp_path / "c", 3, configs=SETTINGS, host=ns.outside,
                               namespaces={3: (ns.name, ns.inside)})
        zk = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
        try:
            start_with_controller(cluster, zk, 3 if controller_isolated else 1)
            wait_until("three registered brokers", lambda: len(zk.get_children("/brokers/ids")) == 3, 90)
            wait_until("every broker to know the controller and the others", lambda: knows_the_cluster(cluster), 90)
            create_led_by(cluster, zk, "iso", [3, 1, 2])
            load = LoadProducer(cluster, "iso", rate=1000, **PRODUCER)
            try:
                wait_until("1000 acknowledged records", lambda: len(load.acked) >= 1000, 60)
                ns.cut()
                # on the isolated side the leader still believes it leads, but an acks=all write stays
                # unacknowledged: its followers cannot fetch and ZooKeeper cannot take them out of the ISR
                port = cluster.brokers[3].port
                code = ns.run_inside(lambda: acks_all_write(ns.inside, port, "iso", b"isolated"))
                assert code in NOT_ACKNOWLEDGED, code
                new = wait_until("another leader of iso-0", lambda: (
                    (s := state(zk, "iso"))["leader"] not in (3, -1) and s["leader"]), 60)
                assert 3 not in state(zk, "iso")["isr"]
                before = len(load.acked)
                wait_until("writes to go on at the new leader", lambda: len(load.acked) >= before + 1000, 90)
                ns.heal()
                # a new ZooKeeper session, LeaderAndIsr as a follower: it truncates and catches up
                wait_until("the old leader back in the ISR", lambda: 3 in state(zk, "iso")["isr"], 90)
                assert state(zk, "iso")["leader"] == new
                if controller_isolated:
                    assert controller(zk) != 3
            finally:
                load.stop()
            assert not load.failed, load.failed[:3]
            got = consume_all(cluster, "iso", 1, len(load.acked), timeout_s=90)
            check_exactly_once_in_order(got, load.acked)
            assert b"isolated" not in [v for _p, _o, v in got]
        finally:
            zk.stop()
            zk.close()
            try:
                ns.heal()  # so the brokers stop cleanly (controlled shutdown)
            except RuntimeError:
                pass
            cluster.stop()
        old_log, new_log = values_of(cluster, 3, "iso"), values_of(cluster, new, "iso")
        assert b"isolated" not in old_log
        assert old_log == new_log
        # cut off, it reported each failed ZooKeeper call in one line
        assert "Traceback" not in cluster.brokers[3].log_path.read_text()
    finally:
        ns.delete()


def test_a_stopped_leader_stops_acknowledging_and_loses_nothing(cluster):
    """SIGSTOP of the leader: silent to ZooKeeper, followers and producers alike. When it runs again its
    session is gone and its followers follow another leader: requests it finds waiting are not acknowledged
    (nothing it appends then reaches a high watermark), and it becomes a follower that truncates and catches up."""
    zk = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    zk.start(10)
    try:
        create_led_by(cluster, zk, "paused", [1, 2, 3])
        load = LoadProducer(cluster, "paused", rate=1000, **PRODUCER)
        try:
            wait_until("1000 acknowledged records", lambda: len(load.acked) >= 1000, 60)
            cluster.signal_broker(1, signal.SIGSTOP)
            try:
                new = wait_until("another leader of paused-0", lambda: (
                    (s := state(zk, "paused"))["leader"] not in (1, -1) and s["leader"]), 60)
                before = len(load.acked)
                wait_until("writes to go on at the new leader", lambda: len(load.acked) >= before + 1000, 90)
            finally:
                cluster.signal_broker(1, signal.SIGCONT)
            wait_until("the old leader back in the ISR", lambda: 1 in state(zk, "paused")["isr"], 90)
            assert state(zk, "paused")["leader"] == new
            assert acks_all_write("127.0.0.1", cluster.brokers[1].port, "paused", b"to-old") \
                == errors.NotLeaderOrFollower.code
        finally:
            load.stop()
        assert not load.failed, load.failed[:3]
        check_exactly_once_in_order(consume_all(cluster, "paused", 1, len(load.acked), timeout_s=90), load.acked)
    finally:
        zk.stop()
        zk.close()
