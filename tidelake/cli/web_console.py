"""``tidelake console``: the web console (``tidelake.console``) served by uvicorn in this one process.

(``console.py`` beside this file is the console producer/consumer, ``produce`` / ``consume``.)
"""
from __future__ import annotations

import logging
import socket

import click

from tidelake.cli.errors import CliError
from tidelake.listen_socket import ListenError, bind_listener
from tidelake.cli.kafka_client import BrokerConnection, broker_options


def _listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{text!r}: expected HOST:PORT (PORT 0 picks a free one)", param_hint="--listen")
    return host.strip("[]"), int(port)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the server starts, so a busy port is one error line and port 0's
    choice can be printed."""
    try:
        sock = bind_listener(host, port)
    except ListenError as e:
        raise CliError(f"--listen {host}:{port}: {e.strerror}") from None
    sock.set_inheritable(True)
    return sock


@click.command("console")
@broker_options
@click.option("--listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Where to serve the console (PORT 0 picks a free port; the address is printed).")
@click.option("--tables", "tables_dir", type=click.Path(exists=True, file_okay=False), default=None, metavar="DIR",
              help="Show the tables in DIR (DIR itself, its children and grandchildren).")
@click.option("--pipelines", "pipelines_dir", type=click.Path(exists=True, file_okay=False), default=None,
              metavar="DIR", help="Show the pipelines configured by DIR/*.yaml (and their sink tables).")
@click.option("--metrics-url", default=None, metavar="URL",
              help="A broker's Prometheus endpoint (http://HOST:PORT/metrics) to chart.")
@click.option("--schema-registry-url", default=None, metavar="URL",
              help="A schema registry (Confluent's REST API, e.g. tidelake schema-registry) to show subjects of.")
@click.option("--schema-registry-user-info", default=None, metavar="USER:PASSWORD", envvar="SCHEMA_REGISTRY_USER_INFO",
              help="Basic auth credentials for --schema-registry-url.")
@click.option("--allow-actions", is_flag=True,
              help="Offer actions that change state (compact a table, reset a group's offsets), each confirmed.")
@click.option("--sample-interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              metavar="SECONDS", help="How often to sample offsets, lag and metrics for the charts.")
def console(conn: BrokerConnection, listen: str, tables_dir: str | None, pipelines_dir: str | None,
            metrics_url: str | None, schema_registry_url: str | None, schema_registry_user_info: str | None,
            allow_actions: bool, sample_interval: float) -> None:
    """Serve the web console: topics, messages, consumer groups and lag, pipelines, tables, live charts."""
    import uvicorn

    from tidelake.console.app import ConsoleSettings, create_app
    from tidelake.security.client_config import kafka_python_config

    for option, url in (("--metrics-url", metrics_url), ("--schema-registry-url", schema_registry_url)):
        if url is not None and not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"{url!r}: expected an http:// or https:// URL", param_hint=option)
    host, port = _listen_address(listen)
    admin = conn.admin()   # the broker answers, or one error line within --timeout
    del admin
    settings = ConsoleSettings(client_config=conn.config(), timeout=conn.timeout,
                               kafka_python_config=kafka_python_config(conn.security) if conn.security else {},
                               tables_dir=tables_dir,
                               pipelines_dir=pipelines_dir, metrics_url=metrics_url, allow_actions=allow_actions,
                               sample_interval=sample_interval, schema_registry_url=schema_registry_url,
                               schema_registry_user_info=schema_registry_user_info)
    sock = _bind(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    from tidelake.cli.signals import on_stop_signals
    on_stop_signals()   # from here until it serves: as Ctrl-C (exit 130); then the server's own stop, below
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    click.echo(f"tidelake console on http://{shown}:{bound_port}/ (broker {conn.bootstrap}; "
               f"{'actions allowed' if allow_actions else 'read-only'})", err=False)
    app = create_app(settings)
    config = uvicorn.Config(app, log_level="debug" if conn.debug else "warning", access_log=conn.debug,
                            lifespan="on", timeout_graceful_shutdown=5)
    logging.basicConfig(level=logging.DEBUG if conn.debug else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    import contextlib

    class ConsoleServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            # cli/signals.py's rule, not uvicorn's (which re-raises the signal once drained: a SIGTERM'd console
            # died by it): the first SIGTERM/SIGINT drains and exits 0, a second stops at once
            on_stop_signals(lambda: setattr(self, "should_exit", True), lambda: setattr(self, "force_exit", True))
            yield

    ConsoleServer(config).run(sockets=[sock])
