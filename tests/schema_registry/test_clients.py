"""Confluent's own Python clients, unchanged, against tidelake's registry: SchemaRegistryClient, and the Avro,
Protobuf and JSON Schema serializers producing to / deserializers consuming from tidelake's broker."""
from __future__ import annotations

import json
import logging
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from schema_registry_fixtures import start_registry

QUIET = logging.getLogger("tests.schema_registry.librdkafka")
QUIET.setLevel(logging.CRITICAL + 1)

USER = {"type": "record", "name": "User", "namespace": "clients.test",
        "fields": [{"name": "name", "type": "string"}, {"name": "favorite_number", "type": ["null", "int"],
                                                          "default": None}]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from tidelake.broker.embedded import EmbeddedBroker
    from schema_registry_fixtures import BROKER_CONFIG
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), config=BROKER_CONFIG) as broker:
        with start_registry(broker.bootstrap_servers) as registry:
            yield broker, registry


@pytest.fixture
def client(setup) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": setup[1].url})


def roundtrip(bootstrap: str, topic: str, serializer, deserializer, values: list) -> list:
    producer = Producer({"bootstrap.servers": bootstrap, "logger": QUIET})
    for value in values:
        producer.produce(topic, value=serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "logger": QUIET})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    for _ in range(200):
        if len(out) == len(values):
            break
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            out.append(deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    consumer.close()
    return out


def test_schema_registry_client_calls(client):
    schema = Schema(json.dumps(USER), "AVRO")
    sid = client.register_schema("client-calls-value", schema)
    assert client.register_schema("client-calls-value", schema) == sid
    assert json.loads(client.get_schema(sid).schema_str)["name"] == "User"
    found = client.lookup_schema("client-calls-value", schema)
    assert (found.schema_id, found.version, found.subject) == (sid, 1, "client-calls-value")
    assert "client-calls-value" in client.get_subjects()
    assert client.get_versions("client-calls-value") == [1]
    assert client.get_latest_version("client-calls-value").schema_id == sid
    assert client.get_version("client-calls-value", 1).schema_id == sid
    assert client.set_compatibility("client-calls-value", "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility("client-calls-value") == "FULL"
    wider = {**USER, "fields": USER["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
    assert client.test_compatibility("client-calls-value", Schema(json.dumps(wider), "AVRO")) is True
    breaking = {**USER, "fields": [{"name": "name", "type": "int"}]}
    assert client.test_compatibility("client-calls-value", Schema(json.dumps(breaking), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("client-calls-value", Schema(json.dumps(breaking), "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_version("no-such-subject", 1)
    assert missing.value.error_code == 40401
    assert client.delete_version("client-calls-value", 1) == 1
    assert client.delete_subject("client-calls-value", permanent=True) == [1]
    assert "client-calls-value" not in client.get_subjects()


def test_avro_serializer_and_deserializer(setup, client):
    broker, _ = setup
    serializer = AvroSerializer(client, json.dumps(USER))
    deserializer = AvroDeserializer(client)
    values = [{"name": "ada", "favorite_number": 7}, {"name": "bob", "favorite_number": None}]
    assert roundtrip(broker.bootstrap_servers, "avro-users", serializer, deserializer, values) == values
    assert client.get_latest_version("avro-users-value").schema.schema_type == "AVRO"


def _protobuf_classes():
    """``User`` (in its own file, importing ``Address`` from another and google's Timestamp), built at run time."""
    pool = descriptor_pool.Default()
    address = descriptor_pb2.FileDescriptorProto(name="tidelake_test/address.proto", package="tltest",
                                                 syntax="proto3")
    msg = address.message_type.add(name="Address")
    msg.field.add(name="city", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    user = descriptor_pb2.FileDescriptorProto(name="tidelake_test/user.proto", package="tltest", syntax="proto3",
                                              dependency=["tidelake_test/address.proto",
                                                          "google/protobuf/timestamp.proto"])
    msg = user.message_type.add(name="User")
    F = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg.field.add(name="address", number=2, type=F.TYPE_MESSAGE, type_name=".tltest.Address", label=F.LABEL_OPTIONAL)
    msg.field.add(name="at", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                  label=F.LABEL_OPTIONAL)
    assert timestamp_pb2.Timestamp   # google/protobuf/timestamp.proto is in the default pool
    try:
        pool.FindFileByName("tidelake_test/user.proto")
    except KeyError:
        pool.Add(address)
        pool.Add(user)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tltest.User"))


def test_protobuf_serializer_and_deserializer(setup, client):
    broker, _ = setup
    User = _protobuf_classes()
    serializer = ProtobufSerializer(User, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(User, {"use.deprecated.format": False})
    first = User(name="ada")
    first.address.city = "London"
    first.at.seconds = 1700000000
    back = roundtrip(broker.bootstrap_servers, "proto-users", serializer, deserializer, [first, User(name="bob")])
    assert back == [first, User(name="bob")]
    latest = client.get_latest_version("proto-users-value")
    assert latest.schema.schema_type == "PROTOBUF"
    # the imported file was registered as a reference under its own subject; the well-known Timestamp was not
    assert [r.name for r in latest.schema.references] == ["tidelake_test/address.proto"]
    assert client.get_versions("tidelake_test/address.proto") == [1]


def test_json_serializer_and_deserializer(setup, client):
    broker, _ = setup
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                         "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
                         "required": ["id"], "additionalProperties": False})
    serializer = JSONSerializer(schema, client)
    deserializer = JSONDeserializer(schema)
    values = [{"id": 1, "item": "tea"}, {"id": 2}]
    assert roundtrip(broker.bootstrap_servers, "json-orders", serializer, deserializer, values) == values
    assert client.get_latest_version("json-orders-value").schema.schema_type == "JSON"


def test_protobuf_text_schema_and_references_by_client(client):
    """A .proto text registered through the client, with a reference to another subject's .proto text."""
    dep = Schema('syntax = "proto3";\npackage shapes;\nmessage Point { int32 x = 1; int32 y = 2; }\n', "PROTOBUF")
    client.register_schema("shapes-point", dep)
    main = Schema('syntax = "proto3";\npackage shapes;\nimport "point.proto";\n'
                  'message Line { Point a = 1; Point b = 2; }\n', "PROTOBUF",
                  [SchemaReference("point.proto", "shapes-point", 1)])
    sid = client.register_schema("shapes-line", main)
    assert client.register_schema("shapes-line", main) == sid
    assert client.get_schema(sid).references[0].subject == "shapes-point"
    broken = Schema('syntax = "proto3";\nmessage Line { Missing a = 1; }\n', "PROTOBUF")
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("shapes-broken", broken)
    assert refused.value.error_code == 42201 and "Missing" in refused.value.error_message
