"""Per-item authorization, one case per resource type, over the wire: the dispatcher answers the denied
items with their resource's *_AUTHORIZATION_FAILED code and hands the permitted ones to the handler (whose
own answer shows it saw them), in one response."""
from __future__ import annotations

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)
from kafka.protocol.admin import (DescribeConfigsRequest, DescribeGroupsRequest, DescribeTransactionsRequest)
from kafka.protocol.consumer import ListOffsetsRequest

from security_fixtures import ADMIN, confluent_config, secured_broker
from tls_certs import make_pki
from txn_helpers import raw_request
from tidelake import errors

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
ANONYMOUS = "User:ANONYMOUS"  # the PLAINTEXT listener's principal
OK = errors.NONE


def _allow(rtype, name, op) -> AclBinding:
    return AclBinding(rtype, name, ResourcePatternType.LITERAL, ANONYMOUS, "*", op, AclPermissionType.ALLOW)


@pytest.fixture(scope="module")
def plaintext(tmp_path_factory):
    """A broker with an authorizer; ANONYMOUS may describe topic "seen", group "visible" and transactional
    id "txn-visible", and nothing else."""
    tmp = tmp_path_factory.mktemp("per_item")
    pki = make_pki(tmp / "pki")
    with secured_broker(tmp / "data", pki, **AUTHORIZER) as b:
        admin = AdminClient(confluent_config(b, pki, ADMIN))
        for f in admin.create_topics([NewTopic("seen", 1), NewTopic("unseen", 1)]).values():
            f.result(20)
        for f in admin.create_acls([_allow(ResourceType.TOPIC, "seen", AclOperation.DESCRIBE),
                                    _allow(ResourceType.TOPIC, "seen", AclOperation.DESCRIBE_CONFIGS),
                                    _allow(ResourceType.GROUP, "visible", AclOperation.DESCRIBE),
                                    _allow(ResourceType.TRANSACTIONAL_ID, "txn-visible", AclOperation.DESCRIBE),
                                    ]).values():
            f.result(20)
        yield b.bootstrap_for("PLAINTEXT")


def test_topics(plaintext):
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        T(name=n, partitions=[P(partition_index=0, current_leader_epoch=-1, timestamp=-1)]) for n in ("unseen", "seen")])
    response = raw_request(plaintext, request, 7)
    codes = {t.name: [(p.partition_index, p.error_code, p.offset) for p in t.partitions] for t in response.topics}
    assert codes == {"seen": [(0, OK, 0)], "unseen": [(0, errors.TopicAuthorizationFailed.code, -1)]}


def test_groups(plaintext):
    response = raw_request(plaintext, DescribeGroupsRequest(groups=["hidden", "visible"],
                                                            include_authorized_operations=False), 5)
    # the permitted group reached the coordinator: an unknown group is DEAD, with no error
    answers = {g.group_id: (g.error_code, g.group_state) for g in response.groups}
    assert answers == {"visible": (OK, "Dead"), "hidden": (errors.GroupAuthorizationFailed.code, "")}


def test_transactional_ids(plaintext):
    response = raw_request(plaintext, DescribeTransactionsRequest(transactional_ids=["txn-hidden", "txn-visible"]), 0)
    codes = {t.transactional_id: t.error_code for t in response.transaction_states}
    # the permitted id reached the coordinator, which has no such transaction
    assert codes == {"txn-visible": errors.TransactionalIdNotFound.code,
                     "txn-hidden": errors.TransactionalIdAuthorizationFailed.code}


def test_cluster_through_broker_configs(plaintext):
    R = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[R(resource_type=4, resource_name="1", configuration_keys=None),
                                                R(resource_type=2, resource_name="seen", configuration_keys=None)],
                                     include_synonyms=False, include_documentation=False)
    response = raw_request(plaintext, request, 4)
    answers = {(r.resource_type, r.resource_name): (r.error_code, bool(r.configs)) for r in response.results}
    assert answers == {(2, "seen"): (OK, True), (4, "1"): (errors.ClusterAuthorizationFailed.code, False)}
