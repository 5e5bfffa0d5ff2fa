"""ACLs with real clients: confluent-kafka's AdminClient creates, describes and deletes them;
produce, consume with a group, metadata and admin calls are allowed or refused as Kafka's authorizer
decides (deny wins, prefixed patterns, super users, the mTLS principal from the certificate DN);
refusals leak no topic names; KIP-430 authorized operations; the ACLs and SCRAM users survive a restart."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from confluent_kafka import TopicCollection

from security_fixtures import ADMIN, Login, add_scram_user, confluent_config, secured_broker
from tls_certs import make_pki

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
ALICE = Login("SASL_SSL", "SCRAM-SHA-256", "alice2", "alice2-secret")


def _acl(rtype, name, principal, op, perm=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def _produce(conf: dict, topic: str, n: int = 3) -> list:
    errors = []
    p = Producer({**conf, "message.timeout.ms": 10000})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _m: errors.append(err))
    p.flush(20)
    return errors


def _consume(conf: dict, topic: str, group: str, n: int) -> tuple[list, list]:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, errs, deadline = [], [], time.monotonic() + 20
    while len(got) < n and not errs and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        (errs.append(m.error()) if m.error() else got.append(m.value()))
    c.close()
    return got, errs


@pytest.fixture
def env(tmp_path):
    pki = make_pki(tmp_path / "pki")
    with secured_broker(tmp_path / "data", pki, **AUTHORIZER) as b:
        admin_conf = confluent_config(b, pki, ADMIN)
        add_scram_user(b, ALICE.user, ALICE.password, admin_conf)
        yield b, pki, tmp_path


def test_acls_decide_produce_consume_and_admin(env):
    b, pki, _ = env
    admin = AdminClient(confluent_config(b, pki, ADMIN))
    for f in admin.create_topics([NewTopic(t, 1) for t in ("orders", "secret-plans", "logs-app")]).values():
        f.result(20)
    alice = confluent_config(b, pki, ALICE)
    # no ACL: nothing allowed (allow.everyone.if.no.acl.found defaults to false)
    errs = _produce(alice, "orders")
    assert errs and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errs)
    assert AdminClient(alice).list_topics(timeout=10).topics == {}  # no DESCRIBE: no names
    P = "User:alice2"
    bindings = [_acl(ResourceType.TOPIC, "orders", P, AclOperation.WRITE),
                _acl(ResourceType.TOPIC, "orders", P, AclOperation.READ),
                _acl(ResourceType.TOPIC, "logs-", P, AclOperation.ALL, pattern=ResourcePatternType.PREFIXED),
                _acl(ResourceType.TOPIC, "logs-app", P, AclOperation.WRITE, AclPermissionType.DENY),
                _acl(ResourceType.GROUP, "alice-", P, AclOperation.READ, pattern=ResourcePatternType.PREFIXED)]
    for f in admin.create_acls(bindings).values():
        assert f.result(20) is None
    assert _produce(alice, "orders") == [None] * 3
    errs = _produce(alice, "logs-app")  # the DENY wins over the prefixed ALL
    assert errs and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errs)
    assert sorted(AdminClient(alice).list_topics(timeout=10).topics) == ["logs-app", "orders"]  # secret-plans hidden
    got, errs = _consume(alice, "orders", "alice-g1", 3)
    assert len(got) == 3 and not errs
    got, errs = _consume(alice, "orders", "other-group", 3)
    assert errs and errs[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED and not got
    # alice may not administer ACLs or create topics
    alice_admin = AdminClient(alice)
    binding = _acl(ResourceType.TOPIC, "x", P, AclOperation.ALL)
    with pytest.raises(KafkaException) as e:
        alice_admin.create_acls([binding])[binding].result(20)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as e:
        alice_admin.create_topics([NewTopic("alice-new", 1)])["alice-new"].result(20)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # KIP-430: what alice may do on orders, as DescribeTopics reports it
    desc = alice_admin.describe_topics(TopicCollection(["orders"]),
                                       include_authorized_operations=True)["orders"].result(20)
    assert set(desc.authorized_operations) == {AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE}
    # describe and delete with filters
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, P, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    assert len(admin.describe_acls(flt).result(20)) == 5
    match = AclBindingFilter(ResourceType.TOPIC, "logs-app", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert {(x.name, x.permission_type) for x in admin.describe_acls(match).result(20)} == {
        ("logs-", AclPermissionType.ALLOW), ("logs-app", AclPermissionType.DENY)}
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "logs-app", ResourcePatternType.LITERAL, None,
                                                  None, AclOperation.ANY, AclPermissionType.DENY)])
    assert [len(f.result(20)) for f in deleted.values()] == [1]
    assert _produce(alice, "logs-app") == [None] * 3


def test_mtls_principal_is_the_certificate_dn_and_acls_survive_a_restart(env):
    b, pki, tmp = env
    admin = AdminClient(confluent_config(b, pki, ADMIN))
    admin.create_topics([NewTopic("certs", 1)])["certs"].result(20)
    dn_principal = f"User:{pki.client_dn}"
    assert dn_principal == "User:CN=alice-client,O=tidelake"
    mtls = confluent_config(b, pki, Login("MTLS", cert=True))
    assert _produce(mtls, "certs")[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for f in admin.create_acls([_acl(ResourceType.TOPIC, "certs", dn_principal, AclOperation.WRITE)]).values():
        f.result(20)
    assert _produce(mtls, "certs") == [None] * 3
    b.stop()
    from tidelake.broker import EmbeddedBroker
    from security_fixtures import broker_config
    with EmbeddedBroker(tmp / "data", config=broker_config(pki, **AUTHORIZER)) as b2:
        assert _produce(confluent_config(b2, pki, Login("MTLS", cert=True)), "certs") == [None] * 3
        # the SCRAM user made before the restart still logs in (and is still refused elsewhere)
        errs = _produce(confluent_config(b2, pki, ALICE), "certs")
        assert errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                               AclPermissionType.ANY)
        assert len(AdminClient(confluent_config(b2, pki, ADMIN)).describe_acls(flt).result(20)) == 1


def test_without_an_authorizer_acl_calls_say_security_disabled(tmp_path):
    pki = make_pki(tmp_path / "pki")
    with secured_broker(tmp_path / "data", pki) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_for("PLAINTEXT")})
        binding = _acl(ResourceType.TOPIC, "t", "User:a", AclOperation.READ)
        with pytest.raises(KafkaException) as e:
            admin.create_acls([binding])[binding].result(20)
        assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED


def _code(future) -> int:
    try:
        future.result(20)
    except KafkaException as e:
        return e.args[0].code()
    return KafkaError.NO_ERROR


def test_admin_group_and_transaction_apis_check_what_kafka_checks(env):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import ConfigResource
    b, pki, _ = env
    admin = AdminClient(confluent_config(b, pki, ADMIN))
    admin.create_topics([NewTopic("mine", 1), NewTopic("theirs", 1)])["mine"].result(20)
    P = "User:alice2"
    for f in admin.create_acls([_acl(ResourceType.TOPIC, "mine", P, AclOperation.ALL),
                                _acl(ResourceType.GROUP, "ours", P, AclOperation.READ)]).values():
        f.result(20)
    # two groups with committed offsets, one of them alice's
    for group in ("ours", "private"):
        c = Consumer({**confluent_config(b, pki, ADMIN), "group.id": group})
        c.commit(offsets=[TopicPartition("mine", 0, 0)], asynchronous=False)
        c.close()
    alice = AdminClient(confluent_config(b, pki, ALICE))
    # topics: an existing one and a missing one answer the same (no existence leak)
    deleted = alice.delete_topics(["theirs", "no-such-topic", "mine"], operation_timeout=10)
    assert {t: _code(f) for t, f in deleted.items()} == {
        "theirs": KafkaError.TOPIC_AUTHORIZATION_FAILED, "no-such-topic": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "mine": KafkaError.NO_ERROR}
    configs = alice.describe_configs([ConfigResource("topic", "theirs"), ConfigResource("broker", "1")])
    assert sorted(_code(f) for f in configs.values()) == sorted([KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                                 KafkaError.CLUSTER_AUTHORIZATION_FAILED])
    # groups: listings show only what alice may describe; describe/offsets/delete are checked per group
    listed = alice.list_consumer_groups().result(20)
    assert [g.group_id for g in listed.valid] == ["ours"]
    described = alice.describe_consumer_groups(["ours", "private"], include_authorized_operations=True)
    assert set(described["ours"].result(20).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert _code(described["private"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    offsets = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions("private")])
    assert _code(offsets["private"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _code(alice.delete_consumer_groups(["private"])["private"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    # the cluster: KIP-430 on DescribeCluster; SCRAM administration needs ALTER on the cluster
    cluster = alice.describe_cluster(include_authorized_operations=True).result(20)
    assert not cluster.authorized_operations
    assert AclOperation.ALTER in admin.describe_cluster(include_authorized_operations=True).result(
        20).authorized_operations
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    upsert = alice.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")])
    assert [_code(f) for f in upsert.values()] == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
    # transactions: WRITE on the transactional id is required
    producer = Producer({**confluent_config(b, pki, ALICE), "transactional.id": "alice-tx"})
    with pytest.raises(KafkaException) as e:
        producer.init_transactions(10)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    for f in admin.create_acls([_acl(ResourceType.TRANSACTIONAL_ID, "alice-", P, AclOperation.WRITE,
                                     pattern=ResourcePatternType.PREFIXED)]).values():
        f.result(20)
    producer = Producer({**confluent_config(b, pki, ALICE), "transactional.id": "alice-tx"})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce("mine", b"in a transaction")
    producer.commit_transaction(20)


def test_describe_configs_never_returns_secrets(env):
    from confluent_kafka.admin import ConfigResource
    b, pki, _ = env
    admin = AdminClient(confluent_config(b, pki, ADMIN))
    entries = admin.describe_configs([ConfigResource("broker", "1")])
    configs = list(entries.values())[0].result(20)
    jaas = configs["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert configs["ssl.keystore.location"].value  # not a secret: shown


def test_offset_fetch_of_several_groups_answers_each_group_on_its_own(env):
    """OffsetFetch v8+ asks for several groups at once: a group the principal may not describe gets
    GROUP_AUTHORIZATION_FAILED, the others their offsets (as Kafka answers), not a failed request."""
    from kafka.protocol.consumer import OffsetFetchRequest
    from txn_helpers import raw_request

    b, pki, _ = env
    admin = AdminClient(confluent_config(b, pki, ADMIN))
    for f in admin.create_topics([NewTopic("fetched", 1)]).values():
        f.result(20)
    anonymous = "User:ANONYMOUS"   # the PLAINTEXT listener's principal
    for f in admin.create_acls([_acl(ResourceType.GROUP, "visible", anonymous, AclOperation.DESCRIBE),
                                _acl(ResourceType.TOPIC, "fetched", anonymous, AclOperation.DESCRIBE)]).values():
        f.result(20)
    Group = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest(groups=[Group(group_id="visible", topics=None), Group(group_id="hidden", topics=None)],
                                 require_stable=False)
    response = raw_request(b.bootstrap_for("PLAINTEXT"), request, 8)
    codes = {g.group_id: g.error_code for g in response.groups}
    assert codes == {"visible": 0, "hidden": 30}   # 30: GROUP_AUTHORIZATION_FAILED


def test_consumer_group_heartbeat_needs_describe_on_every_subscribed_topic(env):
    from tidelake.protocol.messages import ConsumerGroupHeartbeatRequest
    from txn_helpers import raw_request

    b, pki, _ = env
    admin = AdminClient(confluent_config(b, pki, ADMIN))
    for f in admin.create_topics([NewTopic(t, 1) for t in ("seen", "unseen")]).values():
        f.result(20)
    anonymous = "User:ANONYMOUS"
    for f in admin.create_acls([_acl(ResourceType.GROUP, "kg", anonymous, AclOperation.READ),
                                _acl(ResourceType.TOPIC, "seen", anonymous, AclOperation.DESCRIBE)]).values():
        f.result(20)

    def heartbeat(topics):
        return raw_request(b.bootstrap_for("PLAINTEXT"), ConsumerGroupHeartbeatRequest(
            group_id="kg", member_id="", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=topics,
            server_assignor=None, topic_partitions=[]), 0)
    assert heartbeat(["seen", "unseen"]).error_code == 29   # TOPIC_AUTHORIZATION_FAILED
    assert heartbeat(["seen"]).error_code == 0


def test_offset_fetch_of_all_topics_lists_only_describable_ones(env):
    from confluent_kafka import Consumer, TopicPartition
    from kafka.protocol.consumer import OffsetFetchRequest
    from txn_helpers import raw_request

    b, pki, _ = env
    admin = AdminClient(confluent_config(b, pki, ADMIN))
    for f in admin.create_topics([NewTopic(t, 1) for t in ("open-t", "closed-t")]).values():
        f.result(20)
    # the admin commits offsets of both topics for group og
    committer = Consumer({**confluent_config(b, pki, ADMIN), "group.id": "og"})
    committer.commit(offsets=[TopicPartition("open-t", 0, 5), TopicPartition("closed-t", 0, 7)], asynchronous=False)
    committer.close()
    anonymous = "User:ANONYMOUS"
    for f in admin.create_acls([_acl(ResourceType.GROUP, "og", anonymous, AclOperation.DESCRIBE),
                                _acl(ResourceType.TOPIC, "open-t", anonymous, AclOperation.DESCRIBE)]).values():
        f.result(20)
    response = raw_request(b.bootstrap_for("PLAINTEXT"), OffsetFetchRequest(group_id="og", topics=None,
                                                                             require_stable=False), 7)
    assert response.error_code == 0
    assert [(t.name, t.partitions[0].committed_offset) for t in response.topics] == [("open-t", 5)]


def test_delete_topics_by_id_is_checked_against_the_topic_name(env):
    from kafka.protocol.admin import DeleteTopicsRequest
    from txn_helpers import raw_request

    b, pki, _ = env
    admin = AdminClient(confluent_config(b, pki, ADMIN))
    for f in admin.create_topics([NewTopic(t, 1) for t in ("doomed", "kept")]).values():
        f.result(20)
    for f in admin.create_acls([_acl(ResourceType.TOPIC, "doomed", "User:ANONYMOUS", AclOperation.DELETE)]).values():
        f.result(20)
    ids = {t: b.broker.context.topics.get(t).topic_id for t in ("doomed", "kept")}
    State = DeleteTopicsRequest.DeleteTopicState
    request = DeleteTopicsRequest(topics=[State(name=None, topic_id=ids[t]) for t in ("doomed", "kept")],
                                  timeout_ms=10000)
    response = raw_request(b.bootstrap_for("PLAINTEXT"), request, 6)
    codes = {r.topic_id: r.error_code for r in response.responses}
    assert codes == {ids["doomed"]: 0, ids["kept"]: 29}
    assert all(r.name is None for r in response.responses if r.error_code == 29)   # a denial names nothing
    assert b.broker.context.topics.get("kept") is not None and b.broker.context.topics.get("doomed") is None
