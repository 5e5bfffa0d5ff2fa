"""``tidelake schema-registry start``: Confluent Schema Registry's REST API, backed by the ``_schemas`` topic of
any Kafka cluster (tidelake's broker by default), in the foreground until SIGTERM/SIGINT."""
from __future__ import annotations

import gc
import logging
import sys
import threading

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.signals import on_stop_signals
from tidelake.cli.values import parse_pairs

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@click.group("schema-registry", cls=CommandGroup)
def schema_registry() -> None:
    """Run a schema registry (Confluent's REST API; schemas in a compacted Kafka topic)."""


@schema_registry.command("start")
@click.option("--config", "config_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="schema-registry.properties (Confluent's names: listeners, kafkastore.bootstrap.servers, ...).")
@click.option("--bootstrap-server", "-b", default=None, metavar="HOST:PORT",
              help="The Kafka cluster holding _schemas (kafkastore.bootstrap.servers)  [default: 127.0.0.1:9092]")
@click.option("--listen", default=None, metavar="URL",
              help="http://HOST:PORT or https://HOST:PORT to serve on (listeners; PORT 0 picks a free one)  "
                   "[default: http://127.0.0.1:8081]")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override one setting; repeatable.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="INFO", show_default=True)
def start(config_file: str | None, bootstrap_server: str | None, listen: str | None, overrides: tuple[str, ...],
          log_level: str) -> None:
    """Start a schema registry in the foreground; several against one cluster elect one primary, and the others
    forward writes to it. SIGTERM/SIGINT leave the group and exit 0."""
    from tidelake.schema_registry.kafka_store import StoreError
    from tidelake.schema_registry.server import SchemaRegistryServer
    from tidelake.schema_registry.settings import LIBRDKAFKA_LOG, RegistrySettings, SettingsError

    logging.basicConfig(stream=sys.stderr, level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if log_level.upper() == "DEBUG":
        LIBRDKAFKA_LOG.setLevel(logging.DEBUG)
    sets = parse_pairs(overrides, "--set")
    if bootstrap_server is not None:
        sets["kafkastore.bootstrap.servers"] = bootstrap_server
    if listen is not None:
        sets["listeners"] = listen
    try:
        settings = RegistrySettings.load(config_file, sets)
        server = SchemaRegistryServer(settings).start()
    except (SettingsError, StoreError) as e:
        raise CliError(str(e)) from None
    # the state rebuilt from _schemas lives as long as the process: keep it out of the cyclic GC's generations,
    # so collections stay short (lookup tail latency), as `broker start` does after loading
    gc.freeze()
    stop = threading.Event()
    on_stop_signals(stop.set)
    click.echo(f"tidelake schema registry on {server.url} (topic {settings.get('kafkastore.topic')} at "
               f"{settings.get('kafkastore.bootstrap.servers')})", err=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
