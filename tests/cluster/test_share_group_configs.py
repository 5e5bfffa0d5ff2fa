"""A share group's ``share.*`` configs in a 3-broker ZooKeeper cluster: set through one broker, every broker describes
them and starts the group's share-partitions by them (a partition led by another broker starts at ``earliest`` as
asked), and a restarted broker reads them back from ZooKeeper."""
from __future__ import annotations

from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from cluster_fixtures import metadata, produce, start_cluster, wait_until
from tidelake.protocol.wire_client import WireClient

TOPIC, GROUP = "jobs", "early/birds"  # a '/' in the group id: its znode name is encoded
RESOURCE_GROUP, SET = 32, 0


def alter_group(port: int, configs: dict[str, str]) -> int:
    """IncrementalAlterConfigs SET on GROUP's resource, sent to the broker on ``port`` itself; its error code."""
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    with WireClient("127.0.0.1", port) as c:
        r = c.request(IncrementalAlterConfigsRequest(resources=[R(
            resource_type=RESOURCE_GROUP, resource_name=GROUP, configs=[
                R.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in configs.items()])],
            validate_only=False), 1)
    return r.responses[0].error_code


def described(port: int) -> dict[str, tuple[str, bool]]:
    """DescribeConfigs of GROUP's resource at the broker on ``port``: (value, is default) by name."""
    R = DescribeConfigsRequest
    with WireClient("127.0.0.1", port) as c:
        r = c.request(R(resources=[R.DescribeConfigsResource(resource_type=RESOURCE_GROUP, resource_name=GROUP,
                                                              configuration_keys=None)],
                        include_synonyms=False, include_documentation=False), 4)
    assert r.results[0].error_code == 0, r.results[0].error_message
    return {c.name: (c.value, c.is_default) for c in r.results[0].configs}


def test_a_groups_configs_set_through_one_broker_reach_every_broker_and_a_restarted_one(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3, **{"offsets.topic.replication.factor": "3",
                                                  "share.coordinator.state.topic.replication.factor": "3",
                                                  "share.coordinator.state.topic.num.partitions": "3",
                                                  "group.share.heartbeat.interval.ms": "500"})
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        # broker 1 leads no partition of the topic: the config is set there, the share-partitions start elsewhere
        new = NewTopic(TOPIC, num_partitions=2, replica_assignment=[[2, 3, 1], [3, 2, 1]])
        for f in admin.create_topics([new]).values():
            f.result(30)
        wait_until(f"{TOPIC}'s leaders on every broker", lambda: all(
            {p.partition_index: p.leader_id for p in metadata(b, [TOPIC]).topics[0].partitions} == {0: 2, 1: 3}
            for b in cluster.brokers.values()), 60)
        assert alter_group(cluster.brokers[1].port, {"share.auto.offset.reset": "earliest",
                                                     "share.record.lock.duration.ms": "7000"}) == 0
        wanted = {"share.auto.offset.reset": ("earliest", False), "share.record.lock.duration.ms": ("7000", False)}
        for b in cluster.brokers.values():
            wait_until(f"broker {b.broker_id} describing {GROUP}'s configs", lambda b=b: all(
                described(b.port)[k] == v for k, v in wanted.items()), 30)
        acked = produce(cluster, TOPIC, 40)  # before any consumer: only "earliest" delivers these
        assert {p for p, _o in acked} == {0, 1}
        consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP})
        consumer.subscribe([TOPIC])
        got: set[bytes] = set()
        try:
            wait_until("every record produced before the consumer came", lambda: got.update(
                m.value() for m in consumer.poll(0.5) if m.error() is None) or got >= set(acked.values()), 60)
        finally:
            consumer.close()
        assert got == set(acked.values())
        # a restarted broker reads them back from ZooKeeper; a removal reaches every broker too
        cluster.restart_broker(3)
        assert all(described(cluster.brokers[3].port)[k] == v for k, v in wanted.items())
        assert alter_group(cluster.brokers[2].port, {"share.record.lock.duration.ms": "9000"}) == 0
        for b in cluster.brokers.values():
            wait_until(f"broker {b.broker_id} describing the changed lock duration", lambda b=b: described(
                b.port)["share.record.lock.duration.ms"] == ("9000", False), 30)
    finally:
        cluster.stop()
