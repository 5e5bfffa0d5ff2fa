"""Fixtures for tests that need a schema registry (tidelake's, Confluent's REST API).

In-process (fast):
    def test_x(schema_registry):                 # a registry on a free port against its own embedded broker
        SchemaRegistryClient({"url": schema_registry.url})
    with start_registry(broker.bootstrap_servers, {"tidelake.election": "none"}) as registry: ...

As a child process (`tidelake schema-registry start`), stopped by its pid:
    with registry_process(bootstrap) as url: ...

Import the fixtures into a conftest with ``from schema_registry_fixtures import registry_broker, schema_registry``.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from typing import Iterator, Mapping

import pytest

from conftest import stop_process
from tidelake.broker.embedded import EmbeddedBroker
from tidelake.schema_registry.server import SchemaRegistryServer
from tidelake.schema_registry.settings import RegistrySettings

# a group's first rebalance is not held back (the broker's 3 s default would slow every start)
BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "0"}


def registry_settings(bootstrap: str, overrides: Mapping[str, str] | None = None) -> RegistrySettings:
    return RegistrySettings.load(overrides={"listeners": "http://127.0.0.1:0",
                                            "kafkastore.bootstrap.servers": bootstrap, **(overrides or {})})


@contextlib.contextmanager
def start_registry(bootstrap: str, overrides: Mapping[str, str] | None = None) -> Iterator[SchemaRegistryServer]:
    """A registry in this process on a free port; ``.url`` is its address."""
    server = SchemaRegistryServer(registry_settings(bootstrap, overrides)).start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def registry_process(bootstrap: str, overrides: Mapping[str, str] | None = None,
                     timeout_s: float = 60.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """``tidelake schema-registry start`` as a child process on a free port; yields (url, process)."""
    args = [sys.executable, "-m", "tidelake.cli.main", "schema-registry", "start", "-b", bootstrap,
            "--listen", "http://127.0.0.1:0", "--log-level", "WARNING"]
    for key, value in (overrides or {}).items():
        args += ["--set", f"{key}={value}"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + timeout_s
        url = None
        lines = []
        while time.monotonic() < deadline and url is None:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            found = re.search(r"schema registry on (\S+)", line)
            if found:
                url = found.group(1)
        if url is None:
            raise RuntimeError(f"the registry did not start: {''.join(lines)[-2000:]}")
        yield url, proc
    finally:
        stop_process(proc)
        proc.stderr.close()


@pytest.fixture
def registry_broker(tmp_path) -> Iterator[EmbeddedBroker]:
    """An embedded broker for registries to keep their ``_schemas`` in."""
    with EmbeddedBroker(tmp_path / "broker", config=BROKER_CONFIG) as broker:
        yield broker


@pytest.fixture
def schema_registry(registry_broker) -> Iterator[SchemaRegistryServer]:
    """A registry (in this process, free port) on its own embedded broker; ``.url`` for clients."""
    with start_registry(registry_broker.bootstrap_servers) as server:
        yield server


@pytest.fixture(scope="module")
def shared_registry(tmp_path_factory) -> Iterator[SchemaRegistryServer]:
    """One broker and registry for a whole test module (tests use subjects of their own)."""
    with EmbeddedBroker(tmp_path_factory.mktemp("registry-broker"), config=BROKER_CONFIG) as broker:
        with start_registry(broker.bootstrap_servers) as server:
            yield server
