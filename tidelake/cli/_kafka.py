"""Helpers shared by the Kafka-style commands (`topics`, `produce`, `consume`): the
`--bootstrap-server` option, confluent-kafka clients, error reporting and rich output."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import click
from rich.console import Console

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TIMEOUT_S = 30.0


def bootstrap_option(f: Callable) -> Callable:
    return click.option("--bootstrap-server", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
                        envvar="TIDELAKE_BOOTSTRAP_SERVER", metavar="HOST:PORT",
                        help="Broker to connect to (env TIDELAKE_BOOTSTRAP_SERVER).")(f)


def client_config(bootstrap: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    # librdkafka's own logs go to stderr; keep them quiet unless something is really wrong.
    return {"bootstrap.servers": bootstrap, "log_level": 3, **(extra or {})}


def admin_client(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient(client_config(bootstrap))


def parse_pairs(items: Iterable[str], option: str) -> dict[str, str]:
    """KEY=VALUE strings -> dict; a malformed one is a usage error naming the option."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        out[key.strip()] = value.strip()
    return out


def kafka_error_message(exc: BaseException) -> str:
    """A readable message for a KafkaException (its KafkaError's name and text) or anything else."""
    from confluent_kafka import KafkaException
    if isinstance(exc, KafkaException) and exc.args:
        err = exc.args[0]
        if hasattr(err, "name") and hasattr(err, "str"):
            return f"{err.name()}: {err.str()}"
    return str(exc) or type(exc).__name__


def wait(future, what: str) -> Any:
    """The result of an admin future, or a ClickException (exit code 1) saying what failed and why."""
    try:
        return future.result(TIMEOUT_S)
    except Exception as e:  # KafkaException, TimeoutError, ...
        raise click.ClickException(f"{what}: {kafka_error_message(e)}") from e


def console() -> Console:
    """A rich console on the current stdout, wide enough that tables are not squeezed when piped."""
    out = click.get_text_stream("stdout")
    return Console(file=out, width=None if out.isatty() else 200, highlight=False, soft_wrap=False)


def err(message: str) -> None:
    click.echo(message, err=True)


def stdout_bytes():
    return click.get_binary_stream("stdout")
