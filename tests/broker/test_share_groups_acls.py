"""Share groups under ACLs, as Kafka authorizes them: READ on the group for ShareGroupHeartbeat / ShareFetch
/ ShareAcknowledge, DESCRIBE on each subscribed topic, READ on each topic fetched or acknowledged."""
from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType, ResourceType

from security_fixtures import ADMIN, confluent_config, secured_broker
from tls_certs import make_pki
from tidelake.protocol.messages import (ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupHeartbeatRequest)
from txn_helpers import raw_request

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
ANONYMOUS = "User:ANONYMOUS"
GROUP_DENIED, TOPIC_DENIED = 30, 29


@pytest.fixture
def env(tmp_path):
    pki = make_pki(tmp_path / "pki")
    with secured_broker(tmp_path / "data", pki, **AUTHORIZER) as b:
        admin = AdminClient(confluent_config(b, pki, ADMIN))
        for f in admin.create_topics([NewTopic("described", 1)]).values():
            f.result(20)
        acls = [AclBinding(rtype, name, ResourcePatternType.LITERAL, ANONYMOUS, "*", op, AclPermissionType.ALLOW)
                for rtype, name, op in ((ResourceType.GROUP, "allowed", AclOperation.READ),
                                        (ResourceType.TOPIC, "described", AclOperation.DESCRIBE))]
        for f in admin.create_acls(acls).values():
            f.result(20)
        yield b


def heartbeat(b, group: str, topics: list[str], epoch: int = 0):
    return raw_request(b.bootstrap_for("PLAINTEXT"), ShareGroupHeartbeatRequest(
        group_id=group, member_id="m-1", member_epoch=epoch, rack_id=None,
        subscribed_topic_names=topics if epoch == 0 else None), 1)


def assigned(b, group: str, answer):
    """Heartbeat until the member is assigned a partition (once its share state is initialized, as Kafka)."""
    deadline = time.monotonic() + 30
    while not (answer.assignment and answer.assignment.topic_partitions):
        assert time.monotonic() < deadline, "no assignment within 30 s"
        time.sleep(0.1)
        answer = heartbeat(b, group, [], answer.member_epoch)
        assert answer.error_code == 0
    return answer.assignment.topic_partitions


def test_share_group_apis_need_group_read_and_topic_read(env):
    b = env
    assert heartbeat(b, "forbidden", ["described"]).error_code == GROUP_DENIED
    joined = heartbeat(b, "allowed", ["described"])
    assert joined.error_code == 0
    [tp] = assigned(b, "allowed", joined)
    F = ShareFetchRequest.FetchTopic
    fetch = ShareFetchRequest(group_id="allowed", member_id="m-1", share_session_epoch=0, max_wait_ms=0,
                              min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10,
                              topics=[F(topic_id=tp.topic_id, partitions=[F.FetchPartition(
                                  partition_index=0, acknowledgement_batches=[])])], forgotten_topics_data=[])
    r = raw_request(b.bootstrap_for("PLAINTEXT"), fetch, 1)
    assert r.error_code == 0
    assert [(p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [(0, TOPIC_DENIED)]
    fetch.group_id = "forbidden"
    assert raw_request(b.bootstrap_for("PLAINTEXT"), fetch, 1).error_code == GROUP_DENIED
    A = ShareAcknowledgeRequest.AcknowledgeTopic
    ack = ShareAcknowledgeRequest(group_id="forbidden", member_id="m-1", share_session_epoch=1, topics=[
        A(topic_id=tp.topic_id, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[])])])
    assert raw_request(b.bootstrap_for("PLAINTEXT"), ack, 1).error_code == GROUP_DENIED
