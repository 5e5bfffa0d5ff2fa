"""The record name a payload's schema gives it, for Confluent's RecordNameStrategy and TopicRecordNameStrategy
(subject = the record's full name, or ``<topic>-<full name>``): an Avro record's namespace-qualified name, a JSON
Schema's ``title``, the Protobuf message the payload's message indexes point at (Confluent's wire format: after the
schema id, a zigzag-varint count and the indexes, a lone 0 meaning the first message)."""
from __future__ import annotations

import base64
import binascii
import json

from google.protobuf import descriptor_pb2, message


class NoRecordName(ValueError):
    """The schema names no record (a primitive Avro schema, a JSON Schema without a title, ...)."""


def record_name(schema_type: str, schema: str, payload: bytes) -> str:
    """``payload``: the record's bytes after the magic byte and the schema id."""
    if schema_type == "AVRO":
        return _avro_name(schema)
    if schema_type == "JSON":
        try:
            title = json.loads(schema).get("title")
        except (ValueError, AttributeError):
            title = None
        if not isinstance(title, str) or not title:
            raise NoRecordName("the JSON Schema has no title")
        return title
    return _protobuf_name(schema, payload)


def _avro_name(schema: str) -> str:
    try:
        parsed = json.loads(schema)
    except ValueError:
        raise NoRecordName("the Avro schema is not JSON") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
        raise NoRecordName("the Avro schema is not a named type")
    name, namespace = parsed["name"], parsed.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(buf):
            raise NoRecordName("the payload ends inside its message indexes")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise NoRecordName("a message index is not a varint")


def _protobuf_name(schema: str, payload: bytes) -> str:
    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.strip(), validate=True))
    except (binascii.Error, message.DecodeError):
        raise NoRecordName("the Protobuf schema is not a serialized descriptor") from None
    count, pos = _varint(payload, 0)
    indexes = [0] if count == 0 else []
    for _ in range(count):
        index, pos = _varint(payload, pos)
        indexes.append(index)
    messages = fdp.message_type
    names = []
    for index in indexes:
        if not 0 <= index < len(messages):
            raise NoRecordName(f"message index {index} is not in the schema")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join(([fdp.package] if fdp.package else []) + names)
