"""Streams groups under ACLs, as Kafka authorizes StreamsGroupHeartbeat: READ on the group, DESCRIBE on each source
topic of the topology, and CREATE (on the cluster or the topic) for the internal topics the coordinator creates:
without it the member is told "Unauthorized to CREATE on topics ..." and the topic is not created."""
from __future__ import annotations

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType, ResourceType

from security_fixtures import ADMIN, confluent_config, secured_broker
from tls_certs import make_pki
from tidelake.protocol.messages import StreamsGroupHeartbeatRequest
from txn_helpers import raw_request

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
ANONYMOUS = "User:ANONYMOUS"
GROUP_DENIED, TOPIC_DENIED = 30, 29
MISSING_INTERNAL_TOPICS = 3
CHANGELOG = "app-store-changelog"
H = StreamsGroupHeartbeatRequest


def allow(admin: AdminClient, *grants) -> None:
    acls = [AclBinding(rtype, name, ResourcePatternType.LITERAL, ANONYMOUS, "*", op, AclPermissionType.ALLOW)
            for rtype, name, op in grants]
    for f in admin.create_acls(acls).values():
        f.result(20)


@pytest.fixture
def env(tmp_path):
    pki = make_pki(tmp_path / "pki")
    with secured_broker(tmp_path / "data", pki, **AUTHORIZER) as b:
        admin = AdminClient(confluent_config(b, pki, ADMIN))
        for f in admin.create_topics([NewTopic("in", 2), NewTopic("secret", 2)]).values():
            f.result(20)
        allow(admin, (ResourceType.GROUP, "allowed", AclOperation.READ),
              (ResourceType.TOPIC, "in", AclOperation.DESCRIBE))
        yield b, admin


def join(b, group: str, source: str, member: str = "m-1"):
    S = H.Topology.Subtopology
    topology = H.Topology(epoch=0, subtopologies=[S(
        subtopology_id="0", source_topics=[source], source_topic_regex=[], repartition_sink_topics=[],
        repartition_source_topics=[], copartition_groups=[],
        state_changelog_topics=[S.TopicInfo(name=CHANGELOG, partitions=0, replication_factor=0, topic_configs=[])])])
    return raw_request(b.bootstrap_for("PLAINTEXT"), H(
        group_id=group, member_id=member, member_epoch=0, endpoint_information_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000, topology=topology, active_tasks=[], standby_tasks=[], warmup_tasks=[],
        process_id="p", user_endpoint=None, client_tags=[], task_offsets=None, task_end_offsets=None,
        shutdown_application=False), 1)


def test_heartbeat_needs_group_read_source_describe_and_create_for_internal_topics(env):
    b, admin = env
    assert join(b, "forbidden", "in").error_code == GROUP_DENIED
    assert join(b, "allowed", "secret").error_code == TOPIC_DENIED
    r = join(b, "allowed", "in")
    assert r.error_code == 0 and r.active_tasks == []
    assert [(s.status_code, s.status_detail) for s in r.status] == [
        (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: [{CHANGELOG}]"),
        (MISSING_INTERNAL_TOPICS, f"Unauthorized to CREATE on topics {CHANGELOG}.")]
    assert CHANGELOG not in admin.list_topics(timeout=10).topics
    allow(admin, (ResourceType.TOPIC, CHANGELOG, AclOperation.CREATE))
    r = join(b, "allowed", "in")                       # (re)joining: the coordinator creates it now
    assert [s.status_detail for s in r.status] == [f"Internal topics are missing: [{CHANGELOG}]"]
    assert admin.list_topics(timeout=10).topics[CHANGELOG].partitions.keys() == {0, 1}
    r = join(b, "allowed", "in")
    assert r.error_code == 0 and r.status == [] and [(t.subtopology_id, sorted(t.partitions))
                                                     for t in r.active_tasks] == [("0", [0, 1])]
