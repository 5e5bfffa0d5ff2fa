"""``SchemaRegistryServer``: one registry process's parts, wired and run: the ``_schemas`` store read to its end,
the primary election, the REST app under uvicorn on its own thread and event loop.

    with SchemaRegistryServer(RegistrySettings.load(overrides={...})) as registry:
        SchemaRegistryClient({"url": registry.url})

``start`` returns once the state is rebuilt and the listener is bound (port 0 picks a free port; ``url`` tells
it); ``stop`` closes the listener, leaves the election and closes the Kafka clients. The CLI, the broker's
``schema.registry.listen`` and the tests all start it this way.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import threading

import uvicorn
import uvloop

from tidelake.listen_socket import ListenError, bind_listener
from tidelake.schema_registry.election import SolePrimary
from tidelake.schema_registry.forwarding import Forwarder
from tidelake.schema_registry.group_election import GroupElection
from tidelake.schema_registry.http_auth import BasicAuth
from tidelake.schema_registry.kafka_store import KafkaStore
from tidelake.schema_registry.observability import RegistryObserver
from tidelake.schema_registry.registry import SchemaRegistry
from tidelake.schema_registry.rest_app import create_app
from tidelake.schema_registry.settings import RegistrySettings, SettingsError
from tidelake.schema_registry.state import RegistryState
from tidelake.schema_registry.tls import TlsUvicornConfig, forwarding_tls_context, server_tls_context

log = logging.getLogger("tidelake.schema_registry.server")

_START_TIMEOUT_S = 30.0


class SchemaRegistryServer:
    def __init__(self, settings: RegistrySettings):
        self.settings = settings
        self._listener = settings.listener
        self._sock: socket.socket | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._tls = server_tls_context(settings) if self._listener.scheme == "https" else None
        lock = threading.RLock()
        self.state = RegistryState()
        self.store = KafkaStore(settings, self.state, lock)
        self.registry = SchemaRegistry(settings, self.state, lock, self.store)
        self.election: SolePrimary | GroupElection | None = None
        self.port = 0

    @property
    def url(self) -> str:
        host = self.settings.get("host.name") or self._listener.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        shown = f"[{host}]" if ":" in host else host
        return f"{self._listener.scheme}://{shown}:{self.port}"

    def start(self) -> "SchemaRegistryServer":
        self._sock = _bind(self._listener.host, self._listener.port)
        self.port = self._sock.getsockname()[1]
        try:
            self.store.start()
            if self.settings.get("tidelake.election") == "none":
                self.election = SolePrimary(self.store, self.url)
            else:
                self.election = GroupElection(self.settings, self.store, self.url)
            self.election.start()
            self._serve()
        except BaseException:
            self.stop()
            raise
        log.info("schema registry on %s (topic %s at %s)", self.url, self.settings.get("kafkastore.topic"),
                 self.settings.get("kafkastore.bootstrap.servers"))
        return self

    def _serve(self) -> None:
        forwarder = Forwarder(self.election, self.settings.get_int("kafkastore.timeout.ms") / 1000,
                              forwarding_tls_context(self.settings))
        users = self.settings.basic_auth_users()
        auth = BasicAuth(users, self.settings.get("authentication.realm")) \
            if self.settings.get("authentication.method").upper() == "BASIC" else None
        observer = RegistryObserver(self.registry, self.store, self.election)
        app = create_app(self.registry, forwarder, observer.routes(), auth)
        config = TlsUvicornConfig(app, self._tls, lifespan="off", log_level="warning", access_log=False,
                                  timeout_graceful_shutdown=2)
        self._uvicorn = uvicorn.Server(config)
        started = threading.Event()
        sock = self._sock

        def run() -> None:
            loop = uvloop.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._uvicorn.serve(sockets=[sock]))
            finally:
                loop.close()
                started.set()

        self._thread = threading.Thread(target=run, name=f"schema-registry-http-{self.port}", daemon=True)
        self._thread.start()
        for _ in range(int(_START_TIMEOUT_S / 0.01)):
            if self._uvicorn.started or started.is_set():
                break
            started.wait(0.01)
        if not self._uvicorn.started:
            raise SettingsError(f"the REST listener on {self.url} did not start")

    def stop(self) -> None:
        if self._uvicorn is not None and self._thread is not None:
            self._uvicorn.should_exit = True
            self._thread.join(10)
        self._thread = None
        self._uvicorn = None
        if self.election is not None:
            self.election.stop()
        self.store.stop()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "SchemaRegistryServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything starts, so a busy port is one error line."""
    try:
        return bind_listener(host, port)
    except ListenError as e:
        raise SettingsError(f"listeners: {host}:{port}: {e.strerror}") from None
