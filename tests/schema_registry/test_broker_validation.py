"""The broker's own registry (``schema.registry.listen``) and broker-side schema validation
(``confluent.value.schema.validation`` / ``confluent.key.schema.validation``): records whose schema id is not
registered for the topic's subject are refused with INVALID_RECORD and a message, nothing appended."""
from __future__ import annotations

import json
import logging
import struct
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka.protocol.producer import ProduceRequest

from conftest import free_port
from schema_registry_fixtures import BROKER_CONFIG
from schema_registry_rest import Rest, record
from tidelake.broker.embedded import EmbeddedBroker
from tidelake.protocol.records import Record, build_batch
from tidelake.protocol.wire_client import WireClient

QUIET = logging.getLogger("tests.schema_registry.librdkafka")
QUIET.setLevel(logging.CRITICAL + 1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = {**BROKER_CONFIG, "schema.registry.listen": "http://127.0.0.1:0"}
    with EmbeddedBroker(tmp_path_factory.mktemp("validating"), config=config) as b:
        yield b


def create_topic(broker, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "logger": QUIET})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(10)


def produce(broker, topic: str, value: bytes | None, key: bytes | None = None) -> KafkaError | None:
    """One record, acks=all, no retries of a refused one: the delivery error (None when stored)."""
    outcome = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "logger": QUIET, "message.timeout.ms": 10000})
    producer.produce(topic, value=value, key=key, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(15)
    return outcome[0]


def end_offset(broker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x", "logger": QUIET})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def framed(schema_id: int, payload: bytes = b"\x02") -> bytes:
    return struct.pack(">bI", 0, schema_id) + payload


def test_the_broker_serves_a_registry_with_its_schemas_on_itself(broker):
    url = broker.schema_registry_url
    assert url.startswith("http://127.0.0.1:")
    client = SchemaRegistryClient({"url": url})
    serializer = AvroSerializer(client, json.dumps(record("Embedded", ("a", "int"))))
    create_topic(broker, "embedded-avro")
    value = serializer({"a": 1}, SerializationContext("embedded-avro", MessageField.VALUE))
    assert produce(broker, "embedded-avro", value) is None
    topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10).topics
    assert "_schemas" in topics


def wire_produce(broker, topic: str, values: list[bytes | None], keys: list[bytes | None] | None = None):
    """One Produce request (v9) holding the records: the partition's answer, record errors included."""
    keys = keys or [None] * len(values)
    batch = build_batch([Record(i, 1, k, v) for i, (k, v) in enumerate(zip(keys, values))])
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    with WireClient.connect(broker.bootstrap_servers) as client:
        return client.request(request, 9).responses[0].partition_responses[0]


def test_value_validation_refuses_unregistered_ids(broker):
    create_topic(broker, "checked", **{"confluent.value.schema.validation": "true"})
    api = Rest(broker.schema_registry_url)
    good = api.register("checked-value", record("Checked", ("a", "int"))).body["id"]
    elsewhere = api.register("other-value", record("Other", ("b", "int"))).body["id"]
    before = end_offset(broker, "checked")
    answer = wire_produce(broker, "checked", [b"plain bytes", framed(good), framed(99999), framed(elsewhere)])
    assert answer.error_code == 87 and answer.base_offset == -1
    assert [e.batch_index for e in answer.record_errors] == [0, 2, 3]
    # each names its offset in the batch, the schema id found (or that there is none) and the subject
    assert [e.batch_index_error_message for e in answer.record_errors] == [
        "Record at offset 0 in the batch for checked-0 (value): no schema id (it does not start with magic byte 0 "
        "and a 4-byte id); subject checked-value",
        f"Record at offset 2 in the batch for checked-0 (value): schema id 99999 is not registered in "
        f"{broker.schema_registry_url}; subject checked-value",
        f"Record at offset 3 in the batch for checked-0 (value): schema id {elsewhere} is not registered for subject "
        f"checked-value (it is under other-value)"]
    # the partition's error_message (what Kafka's Java producer shows) carries the first three
    assert answer.error_message.startswith("One or more records have been rejected due to 3 record errors")
    assert "RecordError(batchIndex=2, message='Record at offset 2 in the batch for checked-0 (value): schema id " \
           "99999 is not registered" in answer.error_message
    assert end_offset(broker, "checked") == before          # nothing appended, not even the good record
    # Confluent's client sees INVALID_RECORD
    err = produce(broker, "checked", framed(99999))
    assert err is not None and err.code() == KafkaError.INVALID_RECORD
    assert produce(broker, "checked", framed(good)) is None
    assert wire_produce(broker, "checked", [framed(good), None]).error_code == 0     # a tombstone passes
    assert end_offset(broker, "checked") == before + 3
    # a topic without the setting takes anything
    create_topic(broker, "unchecked")
    assert produce(broker, "unchecked", b"plain bytes") is None


def test_tidelake_produce_refused_by_validation_says_where_the_reasons_are(broker, caplog):
    """confluent-kafka hands the producer only INVALID_RECORD: the CLI says so in its one line, and the broker's log
    names the refused record, its schema id's absence and the subject."""
    create_topic(broker, "cli-checked", **{"confluent.value.schema.validation": "true"})
    with caplog.at_level(logging.INFO, logger="tidelake.broker.schema_validation"):
        r = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "produce", "cli-checked", "-b",
                            broker.bootstrap_servers], input="plain text\n", capture_output=True, text=True,
                           timeout=60)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [
        "tidelake: error: 1 of 1 records not delivered to cli-checked: INVALID_RECORD: Broker: Broker failed to "
        "validate record; the broker's log names each refused record and why (tidelake produce)"]
    assert "produce to cli-checked-0 refused: 1 records fail schema validation, the first: Record at offset 0 in the " \
           "batch for cli-checked-0 (value): no schema id" in caplog.text


def test_key_validation_and_record_name_strategy(broker):
    create_topic(broker, "keyed", **{"confluent.key.schema.validation": "true",
                                     "confluent.key.subject.name.strategy":
                                         "io.confluent.kafka.serializers.subject.RecordNameStrategy"})
    api = Rest(broker.schema_registry_url)
    key_id = api.register("com.example.Key", record("Key", ("id", "int"), namespace="com.example")).body["id"]
    topic_subject = api.register("keyed-key", record("Key2", ("id", "int"), namespace="com.example")).body["id"]
    assert produce(broker, "keyed", b"any value", key=framed(key_id)) is None
    answer = wire_produce(broker, "keyed", [b"v", b"v"], keys=[framed(topic_subject), b"\x01\x00\x00\x00\x01"])
    assert answer.error_code == 87 and [e.batch_index for e in answer.record_errors] == [0, 1]
    assert answer.record_errors[0].batch_index_error_message == (
        f"Record at offset 0 in the batch for keyed-0 (key): schema id {topic_subject} is not registered for subject "
        "com.example.Key2 (it is under keyed-key)")
    assert answer.record_errors[1].batch_index_error_message == (
        "Record at offset 1 in the batch for keyed-0 (key): no schema id (it does not start with magic byte 0 and a "
        "4-byte id); subject named by RecordNameStrategy from the record's schema")


def test_validation_config_is_a_topic_config_with_confluents_names(broker):
    create_topic(broker, "described", **{"confluent.value.schema.validation": "true"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    from confluent_kafka.admin import ConfigResource
    resource = ConfigResource(ConfigResource.Type.TOPIC, "described")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["confluent.value.schema.validation"].value == "true"
    assert configs["confluent.key.schema.validation"].value == "false"
    bad = admin.create_topics([NewTopic("bad-strategy", 1, 1, config={
        "confluent.value.subject.name.strategy": "NoSuchStrategy"})])["bad-strategy"]
    with pytest.raises(Exception, match="NoSuchStrategy"):
        bad.result(10)


def test_a_broker_validating_against_another_registry(broker, tmp_path):
    url = broker.schema_registry_url
    sid = Rest(url).register("remote-value", record("Remote", ("a", "int"))).body["id"]
    with EmbeddedBroker(tmp_path / "b2", config={"confluent.schema.registry.url": url}) as other:
        create_topic(other, "remote", **{"confluent.value.schema.validation": "true"})
        assert produce(other, "remote", framed(sid)) is None
        err = produce(other, "remote", framed(sid + 1000))
        assert err is not None and err.code() == KafkaError.INVALID_RECORD


def test_an_unreachable_registry_is_a_retriable_error(tmp_path):
    config = {"confluent.schema.registry.url": f"http://127.0.0.1:{free_port()}"}
    with EmbeddedBroker(tmp_path / "b3", config=config) as other:
        create_topic(other, "orphan", **{"confluent.value.schema.validation": "true"})
        outcome = []
        producer = Producer({"bootstrap.servers": other.bootstrap_servers, "logger": QUIET,
                             "message.timeout.ms": 3000})
        producer.produce("orphan", value=framed(1), on_delivery=lambda err, msg: outcome.append(err))
        producer.flush(15)
        assert outcome[0] is not None and outcome[0].code() in (KafkaError.REQUEST_TIMED_OUT,
                                                                KafkaError._MSG_TIMED_OUT)
        assert end_offset(other, "orphan") == 0


def test_broker_start_prints_the_registry_url(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir",
                             str(tmp_path / "d"), "--listen", f"127.0.0.1:{free_port()}", "--set",
                             f"schema.registry.listen=http://127.0.0.1:{free_port()}", "--log-level", "WARNING"],
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stderr.readline() for _ in range(2)]
        registry_line = next(line for line in lines if "schema registry on" in line)
        url = registry_line.split("schema registry on ")[1].strip()
        assert Rest(url).get("/subjects").body == []
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
        proc.stderr.close()


NO_REGISTRY = "needs a schema registry to validate against: this broker has neither schema.registry.listen nor " \
              "confluent.schema.registry.url set"


@pytest.fixture(scope="module")
def unregistered(tmp_path_factory):
    """A broker with no registry to validate against."""
    with EmbeddedBroker(tmp_path_factory.mktemp("unregistered"), config=BROKER_CONFIG) as b:
        yield b


@pytest.mark.parametrize("side", ["key", "value"])
def test_validation_without_a_registry_is_refused_at_creation_and_at_config_changes(unregistered, side):
    bs, name = unregistered.bootstrap_servers, f"confluent.{side}.schema.validation"
    admin = AdminClient({"bootstrap.servers": bs, "logger": QUIET})
    refused = admin.create_topics([NewTopic(f"unchecked-{side}", 1, 1, config={name: "true"})])[f"unchecked-{side}"]
    with pytest.raises(KafkaException) as e:
        refused.result(10)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG and e.value.args[0].str() == f"{name}=true {NO_REGISTRY}"
    assert f"unchecked-{side}" not in admin.list_topics(timeout=10).topics
    create_topic(unregistered, f"plain-{side}")
    resource = ConfigResource(ConfigResource.Type.TOPIC, f"plain-{side}", incremental_configs=[
        ConfigEntry(name, "true", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match=f"{name}=true {NO_REGISTRY}"):
        admin.incremental_alter_configs([resource])[resource].result(10)
    legacy = ConfigResource(ConfigResource.Type.TOPIC, f"plain-{side}", set_config={name: "true"})
    with pytest.raises(KafkaException, match=f"{name}=true {NO_REGISTRY}"):
        admin.alter_configs([legacy])[legacy].result(10)
    broker_wide = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry(name, "true", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match=f"{name}=true {NO_REGISTRY}"):
        admin.incremental_alter_configs([broker_wide])[broker_wide].result(10)
    described = ConfigResource(ConfigResource.Type.TOPIC, f"plain-{side}")
    assert admin.describe_configs([described])[described].result(10)[name].value == "false"


def test_validation_set_broker_wide_without_a_registry_stops_the_broker_start(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir",
                           str(tmp_path / "d"), "--listen", f"127.0.0.1:{free_port()}", "--set",
                           "confluent.value.schema.validation=true", "--log-level", "WARNING"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"confluent.value.schema.validation=true {NO_REGISTRY}" in proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr


def test_validation_set_broker_wide_validates_every_topic(tmp_path):
    config = {**BROKER_CONFIG, "schema.registry.listen": "http://127.0.0.1:0",
              "confluent.value.schema.validation": "true"}
    with EmbeddedBroker(tmp_path / "wide", config=config) as b:
        create_topic(b, "defaulted")
        sid = Rest(b.schema_registry_url).register("defaulted-value", record("Wide", ("a", "int"))).body["id"]
        answer = wire_produce(b, "defaulted", [framed(sid), b"no id"])
        assert answer.error_code == 87 and [e.batch_index for e in answer.record_errors] == [1]
        assert produce(b, "defaulted", framed(sid)) is None
        create_topic(b, "opted-out", **{"confluent.value.schema.validation": "false"})
        assert produce(b, "opted-out", b"no id") is None
