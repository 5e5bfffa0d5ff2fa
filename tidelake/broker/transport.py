"""The asyncio side of a client connection: moves bytes between the socket and the sans-IO
``tidelake.protocol.connection.Connection`` and runs its requests, one at a time, through the
``Dispatcher``. Every protocol rule (framing, order, muting, backpressure, acks=0, coalescing)
is the Connection's; this class only does I/O and the per-connection task. TLS is asyncio's (the
server socket's ``SSLContext``); the peer's certificate, read once the handshake is done, names the
principal of an SSL listener's connection."""
from __future__ import annotations

import asyncio
import logging
import time

from tidelake.broker.dispatch import Dispatcher
from tidelake.protocol.connection import Connection
from tidelake.protocol.framing import FramingError
from tidelake.security.config import ListenerSecurity
from tidelake.security.principal import principal_from_certificate
from tidelake.security.session import Session

log = logging.getLogger("tidelake.broker.transport")


class KafkaTransport(asyncio.Protocol):
    def __init__(self, dispatcher: Dispatcher, registry: set, max_request_bytes: int, listener: ListenerSecurity,
                 max_unauthenticated_bytes: int = 524288, failed_auth_delay_s: float = 0.1):
        self.dispatcher = dispatcher
        # connection.failed.authentication.delay.ms: a client guessing passwords waits this long per try
        self.failed_auth_delay_s = failed_auth_delay_s
        self.registry = registry  # the broker's open transports (closed at stop, or when idle)
        self.listener = listener
        self.connection = Connection(max_request_bytes, authenticate=listener.sasl,
                                     max_unauthenticated_bytes=max_unauthenticated_bytes)
        self.session: Session | None = None
        self.transport: asyncio.Transport | None = None
        self.peer: tuple | None = None
        self.client_host = ""
        self.closed = False
        self.idle_since: float | None = time.monotonic()  # None while a request is queued or in flight
        self._wakeup: asyncio.Future | None = None
        self._writable: asyncio.Future | None = None
        self._worker: asyncio.Task | None = None

    # asyncio.Protocol callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.client_host = self.peer[0] if self.peer else ""
        self.session = Session(self.listener.name, self.listener.protocol, self.client_host,
                               connection=self.connection)
        if self.listener.protocol == "SSL":
            ssl_object = transport.get_extra_info("ssl_object")
            self.session.principal = principal_from_certificate(
                ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None)
        self.registry.add(self)
        log.debug("connection from %s opened", self.peer)
        self._worker = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            pause = self.connection.receive_data(data)
        except FramingError as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            self.close()
            return
        if self.connection.has_request:
            self.idle_since = None
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)
        if pause:
            self.transport.pause_reading()

    def connection_lost(self, exc) -> None:
        log.debug("connection from %s closed%s", self.peer, f" ({exc})" if exc else "")
        self.closed = True
        self.registry.discard(self)
        for fut in (self._wakeup, self._writable):
            if fut is not None and not fut.done():
                fut.cancel()

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.cancel()

    def _write(self, chunks: list) -> None:
        if len(chunks) == 1:
            self.transport.write(chunks[0])
        else:
            self.transport.writelines(chunks)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        conn = self.connection
        handle_frame = self.dispatcher.handle_frame
        session = self.session
        try:
            while not self.closed:
                try:
                    frame = conn.next_request()
                except FramingError as e:  # a request the authentication state does not allow
                    log.warning("closing connection from %s: %s", self.peer, e)
                    self.close()
                    return
                if frame is None:
                    self.idle_since = time.monotonic()
                    if conn.resume_reading():
                        self.transport.resume_reading()
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                if session.expires_at is not None and not conn.raw_token and session.expired_on(
                        int.from_bytes(frame[0:2], "big", signed=True), time.monotonic()):
                    log.info("closing connection from %s: its SASL session (%s) expired without re-authentication "
                             "(connections.max.reauth.ms)", self.peer, session.principal)
                    self.close()
                    return
                try:
                    if conn.raw_token:  # after SaslHandshake v0 (the Connection knows): not a request
                        out = self.dispatcher.handle_raw_sasl_token(frame, session)
                    else:
                        out = await handle_frame(frame, session)
                except FramingError as e:
                    log.warning("closing connection from %s: %s", self.peer, e)
                    owed = conn.close()  # answers to the requests before the bad one still go out
                    if owed:
                        self._write(owed)
                    self.close()
                    return
                if self.closed:
                    return
                conn.respond(out)
                chunks = conn.data_to_send()
                if chunks is not None:
                    self._write(chunks)
                    if conn.closing:  # a failed login: its answer is written, then, after the delay, the end
                        if self.failed_auth_delay_s > 0:
                            await asyncio.sleep(self.failed_auth_delay_s)
                        self.close()
                        return
                    if self._writable is not None:
                        await self._writable
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection from %s failed; closing it", self.peer)
        finally:
            self.close()
