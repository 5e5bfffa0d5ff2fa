"""The server side of one Kafka connection, sans-IO (in the spirit of h11): bytes in, requests out
one at a time, responses in, bytes out in request order. No sockets, no event loop, no clock.

Kafka's rules for a connection, all kept here:

* Framing: size-prefixed request frames; a malformed stream or a frame over the size limit raises
  ``FramingError`` from ``receive_data`` and the transport closes the connection.
* Ordering and muting: one request is handled at a time (``next_request`` hands out the next one
  only after the previous was answered with ``respond``), so responses leave in request order.
* Backpressure: once ``max_queued`` requests wait, ``receive_data`` asks the transport to stop
  reading; ``resume_reading`` says when to start again (every queued request was taken).
* acks=0: a Produce with acks=0 expects no response (``expects_response``); the handler answers
  ``None`` (``respond(None)`` writes nothing), and the only way to report its failure is to close.
* Coalescing: while the next queued request is a Produce (answered at once, never parked), an
  answer is held back so pipelined answers leave in one write (a syscall per response is a large
  share of the broker's time on small requests); anything else flushes first, so no answer waits
  behind a Fetch long-poll.
"""
from __future__ import annotations

import collections

from tidelake.protocol.framing import FrameDecoder

PRODUCE_KEY = 0


def expects_response(api_key: int, request) -> bool:
    """False only for Produce with acks=0: the client reads no response to it."""
    return api_key != PRODUCE_KEY or request is None or request.acks != 0


def _is_produce(frame) -> bool:
    return frame[0] == 0 and frame[1] == 0  # api_key int16 == 0 (frames are at least 8 bytes)


class Connection:
    """One client connection's protocol state. The transport calls ``receive_data`` with what the
    socket read, handles each frame ``next_request`` returns, passes the answer to ``respond`` and
    writes whatever ``data_to_send`` returns."""

    __slots__ = ("_decoder", "_requests", "_pending", "_in_flight", "_max_queued", "_coalesce_max",
                 "reading_paused")

    def __init__(self, max_request_bytes: int, *, max_queued: int = 64, coalesce_max: int = 64):
        self._decoder = FrameDecoder(max_request_bytes)
        self._requests: collections.deque = collections.deque()
        self._pending: list = []  # response chunks not yet handed to the transport
        self._in_flight = False
        self._max_queued = max_queued
        self._coalesce_max = coalesce_max
        self.reading_paused = False

    def receive_data(self, data) -> bool:
        """Take bytes read from the socket. Returns True when the transport must pause reading (too
        many requests queued). Raises FramingError for a stream that is not Kafka framing."""
        frames = self._decoder.feed(data)
        if not frames:
            return False
        self._requests.extend(frames)
        if len(self._requests) >= self._max_queued and not self.reading_paused:
            self.reading_paused = True
            return True
        return False

    @property
    def has_request(self) -> bool:
        return bool(self._requests)

    def next_request(self):
        """The next request frame to handle (the connection is muted until ``respond``), or None
        while one is in flight or none is queued."""
        if self._in_flight or not self._requests:
            return None
        self._in_flight = True
        return self._requests.popleft()

    def resume_reading(self) -> bool:
        """True once when reading was paused and every queued request has been taken."""
        if self.reading_paused and not self._requests:
            self.reading_paused = False
            return True
        return False

    def respond(self, response) -> None:
        """Answer the request in flight: a response frame (bytes, or a list of chunks to write in
        order), or None when the request expects no response (acks=0)."""
        self._in_flight = False
        if response is None:
            return
        if type(response) is list:
            self._pending.extend(response)
        else:
            self._pending.append(response)

    def data_to_send(self) -> list | None:
        """Response chunks to write now, or None (nothing, or answers held back for coalescing)."""
        pending = self._pending
        if not pending:
            return None
        requests = self._requests
        if requests and len(pending) < self._coalesce_max and _is_produce(requests[0]):
            return None
        self._pending = []
        return pending

    def close(self) -> list:
        """The connection is closing (a bad request, an acks=0 failure): the answers still owed to
        the requests before it, to write before closing."""
        pending, self._pending = self._pending, []
        self._requests.clear()
        return pending
