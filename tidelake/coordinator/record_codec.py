"""Coordinator records in Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``):
the partition a record key belongs to, and the key/value bytes, coded from Kafka's JSON specs.

Layout (Kafka's): a key is ``int16 record type`` + the key body at version 0 (never flexible);
a value is ``int16 version`` + the value body at that version (flexible versions use compact
strings/arrays and tagged fields). The specs are Kafka's text in ``tidelake/protocol/schemas/``;
the codec is kafka-python's schema-driven ``ApiData``, the one the protocol messages use.
"""
from __future__ import annotations

import struct
import types

from kafka.protocol.api_data import ApiData

_SCHEMAS = "tidelake.protocol.schemas"
_PREFIX = struct.Struct(">h")
_DECODE_ERRORS = (ValueError, struct.error, EOFError, IndexError, UnicodeDecodeError)

DEFAULT_PARTITIONS = 50  # Kafka's offsets.topic.num.partitions and transaction.state.log.num.partitions


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def partition_for(key: str, num_partitions: int = DEFAULT_PARTITIONS) -> int:
    """The partition of a group id / transactional id: ``Utils.abs(key.hashCode) % num_partitions``
    (Kafka's Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def _versions_from_tagged(fields: list[dict]) -> list[dict]:
    """A tagged-only field exists in its taggedVersions (Kafka's generator default); kafka-python
    wants ``versions`` on every field."""
    out = []
    for f in fields:
        f = {**f}
        if "versions" not in f and "taggedVersions" in f:
            f["versions"] = f["taggedVersions"]
        if "fields" in f:
            f["fields"] = _versions_from_tagged(f["fields"])
        out.append(f)
    return out


def record_class(name: str) -> type:
    """The ``ApiData`` class of one coordinator record spec (``<name>.json``). Kafka marks these
    specs ``coordinator-key`` / ``coordinator-value`` (older ones ``data``); ApiData codes ``data``
    specs, and the body layout is the same."""
    def body(ns: dict) -> None:
        ns["__module__"] = __name__
        ns["json_patch"] = classmethod(
            lambda mcls, j: {**j, "type": "data", "fields": _versions_from_tagged(j["fields"])})
    return types.new_class(name, (ApiData,), {"load_json": _SCHEMAS}, body)


def record_type(key: bytes) -> int:
    """The record type a key starts with (its int16 prefix)."""
    if len(key) < 2:
        raise ValueError("coordinator record key shorter than its type")
    return _PREFIX.unpack_from(key)[0]


def encode_key(record_type: int, body: ApiData) -> bytes:
    return _PREFIX.pack(record_type) + body.encode(version=0, header=False)


def encode_value(body: ApiData) -> bytes:
    """The value at ``body``'s version (the spec decides flexible or not)."""
    return body.encode()


def decode_key(cls: type, key: bytes):
    """The key body after its record type (version 0)."""
    return _decode(cls, bytes(key[2:]), 0)


def decode_value(cls: type, value: bytes):
    """The value body at the version it starts with; ValueError for a version the spec does not
    define or a malformed body."""
    if len(value) < 2:
        raise ValueError(f"{cls.__name__}: value shorter than its version")
    version = _PREFIX.unpack_from(value)[0]
    if not 0 <= version <= cls.max_version:
        raise ValueError(f"unknown {cls.__name__} version {version}")
    return _decode(cls, bytes(value[2:]), version)


def decode_value_or_legacy(cls: type, legacy: type, value: bytes):
    """The value in Kafka's layout (``cls``), or, when the bytes are not exactly that layout, in the layout an
    older tidelake wrote at the same version number (``legacy``, a ``Legacy<Name>`` spec): the version prefix
    cannot tell the two apart, so the one whose decoding re-encodes to the very bytes read wins (Kafka's first)."""
    try:
        kafka = decode_value(cls, value)
    except ValueError:
        kafka = None
    if kafka is not None and _round_trips(kafka, value):
        return kafka
    try:
        old = decode_value(legacy, value)
    except ValueError:
        old = None
    if old is not None and _round_trips(old, value):
        return old
    if kafka is not None:
        return kafka
    raise ValueError(f"{cls.__name__}: neither Kafka's layout nor tidelake's legacy one")


def _round_trips(body: ApiData, value: bytes) -> bool:
    try:
        return bytes(body.encode()) == bytes(value)
    except _DECODE_ERRORS:
        return False


def _decode(cls: type, body: bytes, version: int):
    try:
        return cls.decode(body, version=version, header=False)
    except _DECODE_ERRORS as e:
        raise ValueError(f"malformed {cls.__name__} v{version}: {e}") from e
