"""Hand-written codecs for the hot path: Produce request decode, Produce and Fetch response encode.

kafka-python's generated codecs build a DataContainer per nested struct; for the requests that carry
the data this costs more than the broker's own work. These functions produce byte-identical output
for every version the broker serves (tests/protocol/test_fast_codec.py checks them against
kafka-python's codecs), keep record batches as opaque bytes and, for Fetch, return the response
as a list of chunks so record bytes are written to the socket without another copy.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Sequence

from tidelake.protocol.framing import read_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PART_PRODUCE_V2 = struct.Struct(">ihqq")  # index, error, base_offset, log_append_time
_PART_PRODUCE_V5 = struct.Struct(">ihqqq")  # + log_start_offset
_FETCH_PART_HEAD = struct.Struct(">ihqqq")  # index, error, hw, lso, log_start
_ABORTED = struct.Struct(">qq")
_ZERO_UUID_BYTES = bytes(16)


class DecodeError(ValueError):
    pass


# Kafka's readers refuse a null where the spec does not allow one (the connection is closed).
_NULL = "non-nullable field %s was serialized as null"


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _skip_tags(buf, pos: int) -> int:
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def _read_len(buf, pos: int, flexible: bool, fmt=_I32) -> tuple[int, int]:
    """Array/bytes length: compact (uvarint n+1) or fixed int."""
    if flexible:
        b = buf[pos]
        if b < 0x80:
            return b - 1, pos + 1
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    (n,) = fmt.unpack_from(buf, pos)
    return n, pos + fmt.size


def _read_str(buf, pos: int, flexible: bool) -> tuple[str | None, int]:
    n, pos = _read_len(buf, pos, flexible, _I16)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise DecodeError("string runs past the request")
    return bytes(buf[pos:pos + n]).decode(), pos + n


def _read_topic_key(buf, pos: int, version: int, flexible: bool, uuid_from: int) -> tuple:
    """(name, topic_id, position): a topic is named by a string until ``uuid_from``, then by a UUID."""
    if version >= uuid_from:
        if pos + 16 > len(buf):
            raise DecodeError("topic id runs past the request")
        return None, uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16
    name, pos = _read_str(buf, pos, flexible)
    return name, None, pos


def _string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    b = s.encode()
    return (_uvarint(len(b) + 1) if flexible else _I16.pack(len(b))) + b


def _array_len(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


# ------------------------------------------------------------------------------------------------
# Produce request
# ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ProducePartition:
    index: int
    records: object  # a memoryview slice of the request frame


@dataclass(slots=True)
class ProduceTopic:
    name: str | None
    topic_id: object
    partition_data: list


@dataclass(slots=True)
class ProduceRequestData:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list


def decode_produce_request(buf, pos: int, version: int) -> ProduceRequestData:
    """Decode a Produce request body (v3-v13) starting at ``pos``; ``records`` are memoryview slices."""
    try:
        mv = memoryview(buf)
        flexible = version >= 9
        txn, pos = _read_str(buf, pos, flexible)
        (acks,) = _I16.unpack_from(buf, pos)
        (timeout,) = _I32.unpack_from(buf, pos + 2)
        pos += 6
        nt, pos = _read_len(buf, pos, flexible)
        if nt < 0:
            raise DecodeError(_NULL % "topic_data")
        topics = []
        end = len(buf)
        for _ in range(nt):
            name, topic_id, pos = _read_topic_key(buf, pos, version, flexible, uuid_from=13)
            if name is None and topic_id is None:
                raise DecodeError("bad topic name")
            np_, pos = _read_len(buf, pos, flexible)
            if np_ < 0:
                raise DecodeError(_NULL % "topic_data.partition_data")
            parts = []
            for _ in range(np_):
                (index,) = _I32.unpack_from(buf, pos)
                n, pos = _read_len(buf, pos + 4, flexible)
                records = None
                if n >= 0:
                    if pos + n > end:
                        raise DecodeError("records run past the request")
                    records = mv[pos:pos + n]
                    pos += n
                if flexible:
                    pos = _skip_tags(buf, pos)
                parts.append(ProducePartition(index, records))
            if flexible:
                pos = _skip_tags(buf, pos)
            topics.append(ProduceTopic(name, topic_id, parts))
        if flexible:
            pos = _skip_tags(buf, pos)
        if pos > end:
            raise DecodeError("request shorter than its fields")
        return ProduceRequestData(txn, acks, timeout, topics)
    except (struct.error, IndexError, ValueError) as e:
        raise DecodeError(str(e)) from e


# ------------------------------------------------------------------------------------------------
# Fetch request
# ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class FetchPartitionData:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(slots=True)
class FetchTopicData:
    topic: str | None
    topic_id: object
    partitions: list


@dataclass(slots=True)
class FetchRequestData:
    replica_id: int | None = None
    max_wait_ms: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    isolation_level: int | None = None
    session_id: int | None = None
    session_epoch: int | None = None
    topics: list | None = None
    forgotten_topics_data: list | None = None
    rack_id: str | None = None


_FETCH_HEAD_V4 = struct.Struct(">iiiib")  # replica_id, max_wait, min_bytes, max_bytes, isolation
_FETCH_HEAD_V15 = struct.Struct(">iiib")  # max_wait, min_bytes, max_bytes, isolation
_I32_PAIR = struct.Struct(">ii")


def decode_fetch_request(buf, pos: int, version: int) -> FetchRequestData:
    """Decode a Fetch request body (v4-v18) starting at ``pos``."""
    try:
        flexible = version >= 12
        if version >= 15:
            replica_id = -1
            max_wait, min_bytes, max_bytes, isolation = _FETCH_HEAD_V15.unpack_from(buf, pos)
            pos += _FETCH_HEAD_V15.size
        else:
            replica_id, max_wait, min_bytes, max_bytes, isolation = _FETCH_HEAD_V4.unpack_from(buf, pos)
            pos += _FETCH_HEAD_V4.size
        session_id, session_epoch = 0, -1
        if version >= 7:
            session_id, session_epoch = _I32_PAIR.unpack_from(buf, pos)
            pos += 8
        nt, pos = _read_len(buf, pos, flexible)
        if nt < 0:
            raise DecodeError(_NULL % "topics")
        topics = []
        for _ in range(nt):
            name, topic_id, pos = _read_topic_key(buf, pos, version, flexible, uuid_from=13)
            np_, pos = _read_len(buf, pos, flexible)
            if name is None and topic_id is None or np_ < 0:
                raise DecodeError(_NULL % ("topics.topic" if np_ >= 0 else "topics.partitions"))
            parts = []
            for _ in range(np_):
                (partition,) = _I32.unpack_from(buf, pos)
                pos += 4
                leader_epoch = -1
                if version >= 9:
                    (leader_epoch,) = _I32.unpack_from(buf, pos)
                    pos += 4
                (fetch_offset,) = _I64.unpack_from(buf, pos)
                pos += 8
                if version >= 12:
                    pos += 4  # last_fetched_epoch
                log_start = -1
                if version >= 5:
                    (log_start,) = _I64.unpack_from(buf, pos)
                    pos += 8
                (pmax,) = _I32.unpack_from(buf, pos)
                pos += 4
                if flexible:
                    pos = _skip_tags(buf, pos)
                parts.append(FetchPartitionData(partition, leader_epoch, fetch_offset, log_start, pmax))
            if flexible:
                pos = _skip_tags(buf, pos)
            topics.append(FetchTopicData(name, topic_id, parts))
        forgotten = []
        if version >= 7:
            nf, pos = _read_len(buf, pos, flexible)
            if nf < 0:
                raise DecodeError(_NULL % "forgotten_topics_data")
            for _ in range(nf):
                name, topic_id, pos = _read_topic_key(buf, pos, version, flexible, uuid_from=13)
                np_, pos = _read_len(buf, pos, flexible)
                if name is None and topic_id is None or np_ < 0:
                    raise DecodeError(_NULL % ("forgotten_topics_data.topic" if np_ >= 0
                                               else "forgotten_topics_data.partitions"))
                if np_ * 4 > len(buf) - pos:
                    raise DecodeError("forgotten partitions run past the request")
                plist = list(struct.unpack_from(f">{np_}i", buf, pos))
                pos += 4 * np_
                if flexible:
                    pos = _skip_tags(buf, pos)
                forgotten.append(FetchTopicData(name, topic_id, plist))
        rack = ""
        if version >= 11:
            rack, pos = _read_str(buf, pos, flexible)
            if rack is None:
                raise DecodeError(_NULL % "rack_id")
        if flexible:
            pos = _skip_tags(buf, pos)
        if pos > len(buf):
            raise DecodeError("request shorter than its fields")
        return FetchRequestData(replica_id=replica_id, max_wait_ms=max_wait, min_bytes=min_bytes,
                                max_bytes=max_bytes, isolation_level=isolation, session_id=session_id,
                                session_epoch=session_epoch, topics=topics, forgotten_topics_data=forgotten,
                                rack_id=rack)
    except (struct.error, IndexError, ValueError) as e:
        raise DecodeError(str(e)) from e


# ------------------------------------------------------------------------------------------------
# Produce response
# ------------------------------------------------------------------------------------------------
# partition tuple: (index, error_code, base_offset, log_append_time_ms, log_start_offset, error_message)
# optionally followed by record_errors: [(batch_index, message), ...] (KIP-467, v8+)
def encode_produce_response(version: int, topics: Sequence[tuple], throttle_time_ms: int = 0) -> bytes:
    """``topics``: [(name, topic_id, [partition tuple, ...]), ...] -> response body bytes (v3-v13)."""
    flexible = version >= 9
    out = [_array_len(len(topics), flexible)]
    for name, topic_id, parts in topics:
        if version >= 13:
            out.append(topic_id.bytes if topic_id is not None else _ZERO_UUID_BYTES)
        else:
            out.append(_string(name, flexible))
        out.append(_array_len(len(parts), flexible))
        for part in parts:
            if len(part) == 6:
                index, error, base_offset, append_time, log_start, message = part
                record_errors = None
            else:
                index, error, base_offset, append_time, log_start, message, record_errors = part
            if version >= 5:
                out.append(_PART_PRODUCE_V5.pack(index, error, base_offset, append_time, log_start))
            else:
                out.append(_PART_PRODUCE_V2.pack(index, error, base_offset, append_time))
            if version >= 8:
                if record_errors:
                    out.append(_array_len(len(record_errors), flexible))
                    for batch_index, batch_message in record_errors:
                        out.append(_I32.pack(batch_index))
                        out.append(_string(batch_message, flexible))
                        if flexible:
                            out.append(b"\x00")
                else:
                    out.append(_array_len(0, flexible))
                out.append(_string(message, flexible))
            if flexible:
                out.append(b"\x00")
        if flexible:
            out.append(b"\x00")
    out.append(_I32.pack(throttle_time_ms))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


# ------------------------------------------------------------------------------------------------
# Fetch response
# ------------------------------------------------------------------------------------------------
# partition tuple: (index, error_code, hw, lso, log_start, aborted [(pid, first_offset)] | None, records)
def encode_fetch_response(version: int, error_code: int, session_id: int, topics: Sequence[tuple],
                          throttle_time_ms: int = 0) -> list:
    """``topics``: [(name, topic_id, [partition tuple, ...]), ...] -> response body as a list of chunks
    (v4-v18); record bytes are passed through as-is."""
    flexible = version >= 12
    chunks: list = []
    head = bytearray(_I32.pack(throttle_time_ms))
    if version >= 7:
        head += _I16.pack(error_code) + _I32.pack(session_id)
    head += _array_len(len(topics), flexible)
    for name, topic_id, parts in topics:
        if version >= 13:
            head += topic_id.bytes if topic_id is not None else _ZERO_UUID_BYTES
        else:
            head += _string(name, flexible)
        head += _array_len(len(parts), flexible)
        for index, error, hw, lso, log_start, aborted, records in parts:
            if version >= 5:
                head += _FETCH_PART_HEAD.pack(index, error, hw, lso, log_start)
            else:
                head += _FETCH_PART_HEAD.pack(index, error, hw, lso, 0)[:-8]
            if aborted is None:
                head += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                head += _array_len(len(aborted), flexible)
                for pid, first in aborted:
                    head += _ABORTED.pack(pid, first)
                    if flexible:
                        head += b"\x00"
            if version >= 11:
                head += b"\xff\xff\xff\xff"  # preferred_read_replica = -1
            n = len(records) if records is not None else -1
            if flexible:
                head += _uvarint(n + 1)
            else:
                head += _I32.pack(n)
            if n > 0:
                chunks.append(bytes(head))
                chunks.append(records)
                head = bytearray()
            if flexible:
                head += b"\x00"
        if flexible:
            head += b"\x00"
    if flexible:
        head += b"\x00"
    chunks.append(bytes(head))
    return chunks
