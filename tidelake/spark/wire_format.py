"""Confluent's wire format, read for a whole batch of record values at once.

A value framed by a Schema Registry serializer is ``0x00`` (the magic byte), the schema id (4 bytes, big
endian), then the payload; a Protobuf payload starts with the message indexes (a zig-zag varint count and as
many zig-zag varint indexes, the path of the message type in its file; the single byte ``0x00`` stands for
``[0]``, the first message). See https://docs.confluent.io/platform/current/schema-registry/fundamentals/
serdes-develop/index.html#wire-format.

``split_framed`` reads the ids and cuts the payloads out of the values' Arrow buffers with numpy: no Python
work per record.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

MAGIC_BYTE = 0
HEADER_SIZE = 5  # magic byte + schema id


class BadFraming(ValueError):
    """A value that is not in Confluent's wire format; ``index`` is its position in the batch."""

    def __init__(self, reason: str, index: int):
        super().__init__(reason)
        self.index = index


@dataclass(frozen=True)
class Framed:
    """A batch of framed values: each value's schema id and its payload (the bytes after the header)."""
    schema_ids: np.ndarray  # int32, one per value
    payloads: pa.BinaryArray


def _layout(values: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets as int64, data bytes) of a binary array, the array's own slice of them."""
    n = len(values)
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=n + 1, offset=values.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    return offsets, data


def drop_prefix(values: pa.BinaryArray, size: int) -> pa.BinaryArray:
    """Every value without its first ``size`` bytes (each has at least that many), in one copy with numpy."""
    n = len(values)
    offsets, data = _layout(values)
    first, last = int(offsets[0]), int(offsets[-1])
    keep = np.ones(last - first, bool)
    keep[((offsets[:-1] - first)[:, None] + np.arange(size)).ravel()] = False
    new_offsets = (offsets - first - size * np.arange(n + 1)).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(new_offsets), pa.py_buffer(data[first:last][keep])])


def split_framed(values: pa.Array) -> Framed:
    """Record values (binary, no nulls) -> their schema ids and payloads; BadFraming for the first value that
    is too short or lacks the magic byte."""
    values = values.cast(pa.binary())
    n = len(values)
    if n == 0:
        return Framed(np.empty(0, np.int32), values)
    offsets, data = _layout(values)
    short = np.flatnonzero(np.diff(offsets) < HEADER_SIZE)
    if len(short):
        raise BadFraming(f"value of {offsets[short[0] + 1] - offsets[short[0]]} bytes is too short for the "
                         f"Schema Registry wire format (magic byte and schema id)", int(short[0]))
    starts = offsets[:-1]
    wrong = np.flatnonzero(data[starts] != MAGIC_BYTE)
    if len(wrong):
        raise BadFraming(f"value does not start with the Schema Registry magic byte 0 (found "
                         f"{int(data[starts[wrong[0]]])}): not produced by a Schema Registry serializer",
                         int(wrong[0]))
    ids = ((data[starts + 1].astype(np.int32) << 24) | (data[starts + 2].astype(np.int32) << 16)
           | (data[starts + 3].astype(np.int32) << 8) | data[starts + 4].astype(np.int32))
    return Framed(ids, drop_prefix(values, HEADER_SIZE))


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zig-zag varint at ``at``: (its value, the position after it)."""
    shift = result = 0
    while True:
        if at >= len(data):
            raise ValueError("message indexes end early")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("message index varint too long")


@dataclass(frozen=True)
class ProtobufFramed:
    """Protobuf payloads with their message indexes read off: the index path per value (as a tuple) and the
    message bytes."""
    message_indexes: list[tuple[int, ...]]
    messages: pa.BinaryArray


def split_message_indexes(payloads: pa.BinaryArray) -> ProtobufFramed:
    """Protobuf payloads -> (message indexes, message bytes). The common case, every value's first byte 0 (the
    first message of the file), is cut off with Arrow; other index paths are read value by value."""
    n = len(payloads)
    if n == 0:
        return ProtobufFramed([], payloads)
    offsets, data = _layout(payloads)
    if np.all(np.diff(offsets) >= 1) and not np.any(data[offsets[:-1]]):
        return ProtobufFramed([(0,)] * n, drop_prefix(payloads, 1))
    indexes, messages = [], []
    for i, payload in enumerate(payloads.to_pylist()):
        try:
            count, at = _varint(payload, 0)
            if count < 0 or count > 256:
                raise ValueError(f"message index count {count}")
            path = []
            for _ in range(count):
                index, at = _varint(payload, at)
                path.append(index)
        except ValueError as e:
            raise BadFraming(f"Protobuf message indexes unreadable: {e}", i) from None
        indexes.append(tuple(path) or (0,))
        messages.append(payload[at:])
    return ProtobufFramed(indexes, pa.array(messages, pa.binary()))
