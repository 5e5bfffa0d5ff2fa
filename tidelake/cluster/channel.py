"""``BrokerChannel``: one asyncio connection from this broker to another (the controller's
LeaderAndIsr/UpdateMetadata/StopReplica, a follower's Fetch and OffsetForLeaderEpoch): one request
at a time, reconnecting on the next request after a failure."""
from __future__ import annotations

import asyncio
import struct
from typing import Any

from kafka.protocol.api_header import ResponseClassRegistry

from tidelake.protocol.framing import encode_request_frame, split_response_frame


class ChannelError(Exception):
    """The request could not be completed (connection refused or lost, timeout); the message says where."""


class BrokerChannel:
    def __init__(self, broker_id: int, host: str, port: int, *, client_id: str, timeout_s: float = 30.0):
        self.broker_id, self.host, self.port = broker_id, host, port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._correlation_id = 0

    def __repr__(self) -> str:
        return f"BrokerChannel(broker {self.broker_id} at {self.host}:{self.port})"

    async def request(self, message: Any, version: int, timeout_s: float | None = None) -> Any:
        """Send ``message`` at ``version``; return the decoded response. Raises ChannelError."""
        async with self._lock:
            try:
                response = await asyncio.wait_for(self._exchange(message, version), timeout_s or self.timeout_s)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError) as e:
                self.close()
                raise ChannelError(f"broker {self.broker_id} at {self.host}:{self.port}: "
                                   f"{type(e).__name__} {e}".rstrip()) from None
        # Python 3.11's wait_for returns the result when the answer and a cancellation of this task come together,
        # swallowing the cancellation: a sender loop cancelled at shutdown would wait for its next request forever
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError
        return response

    async def _exchange(self, message: Any, version: int) -> Any:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        self._correlation_id += 1
        cid = self._correlation_id
        body = bytes(message.encode(version=version))
        self._writer.write(encode_request_frame(message.API_KEY, version, cid, body, self.client_id,
                                                flexible_header=message.flexible_version_q(version)))
        await self._writer.drain()
        size = struct.unpack(">i", await self._reader.readexactly(4))[0]
        frame = await self._reader.readexactly(size)
        response_cls = ResponseClassRegistry._response_class_registry[message.API_KEY]
        got, payload = split_response_frame(frame, flexible_header=response_cls.flexible_version_q(version))
        if got != cid:
            raise ConnectionError(f"correlation id {got} != {cid}")
        return response_cls.decode(payload, version=version)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
