"""Client quotas (KIP-546): AlterClientQuotas (API 49) stores quotas of users, client ids and ips (their default
entities too) with Kafka's checks and messages, validate_only changing nothing; DescribeClientQuotas answers them
through Kafka's filters (exact, default, any, strict) and refuses the filters Kafka refuses; the table survives a
restart; the Java Admin client reads them; with an authorizer Alter needs ALTER_CONFIGS and Describe
DESCRIBE_CONFIGS on the cluster. (Kafka 4.4's kafka-configs against both brokers: tests/kafka44/.)"""
from __future__ import annotations

import subprocess

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest as ACQ
from kafka.protocol.admin import DescribeClientQuotasRequest as DCQ

from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker
from tidelake.protocol.wire_client import WireClient

INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
EXACT, DEFAULT, ANY = 0, 1, 2
C = DCQ.ComponentData


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker whose quotas the module's tests set: each test names its own entities."""
    with EmbeddedBroker(tmp_path_factory.mktemp("quotas")) as b:
        yield b


def describe(broker, components, strict=False, version=1):
    with WireClient.connect(broker.bootstrap_servers) as c:
        return c.request(DCQ(components=components, strict=strict), version)


def entries(response) -> dict:
    """A DescribeClientQuotas answer as {((type, name), ...): {key: value}}."""
    assert response.error_code == 0, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def alter(broker, *entries_, validate_only=False, version=1) -> list[tuple]:
    """AlterClientQuotas of ``(entity pairs, {key: value or None to remove})`` entries: [(entity, code, message)]."""
    request = ACQ(entries=[ACQ.EntryData(entity=[ACQ.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in pairs],
                                         ops=[ACQ.EntryData.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
                                              for k, v in ops])
                           for pairs, ops in entries_], validate_only=validate_only)
    with WireClient.connect(broker.bootstrap_servers) as c:
        r = c.request(request, version)
    return [(tuple((e.entity_type, e.entity_name) for e in entry.entity), entry.error_code, entry.error_message)
            for entry in r.entries]


def test_quotas_set_removed_and_described_by_filter(broker):
    alice, default_user = (("user", "alice"),), (("user", None),)
    alice_app = (("client-id", "app"), ("user", "alice"))
    results = alter(broker, (alice, [("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2048.0)]),
                    (default_user, [("request_percentage", 50.0)]),
                    ((("user", "alice"), ("client-id", "app")), [("producer_byte_rate", 4096.0)]),
                    ((("client-id", None),), [("controller_mutation_rate", 2.5)]))
    assert set(results) == {(alice, 0, None), (default_user, 0, None), (alice_app, 0, None),
                            ((("client-id", None),), 0, None)}
    assert entries(describe(broker, [C(entity_type="user", match_type=EXACT, match="alice")])) == {
        alice: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
        alice_app: {"producer_byte_rate": 4096.0}}
    assert entries(describe(broker, [C(entity_type="user", match_type=EXACT, match="alice")], strict=True)) == {
        alice: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}}
    assert entries(describe(broker, [C(entity_type="user", match_type=DEFAULT, match=None)])) == {
        default_user: {"request_percentage": 50.0}}
    assert set(entries(describe(broker, [C(entity_type="user", match_type=ANY, match=None)]))) == {
        alice, default_user, alice_app}
    assert set(entries(describe(broker, [C(entity_type="client-id", match_type=ANY, match=None)], strict=True))) == {
        (("client-id", None),)}
    assert set(entries(describe(broker, [C(entity_type="user", match_type=ANY, match=None),
                                         C(entity_type="client-id", match_type=ANY, match=None)]))) == {alice_app}

    # a removal of the entity's last key removes the entity; removing a key never set is no change
    assert alter(broker, (alice_app, [("producer_byte_rate", None), ("request_percentage", None)])) == [
        (alice_app, 0, None)]
    assert alter(broker, (alice, [("consumer_byte_rate", None)])) == [(alice, 0, None)]
    assert entries(describe(broker, [C(entity_type="user", match_type=EXACT, match="alice")])) == {
        alice: {"producer_byte_rate": 1024.0}}


def test_validate_only_changes_nothing(broker):
    bob = (("user", "bob"),)
    assert alter(broker, (bob, [("producer_byte_rate", 10.0)]), validate_only=True) == [(bob, 0, None)]
    assert entries(describe(broker, [C(entity_type="user", match_type=EXACT, match="bob")])) == {}


def test_ip_quotas(broker):
    ip, default_ip = (("ip", "10.1.2.3"),), (("ip", None),)
    assert set(alter(broker, (ip, [("connection_creation_rate", 10.0)]),
                     (default_ip, [("connection_creation_rate", 100.0)]))) == {(ip, 0, None), (default_ip, 0, None)}
    assert entries(describe(broker, [C(entity_type="ip", match_type=ANY, match=None)])) == {
        ip: {"connection_creation_rate": 10.0}, default_ip: {"connection_creation_rate": 100.0}}


@pytest.mark.parametrize("pairs, ops, message", [
    ((), [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
    ((("group", "g"),), [("producer_byte_rate", 1.0)], "Unhandled client quota entity type: group"),
    ((("user", ""),), [("producer_byte_rate", 1.0)], "Empty user not supported"),
    ((("ip", "10.0.0.1"), ("user", "u")), [("producer_byte_rate", 1.0)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ((("ip", "no-such-host.invalid"),), [("connection_creation_rate", 1.0)],
     "no-such-host.invalid is not a valid IP or resolvable host."),
    ((("user", "u"),), [("connection_creation_rate", 1.0)], "Invalid configuration key connection_creation_rate"),
    ((("ip", "10.0.0.1"),), [("producer_byte_rate", 1.0)], "Invalid configuration key producer_byte_rate"),
    ((("user", "u"),), [("producer_byte_rate", 0.0)], "Quota producer_byte_rate must be greater than 0"),
    ((("user", "u"),), [("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
    ((("user", "u"),), [("producer_byte_rate", 1e19)], "Proposed value for producer_byte_rate is too large for a LONG."),
    ((("ip", "10.0.0.1"),), [("connection_creation_rate", 3e9)],
     "Proposed value for connection_creation_rate is too large for an INT."),
    ((("user", "u"),), [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)],
     "Ignoring duplicate entity ClientQuotaEntity(entries={user=u})"),   # Kafka's answer to a repeated key
])
def test_an_invalid_alteration_is_refused_as_kafka_refuses_it(broker, pairs, ops, message):
    [(_entity, code, got)] = alter(broker, (pairs, ops), version=0)
    assert (code, got) == (INVALID_REQUEST, message)


def test_an_invalid_entity_leaves_the_others_applied(broker):
    carol = (("user", "carol"),)
    results = dict((entity, code) for entity, code, _ in alter(
        broker, (carol, [("producer_byte_rate", 5.0)]), ((("user", "dave"),), [("producer_byte_rate", -1.0)])))
    assert results == {carol: 0, (("user", "dave"),): INVALID_REQUEST}
    assert set(entries(describe(broker, [C(entity_type="user", match_type=EXACT, match="carol")]))) == {carol}
    assert entries(describe(broker, [C(entity_type="user", match_type=EXACT, match="dave")])) == {}


@pytest.mark.parametrize("components, code, reason", [
    ([C(entity_type="group", match_type=0, match="g")], UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([C(entity_type="", match_type=2, match=None)], INVALID_REQUEST, "Invalid empty entity type."),
    ([C(entity_type="user", match_type=0, match=None)], INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([C(entity_type="user", match_type=1, match="alice")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([C(entity_type="user", match_type=2, match="alice")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([C(entity_type="user", match_type=7, match=None)], INVALID_REQUEST, "Unknown match type 7"),
    ([C(entity_type="user", match_type=2, match=None), C(entity_type="user", match_type=1, match=None)],
     INVALID_REQUEST, "Entity type user cannot appear more than once in the filter."),
    ([C(entity_type="ip", match_type=2, match=None), C(entity_type="user", match_type=2, match=None)],
     INVALID_REQUEST, "Invalid entity filter component combination. IP filter component should not be used with "
                      "user or clientId filter component."),
])
def test_a_filter_kafka_refuses_is_refused(broker, components, code, reason):
    r = describe(broker, components, version=0)
    assert (r.error_code, r.error_message, r.entries) == (code, reason, None)


def test_quotas_survive_a_restart(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        alter(b, ((("user", "erin"),), [("consumer_byte_rate", 77.0)]),
              ((("ip", None),), [("connection_creation_rate", 9.0)]))
    with EmbeddedBroker(tmp_path / "data") as b:
        assert entries(describe(b, [])) == {(("user", "erin"),): {"consumer_byte_rate": 77.0},
                                            (("ip", None),): {"connection_creation_rate": 9.0}}


@pytest.mark.java
def test_java_admin_describes_client_quotas(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        r = subprocess.run(java_command("Quotas", b.bootstrap_servers),  # tests/java/Quotas.java
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.split() == ["ALL", "{}", "ALICE", "{}"]
        alter(b, ((("user", "alice"),), [("producer_byte_rate", 1024.0)]),
              ((("user", "bob"),), [("producer_byte_rate", 8.0)]))
        r = subprocess.run(java_command("Quotas", b.bootstrap_servers), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    all_line, alice_line = r.stdout.splitlines()
    assert all_line.startswith("ALL {") and "user=alice" in all_line and "user=bob" in all_line
    assert alice_line == "ALICE {ClientQuotaEntity(entries={user=alice})={producer_byte_rate=1024.0}}"


def test_with_an_authorizer_alter_needs_alter_configs_and_describe_describe_configs(tmp_path):
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with EmbeddedBroker(tmp_path / "data", config=config) as b:  # User:ANONYMOUS has no ACL
        r = describe(b, [])
        assert r.error_code == 31 and not r.entries  # CLUSTER_AUTHORIZATION_FAILED
        assert alter(b, ((("user", "u"),), [("producer_byte_rate", 1.0)])) == [
            ((("user", "u"),), 31, "Cluster authorization failed.")]
