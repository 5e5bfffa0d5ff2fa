"""Kafka wire framing and request/response headers, sans-IO.

A Kafka connection carries size-prefixed frames: ``int32 size`` then ``size`` bytes. A request frame
starts with a request header (v1: api_key int16, api_version int16, correlation_id int32,
client_id nullable string; v2 adds tagged fields); a response frame starts with a response header
(v0: correlation_id; v1 adds tagged fields). Which header version applies depends on whether the
request's API version is "flexible" — the caller supplies that knowledge (see ``parse_request_header``).

``FrameDecoder`` is fed raw bytes and returns complete frames, in the style of h11: no sockets here,
so it is trivially fuzzable.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

_INT32 = struct.Struct(">i")
_REQ_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_RESP_FRAME_V0 = struct.Struct(">ii")  # size, correlation_id


class FramingError(ValueError):
    """The byte stream is not valid Kafka framing; the connection must be closed."""


class FrameTooLarge(FramingError):
    """A frame announced a size above the limit (``socket.request.max.bytes``)."""


class FrameDecoder:
    """Splits a byte stream into complete frames (without the size prefix).

    Frames wholly inside one ``feed`` chunk are returned as zero-copy memoryviews of it; a frame that
    spans chunks is gathered as references to the chunks' slices and joined once, when complete, into
    a bytearray of its exact size (writable, so the log can patch offsets in place; ``bytearray.join``
    copies each byte once and, unlike ``bytearray(size)``, does not zero-fill first). ``feed`` raises
    ``FrameTooLarge`` as soon as a size prefix above ``max_frame_bytes`` is seen and ``FramingError``
    for a negative size, so the caller never buffers an oversize request.

    ``bytes`` chunks are referenced, not copied, until their frame completes; chunks of a mutable type
    (bytearray, writable memoryview) are copied, since the caller may reuse them.
    """

    __slots__ = ("max_frame_bytes", "_prefix", "_parts", "_missing", "_filled")

    def __init__(self, max_frame_bytes: int = 100 * 1024 * 1024):
        self.max_frame_bytes = max_frame_bytes
        self._prefix = b""  # up to 3 bytes of a size prefix split across chunks
        self._parts: list | None = None  # pieces of the frame being assembled across chunks
        self._missing = 0  # bytes that frame still needs
        self._filled = 0  # bytes it has

    @property
    def buffered(self) -> int:
        return len(self._prefix) + self._filled

    def feed(self, data: bytes | bytearray | memoryview) -> list:
        """Add bytes; return every frame now complete (possibly none), as bytes-like objects."""
        frames: list = []
        mv = memoryview(data)
        keep_refs = isinstance(data, bytes)
        pos, end = 0, len(mv)
        while pos < end:
            parts = self._parts
            if parts is not None:
                take = min(self._missing, end - pos)
                piece = mv[pos:pos + take]
                parts.append(piece if keep_refs else bytes(piece))
                self._missing -= take
                self._filled += take
                pos += take
                if not self._missing:
                    frames.append(bytearray().join(parts))
                    self._parts, self._filled = None, 0
                continue
            if self._prefix or end - pos < 4:
                need = 4 - len(self._prefix)
                self._prefix += bytes(mv[pos:pos + need])
                pos += min(need, end - pos)
                if len(self._prefix) < 4:
                    break
                (size,) = _INT32.unpack(self._prefix)
                self._prefix = b""
            else:
                (size,) = _INT32.unpack_from(mv, pos)
                pos += 4
            if size < 0:
                raise FramingError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                raise FrameTooLarge(f"frame of {size} bytes exceeds limit {self.max_frame_bytes}")
            if end - pos >= size:
                frames.append(mv[pos:pos + size])
                pos += size
            else:
                self._parts, self._missing, self._filled = [], size, 0
        return frames


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    flexible: bool = False  # header v2 (and body uses compact/tagged encodings)


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """An unsigned varint (Kafka's compact lengths and tags) at ``pos``: (value, position after it)."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise FramingError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise FramingError("varint too long")


def peek_api(frame) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame — the part common to all versions."""
    if len(frame) < 8:
        raise FramingError("request frame shorter than its header")
    return struct.unpack_from(">hhi", frame, 0)


def parse_request_header(frame, is_flexible: Callable[[int, int], bool]) -> tuple[RequestHeader, int]:
    """Parse the request header of ``frame``; return it and the offset where the body starts.

    ``is_flexible(api_key, api_version)`` says whether header v2 (tagged fields) applies.
    """
    if len(frame) < _REQ_HEADER_FIXED.size:
        raise FramingError("request frame shorter than its header")
    api_key, api_version, correlation_id, n = _REQ_HEADER_FIXED.unpack_from(frame, 0)
    pos = _REQ_HEADER_FIXED.size
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise FramingError("client_id runs past the frame")
        client_id = bytes(frame[pos:pos + n]).decode("utf-8", "replace")
        pos += n
    elif n != -1:
        raise FramingError(f"bad client_id length {n}")
    flexible = is_flexible(api_key, api_version)
    if flexible:  # skip header tagged fields
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(frame, pos)
            size, pos = read_uvarint(frame, pos)
            pos += size
            if pos > len(frame):
                raise FramingError("tagged field runs past the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id, flexible), pos


def encode_response_frame(correlation_id: int, body: bytes | bytearray | memoryview, *,
                          flexible_header: bool) -> bytes:
    """One response frame: size, header v0 (or v1 with empty tagged fields), body — joined once."""
    if flexible_header:
        return _RESP_FRAME_V0.pack(len(body) + 5, correlation_id) + b"\x00" + body
    return _RESP_FRAME_V0.pack(len(body) + 4, correlation_id) + body


def encode_request_frame(api_key: int, api_version: int, correlation_id: int, body: bytes,
                         client_id: str | None = "tidelake", *, flexible_header: bool = False) -> bytes:
    """A request frame (used by tests and tools that speak to a broker without a client library)."""
    cid = b"" if client_id is None else client_id.encode()
    header = struct.pack(">hhih", api_key, api_version, correlation_id, -1 if client_id is None else len(cid)) + cid
    if flexible_header:
        header += b"\x00"
    payload = header + body
    return _INT32.pack(len(payload)) + payload


def split_response_frame(frame: bytes, *, flexible_header: bool) -> tuple[int, bytes]:
    """(correlation_id, body) of a response frame without its size prefix (tests/tools)."""
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    pos = 4
    if flexible_header:
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(frame, pos)
            size, pos = read_uvarint(frame, pos)
            pos += size
    return correlation_id, frame[pos:]
