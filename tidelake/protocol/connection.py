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
* Authentication (SASL listeners): until the connection is authenticated only ApiVersions and
  SaslHandshake, then SaslAuthenticate, are accepted (``next_request`` raises
  ``AuthenticationOrderError`` for anything else, as Kafka closes such a connection); frames are
  limited to ``sasl.server.max.receive.size`` meanwhile. After a SaslHandshake v0 the next frame is a
  raw SASL token, not a request (``raw_token``). The SASL exchange itself (mechanisms, credentials)
  is not this class's: the handler reports its outcome with ``handshake_done`` / ``authenticated``,
  and ``close_after_response`` makes the transport close once the failure answer is written.
"""
from __future__ import annotations

import collections

from tidelake.protocol.framing import FrameDecoder, FramingError

PRODUCE_KEY = 0
SASL_HANDSHAKE_KEY, API_VERSIONS_KEY, SASL_AUTHENTICATE_KEY = 17, 18, 36

# authentication states (0 = authenticated, so the hot path tests one falsy int)
AUTHENTICATED, EXPECT_HANDSHAKE, EXPECT_AUTHENTICATE, EXPECT_RAW_TOKEN = 0, 1, 2, 3
_ALLOWED_BEFORE_AUTH = {EXPECT_HANDSHAKE: (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY),
                        EXPECT_AUTHENTICATE: (SASL_AUTHENTICATE_KEY,)}


class AuthenticationOrderError(FramingError):
    """A request the connection's authentication state does not allow: the connection is closed."""


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
                 "reading_paused", "auth_state", "_max_request_bytes", "closing", "raw_token")

    def __init__(self, max_request_bytes: int, *, max_queued: int = 64, coalesce_max: int = 64,
                 authenticate: bool = False, max_unauthenticated_bytes: int = 524288):
        self._max_request_bytes = max_request_bytes
        self.auth_state = EXPECT_HANDSHAKE if authenticate else AUTHENTICATED
        self._decoder = FrameDecoder(min(max_unauthenticated_bytes, max_request_bytes) if authenticate
                                     else max_request_bytes)
        self.closing = False  # close once what is owed has been written (a failed authentication)
        self.raw_token = False  # the frame handed out last is a raw SASL token (after SaslHandshake v0)
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
        frame = self._requests.popleft()
        if self.auth_state:
            self._check_authentication_order(frame)
        return frame

    def _check_authentication_order(self, frame) -> None:
        state = self.auth_state
        if state == EXPECT_RAW_TOKEN:
            self.raw_token = True
            return
        self.raw_token = False
        api_key = int.from_bytes(frame[0:2], "big", signed=True) if len(frame) >= 2 else -1
        if api_key not in _ALLOWED_BEFORE_AUTH[state]:
            self.closing = True
            raise AuthenticationOrderError(f"unexpected request (api key {api_key}) before SASL authentication"
                                           f" completed ({'handshake' if state == EXPECT_HANDSHAKE else 'authenticate'}"
                                           " expected)")

    # -- the authentication outcome, reported by the SASL handlers --------------------------------------
    def handshake_done(self, version: int) -> None:
        """A mechanism was agreed: SaslAuthenticate requests follow (v1), or raw tokens (v0)."""
        self.auth_state = EXPECT_AUTHENTICATE if version >= 1 else EXPECT_RAW_TOKEN

    def authenticated(self) -> None:
        self.auth_state = AUTHENTICATED
        self.raw_token = False
        self._decoder.max_frame_bytes = self._max_request_bytes

    def close_after_response(self) -> None:
        self.closing = True

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
