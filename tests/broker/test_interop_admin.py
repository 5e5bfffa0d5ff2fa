"""Admin operations through confluent-kafka's AdminClient and the Java Admin: create (with configs,
validate-only, duplicates, bad replication factor), describe topics and configs (values and sources),
incremental and legacy alter, add partitions (never reduce), delete."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, NewTopic)

from clients import JavaScript, Rec, broker_kinds, consume, produce_confluent, running_broker

RETENTION_MS_DEFAULT = str(7 * 24 * 3600 * 1000)


@pytest.fixture(scope="module", params=broker_kinds())
def bootstrap(request, tmp_path_factory):
    with running_broker(request.param, tmp_path_factory.mktemp(f"admin-{request.param}")) as bs:
        yield bs


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _error_code(future) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(30)
    return info.value.args[0].code()


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource], request_timeout=30)[resource].result(30)


def _partition_count(admin: AdminClient, topic: str) -> int:
    md = admin.list_topics(topic, timeout=30)
    assert md.topics[topic].error is None, md.topics[topic].error
    return len(md.topics[topic].partitions)


def test_confluent_admin_lifecycle(bootstrap: str) -> None:
    admin = _admin(bootstrap)
    topic = "adm-confluent"

    # validate_only creates nothing
    futures = admin.create_topics([NewTopic(topic, 3, 1)], validate_only=True, operation_timeout=30)
    futures[topic].result(30)
    assert topic not in admin.list_topics(timeout=30).topics

    futures = admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "3600000",
                                                                  "cleanup.policy": "delete"})],
                                  operation_timeout=30)
    futures[topic].result(30)
    assert _error_code(admin.create_topics([NewTopic(topic, 3, 1)])[topic]) == KafkaError.TOPIC_ALREADY_EXISTS
    assert _error_code(admin.create_topics([NewTopic("adm-rf3", 1, 3)])["adm-rf3"]) == \
        KafkaError.INVALID_REPLICATION_FACTOR

    md = admin.list_topics(timeout=30)
    broker_ids = set(md.brokers)
    partitions = md.topics[topic].partitions
    assert sorted(partitions) == [0, 1, 2]
    assert all(p.leader in broker_ids and p.error is None for p in partitions.values())

    # describe configs: the set value is a dynamic topic config; others are defaults with their values
    configs = _topic_configs(admin, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["retention.ms"].is_default
    for name in ("segment.bytes", "retention.bytes", "max.message.bytes", "message.timestamp.type",
                 "min.insync.replicas", "segment.ms"):
        assert name in configs, f"{name} missing from DescribeConfigs"
        assert configs[name].source in (ConfigSource.DEFAULT_CONFIG.value, ConfigSource.STATIC_BROKER_CONFIG.value)
    assert configs["retention.bytes"].value == "-1"
    assert configs["message.timestamp.type"].value == "CreateTime"

    # incremental alter: SET one, DELETE another (back to its default)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", "10485760", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([resource])[resource].result(30)
    configs = _topic_configs(admin, topic)
    assert configs["retention.bytes"].value == "10485760"
    assert configs["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == RETENTION_MS_DEFAULT
    assert configs["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    # legacy AlterConfigs replaces the whole set of dynamic configs
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"segment.ms": "3600000"})
    admin.alter_configs([resource])[resource].result(30)
    configs = _topic_configs(admin, topic)
    assert configs["segment.ms"].value == "3600000"
    assert configs["retention.bytes"].value == "-1"

    # unknown config name is rejected, nothing changes
    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    assert _error_code(admin.incremental_alter_configs([bad])[bad]) == KafkaError.INVALID_CONFIG

    # add partitions; a new partition takes records; reducing is refused
    admin.create_partitions([NewPartitions(topic, 5)], operation_timeout=30)[topic].result(30)
    assert _partition_count(admin, topic) == 5
    acked = produce_confluent(bootstrap, topic, [Rec(4, b"k", b"on the new partition", 1_700_000_000_000)])
    assert (acked[0].partition, acked[0].offset) == (4, 0)
    assert consume("confluent", bootstrap, {(topic, 4): 1})[(topic, 4)][0].value == b"on the new partition"
    assert _error_code(admin.create_partitions([NewPartitions(topic, 2)])[topic]) == KafkaError.INVALID_PARTITIONS
    assert _partition_count(admin, topic) == 5

    # delete
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    assert topic not in admin.list_topics(timeout=30).topics
    assert _error_code(admin.delete_topics([topic], operation_timeout=30)[topic]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.java
def test_java_admin_lifecycle(bootstrap: str) -> None:
    topic = "adm-java"
    script = (JavaScript()
              .create(topic, 2, {"retention.ms": "3600000"})   # 0
              .create(topic, 2)                                # 1 duplicate
              .describe(topic)                                 # 2
              .configs(topic)                                  # 3
              .alter(topic, {"retention.bytes": "1048576"}, delete=["retention.ms"])  # 4
              .configs(topic)                                  # 5
              .partitions(topic, 4)                            # 6
              .partitions(topic, 3)                            # 7 reduce: refused
              .describe(topic)                                 # 8
              .delete(topic)                                   # 9
              .topics())                                       # 10
    r = script.run(bootstrap)
    r.output(0)
    assert r.error(1) and r.error(1)[2].endswith("TopicExistsException"), r.outputs[1]
    assert [row[0] for row in r.rows(2, "partition")] == ["0", "1"]
    assert all(int(row[1]) >= 0 for row in r.rows(2, "partition")), "every partition has a leader"

    configs = {row[0]: row for row in r.rows(3, "config")}
    assert configs["retention.ms"][1:3] == ["3600000", "DYNAMIC_TOPIC_CONFIG"]
    assert configs["segment.bytes"][2] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")

    r.output(4)
    configs = {row[0]: row for row in r.rows(5, "config")}
    assert configs["retention.bytes"][1:3] == ["1048576", "DYNAMIC_TOPIC_CONFIG"]
    assert configs["retention.ms"][1] == RETENTION_MS_DEFAULT
    assert configs["retention.ms"][2] != "DYNAMIC_TOPIC_CONFIG"

    r.output(6)
    assert r.error(7) and r.error(7)[2].endswith("InvalidPartitionsException"), r.outputs[7]
    assert [row[0] for row in r.rows(8, "partition")] == ["0", "1", "2", "3"]
    r.output(9)
    assert topic not in [row[0] for row in r.rows(10, "topic")]
