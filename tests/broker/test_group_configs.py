"""KIP-848 group configs (Kafka 4.x's GroupConfig): IncrementalAlterConfigs of a GROUP resource sets
``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` within the broker's ``group.consumer.min/max.*``
bounds; DescribeConfigs shows them with their synonyms; the coordinator fences that group's members after the
group's session timeout and gives them the group's heartbeat interval."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic, ResourceType)

from tidelake.broker.embedded import EmbeddedBroker
from tidelake.protocol.messages import ConsumerGroupHeartbeatRequest
from tidelake.protocol.wire_client import WireClient

# the broker's own KIP-848 session is longer than any wait below: a member fenced in time was fenced by its group's
BROKER_SESSION_MS = 120000
CONFIG = {"group.consumer.session.timeout.ms": str(BROKER_SESSION_MS),
          "group.consumer.min.session.timeout.ms": "1000", "group.consumer.max.session.timeout.ms": "300000",
          "group.consumer.min.heartbeat.interval.ms": "100"}
GROUP_SESSION_MS, GROUP_HEARTBEAT_MS = 2000, 250
DEADLINE_S = 60

CHILD = r"""
import json, sys
from confluent_kafka import Consumer
c = Consumer(json.loads(sys.argv[1]))
c.subscribe(["fenced"])
while not c.assignment():
    c.poll(0.1)
print("assigned", flush=True)
while True:
    c.poll(0.1)
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("group-configs"), config=CONFIG) as b:
        yield b


def alter(bs: str, group: str, **configs: str) -> None:
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bs})
    admin.incremental_alter_configs([resource])[resource].result(15)


def describe(bs: str, group: str):
    resource = ConfigResource(ResourceType.GROUP, group)
    admin = AdminClient({"bootstrap.servers": bs})
    return admin.describe_configs([resource])[resource].result(15)


def members(bs: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bs})
    return len(admin.describe_consumer_groups([group])[group].result(15).members)


def test_a_groups_session_timeout_fences_its_member_and_its_heartbeat_interval_is_given(broker):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("fenced", 2, 1)])["fenced"].result(15)
    alter(bs, "short-sessions", consumer_session_timeout_ms=str(GROUP_SESSION_MS),
          consumer_heartbeat_interval_ms=str(GROUP_HEARTBEAT_MS))
    with WireClient.connect(bs) as wire:   # the heartbeat interval the coordinator hands out is the group's
        hb = wire.request(ConsumerGroupHeartbeatRequest(group_id="short-sessions", member_id="", member_epoch=0,
                                                        rebalance_timeout_ms=5000, subscribed_topic_names=["other"]),
                          0)
        assert hb.error_code == 0 and hb.heartbeat_interval_ms == GROUP_HEARTBEAT_MS
        left = wire.request(ConsumerGroupHeartbeatRequest(group_id="short-sessions", member_id=hb.member_id,
                                                          member_epoch=-1), 0)
        assert left.error_code == 0
    conf = {"bootstrap.servers": bs, "group.id": "short-sessions", "group.protocol": "consumer"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(conf)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "assigned"
        assert members(bs, "short-sessions") == 1
        child.send_signal(signal.SIGSTOP)   # alive, but no more heartbeats
        deadline = time.monotonic() + DEADLINE_S
        while members(bs, "short-sessions") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert members(bs, "short-sessions") == 0, "not fenced after the group's session timeout"
    finally:
        child.kill()
        child.wait(15)
        child.stdout.close()


def test_group_configs_are_described_with_their_synonyms(broker):
    bs = broker.bootstrap_servers
    alter(bs, "described", consumer_session_timeout_ms="50000")
    entries = describe(bs, "described")
    own = entries["consumer.session.timeout.ms"]
    assert own.value == "50000" and own.source == ConfigSource.GROUP_CONFIG.value and not own.is_default
    assert [(s.name, s.value, s.source) for s in own.synonyms.values()] == [
        ("consumer.session.timeout.ms", "50000", ConfigSource.GROUP_CONFIG.value),
        ("group.consumer.session.timeout.ms", str(BROKER_SESSION_MS), ConfigSource.STATIC_BROKER_CONFIG.value)]
    default = entries["consumer.heartbeat.interval.ms"]
    assert default.value == "5000" and default.is_default
    assert [(s.name, s.value, s.source) for s in default.synonyms.values()] == [
        ("group.consumer.heartbeat.interval.ms", "5000", ConfigSource.DEFAULT_CONFIG.value)]
    assert entries["share.session.timeout.ms"].value == "45000"   # the share.* ones beside them


@pytest.mark.parametrize("configs,bound", [
    ({"consumer.session.timeout.ms": "500"}, "consumer.session.timeout.ms must be greater than or equal to "
                                             "group.consumer.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "400000"}, "consumer.session.timeout.ms must be less than or equal to "
                                                "group.consumer.max.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "50"}, "consumer.heartbeat.interval.ms must be greater than or equal to "
                                               "group.consumer.min.heartbeat.interval.ms"),
    ({"consumer.heartbeat.interval.ms": "20000"}, "consumer.heartbeat.interval.ms must be less than or equal to "
                                                  "group.consumer.max.heartbeat.interval.ms"),
    ({"consumer.session.timeout.ms": "2000", "consumer.heartbeat.interval.ms": "2000"},
     "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
    ({"consumer.session.timeout.ms": "soon"}, "consumer.session.timeout.ms=soon: expected an integer"),
])
def test_a_bound_violated_is_invalid_config_naming_the_bound(broker, configs, bound):
    with pytest.raises(KafkaException) as e:
        alter(broker.bootstrap_servers, "bounded", **{k.replace(".", "_"): v for k, v in configs.items()})
    assert e.value.args[0].name() == "INVALID_CONFIG" and bound in e.value.args[0].str()
    assert describe(broker.bootstrap_servers, "bounded")["consumer.session.timeout.ms"].is_default
