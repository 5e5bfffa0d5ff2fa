"""DescribeQuorum (API 55) and UpdateFeatures (API 57) on a broker alone: itself the metadata quorum's one voter
and leader; group.version and share.version finalized at 1 beside transaction.version; transaction.version moved
by UpdateFeatures with Kafka's checks and messages, kept across a restart, its epoch growing. (Kafka 4.4's
kafka-metadata-quorum and kafka-features against both brokers: tests/kafka44/test_tidelake_on_kafka44.py.)"""
from __future__ import annotations

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeConfigsRequest
from kafka.protocol.admin import DescribeQuorumRequest as DQ
from kafka.protocol.admin import UpdateFeaturesRequest as UF
from kafka.protocol.metadata import ApiVersionsRequest

from tidelake.broker import EmbeddedBroker
from tidelake.protocol.wire_client import WireClient

UNKNOWN_TOPIC_OR_PARTITION, INVALID_UPDATE_VERSION = 3, 95
UPGRADE, SAFE_DOWNGRADE = 1, 2


def request(bootstrap: str, message, version: int):
    with WireClient.connect(bootstrap) as c:
        return c.request(message, version)


def features(bootstrap: str, version: int = 4) -> tuple[dict, dict, int]:
    r = request(bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"), version)
    return ({f.name: (f.min_version, f.max_version) for f in r.supported_features},
            {f.name: f.max_version_level for f in r.finalized_features}, r.finalized_features_epoch)


def update(bootstrap: str, feature: str, level: int, upgrade_type: int = UPGRADE, validate_only=False, version=2):
    return request(bootstrap, UF(timeout_ms=60000, validate_only=validate_only, feature_updates=[
        UF.FeatureUpdateKey(feature=feature, max_version_level=level, allow_downgrade=upgrade_type != UPGRADE,
                            upgrade_type=upgrade_type)]), version)


def describe_quorum(bootstrap: str, topics, version=2):
    return request(bootstrap, DQ(topics=[DQ.TopicData(topic_name=t, partitions=[DQ.TopicData.PartitionData(
        partition_index=p) for p in ps]) for t, ps in topics]), version)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker for the module: its tests change no feature level (the one that does has its own)."""
    with EmbeddedBroker(tmp_path_factory.mktemp("features")) as b:
        yield b


def test_a_broker_alone_is_its_quorums_one_voter(broker):
    r = describe_quorum(broker.bootstrap_servers, [("__cluster_metadata", [0])])
    [topic] = r.topics
    [p] = topic.partitions
    assert (r.error_code, topic.topic_name, p.partition_index, p.error_code, p.leader_id, p.leader_epoch) == (
        0, "__cluster_metadata", 0, 0, 1, 1)
    [voter] = p.current_voters
    assert voter.replica_id == 1 and voter.log_end_offset == p.high_watermark >= 0 and p.observers == []
    assert voter.last_fetch_timestamp > 0 and voter.last_caught_up_timestamp > 0
    [node] = r.nodes
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    assert [(node.node_id, listener.name, listener.host, listener.port) for listener in node.listeners] == [
        (1, "PLAINTEXT", host, int(port))]

    # the high watermark counts the metadata states written: a new topic is one more
    with WireClient.connect(broker.bootstrap_servers) as c:
        c.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="q", num_partitions=1, replication_factor=1, assignments=[], configs=[])], timeout_ms=10000,
            validate_only=False), 5)
    again = describe_quorum(broker.bootstrap_servers, [("__cluster_metadata", [0])], version=0)
    assert again.topics[0].partitions[0].high_watermark > p.high_watermark


def test_describe_quorum_of_another_partition_is_unknown(broker):
    r = describe_quorum(broker.bootstrap_servers, [("__cluster_metadata", [1]), ("other", [0])])
    assert [(t.topic_name, p.partition_index, p.error_code, p.error_message) for t in r.topics for p in t.partitions] == [
        ("__cluster_metadata", 1, UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        ("other", 0, UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]


def test_features_advertised(broker):
    supported, finalized, epoch = features(broker.bootstrap_servers)
    assert supported == {"transaction.version": (0, 2), "group.version": (1, 1), "share.version": (1, 1),
                         "streams.version": (0, 1)}
    assert finalized == {"transaction.version": 2, "group.version": 1, "share.version": 1,
                         "streams.version": 1} and epoch >= 0
    # below v4 a feature supported from 0 is left out, as Kafka 4.x leaves it out (older clients cannot read it)
    assert features(broker.bootstrap_servers, version=3)[0] == {"group.version": (1, 1), "share.version": (1, 1)}


@pytest.mark.parametrize("feature, level, upgrade_type, reason", [
    ("transaction.version", 1, UPGRADE, "Can't downgrade the version of this feature without setting the upgrade "
                                        "type to either safe or unsafe downgrade."),
    ("group.version", 2, UPGRADE, "Local controller 1 only supports versions 1-1"),
    ("share.version", 0, SAFE_DOWNGRADE, "Local controller 1 only supports versions 1-1"),
    ("metadata.version", 27, UPGRADE, "Local controller 1 does not support this feature."),
    ("transaction.version", -1, SAFE_DOWNGRADE, "A feature version cannot be less than 0."),
    ("transaction.version", 2, 7, "The controller does not support the given upgrade type."),
    ("streams.version", 0, SAFE_DOWNGRADE, "tidelake runs streams.version at level 1 only"),
])
def test_update_features_refused_as_kafka_refuses(broker, feature, level, upgrade_type, reason):
    r = update(broker.bootstrap_servers, feature, level, upgrade_type)
    assert (r.error_code, r.error_message) == (
        INVALID_UPDATE_VERSION, "The update failed for all features since the following feature had an error: "
                                f"Invalid update version {level} for feature {feature}. {reason}")
    assert features(broker.bootstrap_servers)[1]["transaction.version"] == 2


def test_transaction_version_downgraded_and_upgraded_across_a_restart(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        _, _, epoch = features(b.bootstrap_servers)
        r = update(b.bootstrap_servers, "transaction.version", 1, SAFE_DOWNGRADE, validate_only=True)
        assert (r.error_code, features(b.bootstrap_servers)[1]["transaction.version"]) == (0, 2)
        r = update(b.bootstrap_servers, "transaction.version", 1, SAFE_DOWNGRADE, version=1)
        assert (r.error_code, [(x.feature, x.error_code) for x in r.results]) == (0, [("transaction.version", 0)])
        _, finalized, new_epoch = features(b.bootstrap_servers)
        assert finalized["transaction.version"] == 1 and new_epoch > epoch   # clients keep the newest epoch's
        # a feature level is no config: the transaction.version config still reads its default (as on Kafka)
        config_of_broker_1 = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=4, resource_name="1", configuration_keys=["transaction.version"])
        [described] = request(b.bootstrap_servers, DescribeConfigsRequest(resources=[config_of_broker_1],
                                                                          include_synonyms=False), 1).results
        assert [(c.name, c.value, c.config_source) for c in described.configs] == [("transaction.version", "2", 5)]
        assert update(b.bootstrap_servers, "transaction.version", 3).error_code == INVALID_UPDATE_VERSION
    with EmbeddedBroker(tmp_path / "data") as b:
        assert features(b.bootstrap_servers)[1]["transaction.version"] == 1
        assert update(b.bootstrap_servers, "transaction.version", 2).error_code == 0
        assert features(b.bootstrap_servers)[1]["transaction.version"] == 2
