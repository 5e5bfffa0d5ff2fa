"""Three broker processes and a ZooKeeper: registration, controller election, topics in Kafka's
ZooKeeper layout, the same Metadata from every broker, NOT_LEADER_OR_FOLLOWER from non-leaders."""
from __future__ import annotations

import json

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kazoo.client import KazooClient

from cluster_fixtures import wait_until
from tidelake import errors
from tidelake.protocol.messages import ControlledShutdownRequest, LeaderAndIsrRequest
from tidelake.protocol.records import Record, build_batch
from tidelake.protocol.wire_client import WireClient


def _zk(cluster) -> KazooClient:
    client = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    client.start(10)
    return client


def _create(cluster, name: str, partitions: int, rf: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics([NewTopic(name, partitions, rf, config=configs)], request_timeout=20).values():
        f.result(30)


def _metadata(port: int, topic: str):
    with WireClient("127.0.0.1", port) as c:
        return c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                         allow_auto_topic_creation=False), 9)


def _partitions(md) -> dict[int, tuple]:
    (t,) = md.topics
    return {p.partition_index: (p.error_code, p.leader_id, p.leader_epoch, sorted(p.replica_nodes), sorted(p.isr_nodes))
            for p in t.partitions}


def test_every_broker_registers_and_one_controller_is_elected(cluster):
    zk = _zk(cluster)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        reg = json.loads(zk.get("/brokers/ids/2")[0])
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{cluster.brokers[2].port}"]
        assert reg["version"] == 5 and reg["port"] == cluster.brokers[2].port
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        assert controller in (1, 2, 3) and int(zk.get("/controller_epoch")[0]) >= 1
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
    finally:
        zk.stop()
        zk.close()

    def every_broker_agrees():
        answers = [_metadata(b.port, "absent") for b in cluster.brokers.values()]
        return all(sorted((x.node_id, x.port) for x in md.brokers) ==
                   sorted((b.broker_id, b.port) for b in cluster.brokers.values())
                   and md.controller_id == controller and md.cluster_id == cluster_id for md in answers)
    wait_until("every broker to list all three and the controller", every_broker_agrees)


def test_topic_is_written_in_kafkas_layout_and_every_broker_describes_it_alike(cluster):
    _create(cluster, "orders", 3, 3, **{"min.insync.replicas": "2"})
    zk = _zk(cluster)
    try:
        assignment = json.loads(zk.get("/brokers/topics/orders")[0])
        assert assignment["version"] == 2 and sorted(assignment["partitions"]) == ["0", "1", "2"]
        assert all(sorted(r) == [1, 2, 3] for r in assignment["partitions"].values())
        # round robin: each broker is the preferred leader of one partition
        assert sorted(r[0] for r in assignment["partitions"].values()) == [1, 2, 3]
        config = json.loads(zk.get("/config/topics/orders")[0])
        assert config == {"version": 1, "config": {"min.insync.replicas": "2"}}
        state = json.loads(zk.get("/brokers/topics/orders/partitions/0/state")[0])
        assert state["leader"] == assignment["partitions"]["0"][0] and sorted(state["isr"]) == [1, 2, 3]
    finally:
        zk.stop()
        zk.close()
    expected = {p: (0, r[0], 0, [1, 2, 3], [1, 2, 3]) for p, r in
                ((int(k), v) for k, v in assignment["partitions"].items())}
    wait_until("every broker to describe orders alike",
               lambda: all(_partitions(_metadata(b.port, "orders")) == expected for b in cluster.brokers.values()))


def test_too_high_replication_factor_is_refused(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    (f,) = admin.create_topics([NewTopic("wide", 1, 4)], request_timeout=20).values()
    try:
        f.result(30)
        raise AssertionError("created a topic with more replicas than brokers")
    except Exception as e:
        assert "INVALID_REPLICATION_FACTOR" in str(e) or "larger than available brokers" in str(e), e


def test_a_broker_that_does_not_lead_answers_not_leader_or_follower(cluster):
    _create(cluster, "single", 1, 1)
    leader = wait_until("a leader", lambda: _partitions(_metadata(cluster.brokers[1].port, "single"))[0][1])
    wait_until("every broker to know the leader", lambda: all(
        _partitions(_metadata(b.port, "single"))[0][1] == leader for b in cluster.brokers.values()))
    other = next(b for b in cluster.brokers.values() if b.broker_id != leader)
    batch = bytes(build_batch([Record(0, 1, b"k", b"v")]))
    P = ProduceRequest
    produce = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="single", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    F = FetchRequest
    fetch = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
              session_epoch=-1, topics=[F.FetchTopic(topic="single", partitions=[F.FetchTopic.FetchPartition(
                  partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                  partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    with WireClient("127.0.0.1", other.port) as c:
        pr = c.request(produce, 9)
        assert pr.responses[0].partition_responses[0].error_code == errors.NotLeaderOrFollower.code
        fr = c.request(fetch, 12)
        assert fr.responses[0].partitions[0].error_code == errors.NotLeaderOrFollower.code
    with WireClient("127.0.0.1", cluster.brokers[leader].port) as c:
        pr = c.request(produce, 9)
        assert pr.responses[0].partition_responses[0].error_code == 0


def test_a_request_from_an_older_controller_epoch_is_refused(cluster):
    zk = _zk(cluster)
    try:
        epoch = int(zk.get("/controller_epoch")[0])
    finally:
        zk.stop()
        zk.close()
    stale = LeaderAndIsrRequest(controller_id=9, controller_epoch=epoch - 1, max_broker_epoch=-1, topic_states=[],
                                live_leaders=[])
    b = cluster.brokers[1]
    wait_until("broker 1 to hear from the controller",
               lambda: _metadata(b.port, "absent").controller_id > 0)
    with WireClient("127.0.0.1", b.port) as c:
        assert c.request(stale, 5).error_code == errors.StaleControllerEpoch.code


def test_deleting_a_topic_removes_it_from_zookeeper_every_broker_and_every_disk(cluster):
    _create(cluster, "doomed", 2, 3)
    wait_until("doomed on every broker", lambda: all(
        _partitions(_metadata(b.port, "doomed"))[0][0] == 0 for b in cluster.brokers.values()))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.delete_topics(["doomed"], request_timeout=20).values():
        f.result(30)
    wait_until("doomed gone from every broker", lambda: all(
        _metadata(b.port, "doomed").topics[0].error_code == errors.UnknownTopicOrPartition.code
        for b in cluster.brokers.values()))
    zk = _zk(cluster)
    try:
        wait_until("doomed gone from ZooKeeper", lambda: zk.exists("/brokers/topics/doomed") is None
                   and zk.exists("/config/topics/doomed") is None and zk.get_children("/admin/delete_topics") == [])
    finally:
        zk.stop()
        zk.close()
    wait_until("its partition directories deleted", lambda: not any(
        (b.data_dir / f"doomed-{p}").exists() for b in cluster.brokers.values() for p in (0, 1)))


def test_topic_config_changes_and_new_partitions_reach_every_broker(cluster):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions
    _create(cluster, "grow", 1, 2)
    # the controller's UpdateMetadata reaches the brokers after CreateTopics answers (as in Kafka)
    wait_until("grow known to every broker", lambda: all(
        _partitions(_metadata(b.port, "grow"))[0][1] >= 0 for b in cluster.brokers.values()))
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "grow", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([resource], request_timeout=20).values():
        f.result(30)
    zk = _zk(cluster)
    try:
        assert json.loads(zk.get("/config/topics/grow")[0])["config"] == {"retention.ms": "3600000"}
        assert any(json.loads(zk.get(f"/config/changes/{c}")[0]) == {"version": 2, "entity_path": "topics/grow"}
                   for c in zk.get_children("/config/changes"))
    finally:
        zk.stop()
        zk.close()

    def retention_on(broker) -> str:
        one = AdminClient({"bootstrap.servers": broker.bootstrap})
        (f,) = one.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "grow")], request_timeout=10).values()
        return f.result(15)["retention.ms"].value
    wait_until("every broker to serve the new retention.ms",
               lambda: all(retention_on(b) == "3600000" for b in cluster.brokers.values()))
    for f in admin.create_partitions([NewPartitions("grow", 4)], request_timeout=20).values():
        f.result(30)
    wait_until("four partitions with leaders on every broker", lambda: all(
        sorted(p for p, st in _partitions(_metadata(b.port, "grow")).items() if st[1] > 0) == [0, 1, 2, 3]
        for b in cluster.brokers.values()))
    assert all(len(st[3]) == 2 for st in _partitions(_metadata(cluster.brokers[2].port, "grow")).values())


def test_producer_ids_are_unique_across_brokers(cluster):
    from kafka.protocol.producer import InitProducerIdRequest
    ids = []
    for b in cluster.brokers.values():
        with WireClient("127.0.0.1", b.port) as c:
            for _ in range(3):
                r = c.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                    producer_id=-1, producer_epoch=-1), 4)
                assert r.error_code == 0
                ids.append(r.producer_id)
    assert len(set(ids)) == 9


def test_a_joining_broker_answers_metadata_once_it_knows_the_cluster(tmp_path):
    """A broker serves before the controller's first UpdateMetadata reaches it (that request comes in on the
    same listener). A client asking in that window waits for the cluster's view rather than hearing "no
    controller, no other brokers", which left librdkafka's admin client waiting out its whole timeout."""
    import signal
    import threading
    from cluster_fixtures import metadata, registered, require_zookeeper
    from tidelake.cluster.local_cluster import LocalCluster
    require_zookeeper()
    # a long session: the paused controller must keep its session (and its controllership)
    cluster = LocalCluster(tmp_path / "cluster", 2, configs={"zookeeper.session.timeout.ms": "30000"})
    cluster.root.mkdir(parents=True)
    cluster.zookeeper.start()
    answers: list = []
    try:
        cluster.start_broker(1)
        wait_until("broker 1 to be the controller", lambda: metadata(cluster.brokers[1]).controller_id == 1, 60)
        cluster.signal_broker(1, signal.SIGSTOP)
        try:
            cluster.start_broker(2)
            wait_until("broker 2 registered", lambda: "2" in registered(cluster), 60)
            asking = threading.Thread(target=lambda: answers.append(metadata(cluster.brokers[2])), daemon=True)
            asking.start()
            asking.join(1.0)
            # the controller is paused: nothing can have told broker 2 who is in the cluster yet
            assert asking.is_alive(), f"broker 2 answered before it knew the cluster: {answers}"
        finally:
            cluster.signal_broker(1, signal.SIGCONT)
        asking.join(30)
        (md,) = answers
        assert md.controller_id == 1
        assert sorted(b.node_id for b in md.brokers) == [1, 2]
    finally:
        cluster.stop()


def test_a_request_for_an_earlier_broker_epoch_is_refused(cluster):
    """KIP-380: the broker epoch is the czxid of /brokers/ids/<id>; a controller request carrying an older one was
    meant for an earlier process of the broker."""
    b = cluster.brokers[2]
    wait_until("broker 2 to hear from the controller", lambda: _metadata(b.port, "absent").controller_id > 0)
    zk = _zk(cluster)
    try:
        epoch = int(zk.get("/controller_epoch")[0])
        czxid = zk.exists("/brokers/ids/2").czxid
    finally:
        zk.stop()
        zk.close()

    def leader_and_isr(broker_epoch: int):
        return LeaderAndIsrRequest(controller_id=9, controller_epoch=epoch, max_broker_epoch=broker_epoch,
                                   topic_states=[], live_leaders=[])
    with WireClient("127.0.0.1", b.port) as c:
        assert c.request(leader_and_isr(czxid - 1), 5).error_code == errors.StaleBrokerEpoch.code
        assert c.request(leader_and_isr(czxid), 5).error_code == errors.NONE
        assert c.request(leader_and_isr(-1), 5).error_code == errors.NONE  # a controller that sends no epoch
    # and the controller refuses a controlled shutdown from an earlier process of broker 2
    controller = cluster.brokers[_metadata(b.port, "absent").controller_id]
    with WireClient("127.0.0.1", controller.port) as c:
        r = c.request(ControlledShutdownRequest(broker_id=2, broker_epoch=czxid - 1), 2)
    assert r.error_code == errors.StaleBrokerEpoch.code and not r.remaining_partitions
