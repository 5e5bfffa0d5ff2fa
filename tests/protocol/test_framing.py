"""Kafka wire framing and request/response headers (sans-IO)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

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
