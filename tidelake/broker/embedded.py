"""``EmbeddedBroker``: a whole broker in a background thread, for tests, demos and notebooks.

    with EmbeddedBroker(tmp_path) as b:
        Producer({"bootstrap.servers": b.bootstrap_servers})...
"""
from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Coroutine, Mapping

import uvloop

from tidelake.broker.config import BrokerConfig
from tidelake.broker.server import Broker

log = logging.getLogger("tidelake.broker.embedded")


def new_event_loop() -> asyncio.AbstractEventLoop:
    return uvloop.new_event_loop()


class EmbeddedBroker:
    """Runs a ``Broker`` on its own event loop in a daemon thread; ``stop()`` flushes and closes logs."""

    def __init__(self, data_dir: str | Path, port: int = 0, config: Mapping[str, str] | BrokerConfig | None = None,
                 host: str = "127.0.0.1", start_timeout_s: float = 30.0):
        self.data_dir = Path(data_dir)
        self._config = config
        self._host, self._port = host, port
        self._start_timeout_s = start_timeout_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker: Broker | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        assert self.broker is not None, "broker not started"
        return self.broker.port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self._host}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """``http://HOST:PORT`` serving /metrics and /health/* (None unless ``metrics.listen`` is set)."""
        assert self.broker is not None, "broker not started"
        return self.broker.metrics_url

    @property
    def schema_registry_url(self) -> str | None:
        """The URL of the schema registry this broker runs (None unless ``schema.registry.listen`` is set)."""
        assert self.broker is not None, "broker not started"
        return self.broker.schema_registry.url

    def bootstrap_for(self, listener: str) -> str:
        """The address of one named listener (``listeners=...,SASL_SSL://127.0.0.1:0``)."""
        assert self.broker is not None, "broker not started"
        return f"{self._host}:{self.broker.ports[listener]}"

    def start(self) -> "EmbeddedBroker":
        if self._thread is not None:
            raise RuntimeError("already started")
        started: Future = Future()
        self.loop = new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self.broker = Broker(self.data_dir, self._config, host=self._host, port=self._port)
                self.loop.run_until_complete(self.broker.start())
            except BaseException as e:
                started.set_exception(e)
                self.loop.close()
                self._stopped.set()
                return
            started.set_result(None)
            try:
                self.loop.run_forever()
            finally:
                try:
                    pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                    for t in pending:
                        t.cancel()
                    if pending:
                        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                finally:
                    self.loop.close()
                    self._stopped.set()

        self._thread = threading.Thread(target=run, name=f"tidelake-broker-{self.data_dir.name}", daemon=True)
        self._thread.start()
        started.result(self._start_timeout_s)
        return self

    def call(self, coro: Coroutine, timeout: float = 30.0) -> Any:
        """Run a coroutine on the broker's loop and return its result (from any other thread)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, fn, *args, timeout: float = 30.0) -> Any:
        """Call a plain function on the broker's loop thread (e.g. ``b.run(b.broker.create_topic, "t", 3)``)."""
        async def _call():
            return fn(*args)
        return self.call(_call(), timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is None or self.loop is None:
            return
        if not self._stopped.is_set():
            try:
                self.call(self.broker.stop(), timeout)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
