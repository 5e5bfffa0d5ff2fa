"""The znodes' JSON is Kafka's (ZooKeeper mode): what Kafka writes decodes, what we write has Kafka's keys."""
from __future__ import annotations

import json
import uuid

from tidelake.cluster import znodes
from tidelake.cluster.znodes import BrokerEndpoint, BrokerRegistration, PartitionState, TopicAssignment


def test_decodes_a_kafka_broker_registration():
    kafka_written = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
                     b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"],"jmx_port":-1,"port":9092,'
                     b'"host":"host1","version":5,"timestamp":"1700000000000"}')
    reg = BrokerRegistration.decode(7, kafka_written)
    assert reg.broker_id == 7
    assert reg.endpoints == (BrokerEndpoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"),
                             BrokerEndpoint("SSL", "host1", 9093, "SSL"))


def test_broker_registration_round_trips_with_kafkas_keys():
    reg = BrokerRegistration(2, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 4000, "PLAINTEXT"),), rack="r1")
    d = json.loads(reg.encode())
    assert d["version"] == 5 and d["host"] == "127.0.0.1" and d["port"] == 4000 and d["rack"] == "r1"
    assert d["endpoints"] == ["PLAINTEXT://127.0.0.1:4000"]
    assert d["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert BrokerRegistration.decode(2, reg.encode()) == reg


def test_topic_assignment_uses_kafkas_json_and_base64_topic_id():
    tid = uuid.UUID("6a1b2c3d-0000-4000-8000-00000000abcd")
    a = TopicAssignment("orders", tid, {1: [2, 3], 0: [1, 2]})
    d = json.loads(a.encode())
    assert d["version"] == 2 and d["partitions"] == {"0": [1, 2], "1": [2, 3]}
    assert d["adding_replicas"] == {} and d["removing_replicas"] == {}
    assert len(d["topic_id"]) == 22 and "=" not in d["topic_id"]  # Kafka's Uuid.toString
    back = TopicAssignment.decode("orders", a.encode())
    assert back.topic_id == tid and back.partitions == {0: [1, 2], 1: [2, 3]}


def test_partition_state_matches_kafkas_state_znode():
    kafka_written = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2,1]}'
    st = PartitionState.decode(kafka_written, zk_version=9)
    assert (st.leader, st.leader_epoch, st.isr, st.controller_epoch, st.zk_version) == (2, 5, [2, 1], 3, 9)
    assert json.loads(st.encode()) == json.loads(kafka_written)


def test_controller_config_and_notification_znodes():
    assert json.loads(znodes.encode_controller(3))["brokerid"] == 3
    assert znodes.decode_controller(b'{"version":1,"brokerid":4,"timestamp":"1"}') == 4
    assert znodes.decode_controller_epoch(znodes.encode_controller_epoch(12)) == 12
    assert znodes.decode_entity_config(b'{"version":1,"config":{"min.insync.replicas":"2"}}') == \
        {"min.insync.replicas": "2"}
    assert znodes.decode_isr_change(znodes.encode_isr_change([("t", 1)])) == [("t", 1)]
    assert znodes.partition_state_path("t", 4) == "/brokers/topics/t/partitions/4/state"
