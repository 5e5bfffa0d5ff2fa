"""Sans-IO pieces of the broker: framing, request headers, configs, metadata persistence."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from tidelake.broker.config import (SOURCE_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_TOPIC, BrokerConfig,
                                    parse_properties, validate_topic_configs)
from tidelake.broker.metadata import PRODUCER_ID_BLOCK, MetadataStore, TopicInfo
from tidelake.errors import InvalidConfig
from tidelake.protocol.framing import (FrameDecoder, FrameTooLarge, FramingError, encode_request_frame,
                                       encode_response_frame, parse_request_header, split_response_frame)


def _frames(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 50), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_frame_decoder_splits_any_chunking(payloads, chunk_sizes):
    stream = _frames(*payloads)
    dec = FrameDecoder(max_frame_bytes=1000)
    out, pos, i = [], 0, 0
    while pos < len(stream):
        n = chunk_sizes[i % len(chunk_sizes)]
        out += dec.feed(stream[pos:pos + n])
        pos += n
        i += 1
    assert out == payloads
    assert dec.buffered == 0


def test_frame_decoder_spanning_frame_is_writable_and_survives_reused_input_buffers():
    """A frame split across chunks comes back as a bytearray (the log patches it in place); mutable
    input chunks may be reused by the caller right after ``feed``."""
    payload = bytes(range(256)) * 40
    stream = _frames(payload, b"tail")
    dec = FrameDecoder()
    reused = bytearray(1000)
    out = []
    for i in range(0, len(stream), 1000):
        chunk = stream[i:i + 1000]
        reused[:len(chunk)] = chunk
        # (a frame wholly inside a chunk is a view of it: the caller uses it before reusing the buffer)
        out += [f if isinstance(f, bytearray) else bytes(f) for f in dec.feed(memoryview(reused)[:len(chunk)])]
        reused[:] = b"\xee" * len(reused)  # the caller overwrites its buffer
    assert out == [payload, b"tail"]
    assert isinstance(out[0], bytearray)
    out[0][0:1] = b"!"  # writable
    # bytes chunks are referenced until the frame completes, then joined once
    dec = FrameDecoder()
    assert dec.feed(stream[:3000]) == [] and dec.buffered == 2996
    frames = dec.feed(stream[3000:])
    assert frames == [payload, b"tail"] and isinstance(frames[0], bytearray) and dec.buffered == 0


def test_frame_decoder_rejects_oversize_before_buffering_it():
    dec = FrameDecoder(max_frame_bytes=100)
    assert dec.feed(struct.pack(">i", 100) + b"x" * 100) == [b"x" * 100]
    with pytest.raises(FrameTooLarge):
        dec.feed(struct.pack(">i", 101))


def test_frame_decoder_rejects_negative_size():
    with pytest.raises(FramingError):
        FrameDecoder().feed(struct.pack(">i", -5))


def test_request_header_v1_and_v2_round_trip():
    frame = encode_request_frame(3, 12, 77, b"BODY", "client-x", flexible_header=True)[4:]
    header, pos = parse_request_header(frame, lambda k, v: v >= 9)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 77, "client-x")
    assert header.flexible and frame[pos:] == b"BODY"
    frame = encode_request_frame(3, 4, 5, b"B", None)[4:]
    header, pos = parse_request_header(frame, lambda k, v: v >= 9)
    assert header.client_id is None and not header.flexible and frame[pos:] == b"B"


def test_request_header_with_lying_client_id_length_is_rejected():
    frame = struct.pack(">hhih", 3, 1, 1, 500) + b"abc"
    with pytest.raises(FramingError):
        parse_request_header(frame, lambda k, v: False)


def test_response_frame_headers():
    f = encode_response_frame(9, b"xyz", flexible_header=True)
    assert struct.unpack(">i", f[:4])[0] == len(f) - 4
    assert split_response_frame(f[4:], flexible_header=True) == (9, b"xyz")
    f = encode_response_frame(9, b"xyz", flexible_header=False)
    assert split_response_frame(f[4:], flexible_header=False) == (9, b"xyz")


def test_metadata_store_save_async_writes_on_a_worker_thread_and_never_goes_back(tmp_path):
    import asyncio
    m = MetadataStore(tmp_path)
    m.add_topic(TopicInfo("late", 1), save=False)
    assert "late" not in MetadataStore(tmp_path).topics  # not on disk until saved
    asyncio.run(m.save_async())
    assert "late" in MetadataStore(tmp_path).topics
    stale = m._serialize()  # a state serialised before the next change...
    m.add_topic(TopicInfo("newer", 1))
    m._write(*stale)  # ...and written after it (a slow worker) does not replace the newer state
    assert set(MetadataStore(tmp_path).topics) == {"late", "newer"}


def test_properties_parsing_and_broker_precedence(tmp_path):
    props = parse_properties("# comment\nlog.segment.bytes=1024\n! other\nnum.partitions : 3\n\nlog.retention.hours=1\n")
    assert props == {"log.segment.bytes": "1024", "num.partitions": "3", "log.retention.hours": "1"}
    f = tmp_path / "server.properties"
    f.write_text("log.segment.bytes=1024\nlog.retention.hours=1\n")
    c = BrokerConfig.from_file(f, {"num.partitions": "5"})
    assert c.get_int("num.partitions") == 5
    # topic defaults come from broker synonyms, converted to the topic config's unit
    assert c.topic_default("segment.bytes") == ("1024", SOURCE_STATIC_BROKER)
    assert c.topic_default("retention.ms") == ("3600000", SOURCE_STATIC_BROKER)
    assert c.topic_default("cleanup.policy") == ("delete", SOURCE_DEFAULT)
    entries = {e.name: e for e in c.describe_topic({"cleanup.policy": "compact"}, with_synonyms=True)}
    assert entries["cleanup.policy"].source == SOURCE_TOPIC and entries["cleanup.policy"].value == "compact"
    assert entries["retention.ms"].synonyms[0] == ("log.retention.hours", "3600000", SOURCE_STATIC_BROKER)
    assert entries["retention.ms"].synonyms[-1] == ("log.retention.hours", "604800000", SOURCE_DEFAULT)


def test_topic_config_validation():
    assert validate_topic_configs({"cleanup.policy": "compact, delete"}) == {"cleanup.policy": "compact,delete"}
    for bad in ({"no.such.config": "1"}, {"retention.ms": "abc"}, {"cleanup.policy": "shred"},
                {"message.timestamp.type": "Now"}, {"segment.bytes": "1"}):
        with pytest.raises(InvalidConfig):
            validate_topic_configs(bad)


def test_metadata_store_persists_topics_and_producer_ids_are_monotonic(tmp_path):
    m = MetadataStore(tmp_path)
    m.add_topic(TopicInfo("a", 3, {"retention.ms": "5"}))
    ids = [m.allocate_producer_id() for _ in range(3)]
    assert ids == [0, 1, 2]
    m2 = MetadataStore(tmp_path)  # as after a crash: ids of the reserved block are never reused
    assert m2.topics["a"].partitions == 3 and m2.topics["a"].configs == {"retention.ms": "5"}
    assert m2.topics["a"].topic_id == m.topics["a"].topic_id
    assert m2.allocate_producer_id() >= PRODUCER_ID_BLOCK
