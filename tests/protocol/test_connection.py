"""The sans-IO server connection: framing in, one request at a time, answers in order, backpressure,
acks=0 without a response, coalescing of pipelined Produce answers."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from tidelake.protocol.connection import Connection, expects_response
from tidelake.protocol.framing import FramingError, encode_request_frame


def request(api_key: int, correlation_id: int) -> bytes:
    return encode_request_frame(api_key, 0, correlation_id, b"body", "c")


def correlation_id(frame) -> int:
    return struct.unpack_from(">i", frame, 4)[0]


@given(st.lists(st.sampled_from([0, 1, 3, 18]), min_size=1, max_size=30), st.integers(1, 40))
@settings(max_examples=200, deadline=None)
def test_requests_leave_one_at_a_time_and_answers_in_order(keys, chunk):
    stream = b"".join(request(k, i) for i, k in enumerate(keys))
    conn = Connection(1 << 20, max_queued=1000)
    written, handled = [], []
    for pos in range(0, len(stream), chunk):
        conn.receive_data(stream[pos:pos + chunk])
        while (frame := conn.next_request()) is not None:
            assert conn.next_request() is None  # muted while a request is in flight
            handled.append(correlation_id(frame))
            conn.respond(b"answer-%d" % correlation_id(frame))
            written += conn.data_to_send() or []
    written += conn.close()
    assert handled == list(range(len(keys)))
    assert written == [b"answer-%d" % i for i in range(len(keys))]


def test_produce_answers_are_held_back_while_the_next_request_is_a_produce():
    conn = Connection(1 << 20)
    conn.receive_data(request(0, 1) + request(0, 2) + request(1, 3))
    conn.next_request()
    conn.respond(b"p1")
    assert conn.data_to_send() is None  # the next request is a Produce: coalesce
    conn.next_request()
    conn.respond([b"p2-head", b"p2-body"])
    assert conn.data_to_send() == [b"p1", b"p2-head", b"p2-body"]  # a Fetch is next: flush first
    conn.next_request()
    conn.respond(b"f3")
    assert conn.data_to_send() == [b"f3"]


def test_acks0_produce_expects_no_response_and_writes_nothing():
    class Produce:
        def __init__(self, acks):
            self.acks = acks
    assert not expects_response(0, Produce(0))
    assert expects_response(0, Produce(1)) and expects_response(0, Produce(-1)) and expects_response(3, None)
    conn = Connection(1 << 20)
    conn.receive_data(request(0, 1))
    conn.next_request()
    conn.respond(None)
    assert conn.data_to_send() is None and conn.close() == []


def test_backpressure_pauses_reading_until_every_queued_request_was_taken():
    conn = Connection(1 << 20, max_queued=3)
    assert conn.receive_data(request(3, 1) + request(3, 2)) is False
    assert conn.receive_data(request(3, 3)) is True and conn.reading_paused
    assert conn.receive_data(request(3, 4)) is False  # already paused
    for _ in range(4):
        assert conn.resume_reading() is False
        conn.next_request()
        conn.respond(b"x")
    assert conn.resume_reading() is True and not conn.reading_paused


def test_bad_framing_and_oversize_requests_raise():
    with pytest.raises(FramingError):
        Connection(100).receive_data(struct.pack(">i", 101))
    with pytest.raises(FramingError):
        Connection(100).receive_data(struct.pack(">i", -1))


def test_close_returns_the_answers_still_owed():
    conn = Connection(1 << 20)
    conn.receive_data(request(0, 1) + request(0, 2) + request(0, 3))
    conn.next_request()
    conn.respond(b"p1")
    assert conn.data_to_send() is None
    conn.next_request()  # this one turns out to be bad: the connection closes after p1 goes out
    assert conn.close() == [b"p1"] and conn.next_request() is None
