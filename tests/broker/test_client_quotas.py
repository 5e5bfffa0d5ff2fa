"""DescribeClientQuotas (API 48): the Java Admin client's describeClientQuotas gets Kafka's answer for a cluster
without quotas; a filter Kafka refuses is INVALID_REQUEST with the reason; with an authorizer it needs
DESCRIBE_CONFIGS on the cluster."""
from __future__ import annotations

import subprocess

import pytest
from kafka.protocol.admin import DescribeClientQuotasRequest as DCQ

from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker
from tidelake.protocol.wire_client import WireClient

INVALID_REQUEST = 42
C = DCQ.ComponentData


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("quotas")) as b:
        yield b


def describe(broker, components, strict=False, version=1):
    with WireClient.connect(broker.bootstrap_servers) as c:
        return c.request(DCQ(components=components, strict=strict), version)


def test_a_valid_filter_matches_no_quotas(broker):
    for components in ([], [C(entity_type="user", match_type=0, match="alice")],
                       [C(entity_type="user", match_type=2, match=None), C(entity_type="client-id", match_type=1,
                                                                           match=None)]):
        r = describe(broker, components)
        assert (r.error_code, r.entries) == (0, [])


@pytest.mark.parametrize("components, reason", [
    ([C(entity_type="group", match_type=0, match="g")], "unknown entity type 'group'"),
    ([C(entity_type="user", match_type=0, match=None)], "an exact match needs a name"),
    ([C(entity_type="user", match_type=1, match="alice")], "match type 1 takes no name"),
    ([C(entity_type="user", match_type=2, match=None), C(entity_type="user", match_type=1, match=None)], "duplicate"),
    ([C(entity_type="ip", match_type=2, match=None), C(entity_type="user", match_type=2, match=None)],
     "ip cannot be combined"),
])
def test_a_filter_kafka_refuses_is_an_invalid_request(broker, components, reason):
    r = describe(broker, components, version=0)
    assert r.error_code == INVALID_REQUEST and reason in r.error_message and r.entries is None




@pytest.mark.java
def test_java_admin_describes_client_quotas(broker, tmp_path):
    r = subprocess.run(java_command("Quotas", broker.bootstrap_servers),  # tests/java/Quotas.java
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["ALL", "{}", "ALICE", "{}"]


def test_with_an_authorizer_it_needs_describe_configs_on_the_cluster(tmp_path):
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with EmbeddedBroker(tmp_path / "data", config=config) as b:  # User:ANONYMOUS has no ACL
        r = describe(b, [])
    assert r.error_code == 31 and not r.entries  # CLUSTER_AUTHORIZATION_FAILED
