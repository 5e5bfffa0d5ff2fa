"""A minimal blocking Kafka wire client: send one ApiMessage request, read its response.

For tests and tools that must control exact bytes (hand-crafted retries, malformed frames) or
talk to a broker without a client library's negotiation logic.
"""
from __future__ import annotations

import socket
import struct
from typing import Any

from tidelake.protocol.connection import expects_response
from tidelake.protocol.framing import encode_request_frame, split_response_frame


class WireClient:
    def __init__(self, host: str, port: int, *, timeout: float = 10.0, client_id: str = "tidelake-wire"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._correlation_id = 0

    @classmethod
    def connect(cls, bootstrap: str, **kw) -> "WireClient":
        host, _, port = bootstrap.rpartition(":")
        return cls(host, int(port), **kw)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def next_correlation_id(self) -> int:
        self._correlation_id += 1
        return self._correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        """One response frame without its size prefix. Raises ConnectionError if the broker closed."""
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(min(n - got, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def encode(self, request: Any, version: int, correlation_id: int | None = None) -> bytes:
        cid = self.next_correlation_id() if correlation_id is None else correlation_id
        body = bytes(request.encode(version=version))
        flexible = request.flexible_version_q(version)
        return encode_request_frame(request.API_KEY, version, cid, body, self.client_id, flexible_header=flexible)

    def request(self, request: Any, version: int, response_cls: Any = None) -> Any:
        """Send ``request`` at ``version`` and decode the response (None if it expects none)."""
        cid = self.next_correlation_id()
        self.send_raw(self.encode(request, version, cid))
        if not expects_response(request.API_KEY, request):
            return None
        return self.read_response(request, version, cid, response_cls)

    def read_response(self, request: Any, version: int, correlation_id: int, response_cls: Any = None) -> Any:
        if response_cls is None:
            from kafka.protocol.api_header import ResponseClassRegistry
            response_cls = ResponseClassRegistry._response_class_registry[request.API_KEY]
        frame = self.recv_frame()
        flexible = request.API_KEY != 18 and response_cls.flexible_version_q(version)
        cid, body = split_response_frame(frame, flexible_header=flexible)
        if cid != correlation_id:
            raise AssertionError(f"correlation id {cid} != {correlation_id}")
        return response_cls.decode(body, version=version)
