"""How the broker commands talk to Kafka: the ``--bootstrap-server`` / ``--timeout`` options and a
:class:`BrokerConnection` that builds confluent-kafka (librdkafka) and kafka-python clients which give up
within the timeout and keep the libraries' own log lines off stderr unless ``--debug``.

Every client is checked with one bounded metadata request before it is used, so a broker that is down
or unreachable is one error line after at most ``--timeout`` seconds, whatever the command.
"""
from __future__ import annotations

import concurrent.futures
import functools
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import click

from tidelake.cli.errors import DEBUG, CliError
from tidelake.kafka_admin.share_groups import COORDINATOR_RETRY_S

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT_S = 10.0

# librdkafka logs through this logger when --debug is off; nothing is above its level, so nothing shows.
_SILENT = logging.getLogger("tidelake.cli.librdkafka")
_SILENT.setLevel(logging.CRITICAL + 1)
_SILENT.propagate = False


# librdkafka's error codes for a connection the broker (or the TLS handshake) refused: retrying cannot help
_AUTHENTICATION = -169  # KafkaError._AUTHENTICATION
_SSL = -181  # KafkaError._SSL
# the metadata check's first wait before it looks at the errors librdkafka reported (then doubled)
_FIRST_CHECK_S = 0.25


class ClientErrors:
    """The errors librdkafka reports through ``error_cb`` (called from ``poll``): a refused login or TLS
    handshake is kept so that the metadata check can name it at once instead of waiting out its timeout."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.refusal: str | None = None

    def record(self, error) -> None:
        if error.code() in (_AUTHENTICATION, _SSL):
            with self._lock:
                if self.refusal is None:
                    self.refusal = _without_broker_prefix(error.str())


def _without_broker_prefix(text: str) -> str:
    """``sasl_ssl://h:p/bootstrap: SASL authentication error: X (after 4ms in state AUTH_REQ)`` -> the middle."""
    text = re.sub(r"^\S+://\S+: ", "", text)
    return re.sub(r" \(after \d+ms in state \w+\)$", "", text)


def debug_enabled() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(DEBUG))


@dataclass(frozen=True)
class BrokerConnection:
    """Where the broker is, how long to wait for it, and whether to show the client libraries' logs."""

    bootstrap: str
    timeout: float
    debug: bool = False
    # Kafka client security properties (--command-config FILE): security.protocol, sasl.*, ssl.*
    security: Mapping[str, str] = field(default_factory=dict)
    # what the clients built here reported (a refused login): one collector for the command's clients
    errors: ClientErrors = field(default_factory=ClientErrors, compare=False, repr=False)

    # ---------------------------------------------------------------- librdkafka (confluent-kafka)
    def config(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        timeout_ms = max(1, int(self.timeout * 1000))
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "socket.connection.setup.timeout.ms": max(1000, timeout_ms),
            "socket.timeout.ms": max(10, timeout_ms),
            # the "Connection refused" retry loop of a down broker: back off to seconds, not milliseconds
            "reconnect.backoff.max.ms": 2000,
        }
        if self.security:
            from tidelake.security.client_config import librdkafka_config
            conf.update(librdkafka_config(self.security))
        conf["error_cb"] = self.errors.record
        if not self.debug:
            conf["logger"] = _SILENT
        conf.update(extra or {})
        return conf

    def reachable(self, client, topic: str | None = None):
        """Cluster metadata from ``client``, or a CliError within the timeout. Asking for one ``topic`` creates
        it on a broker with auto.create.topics.enable, as producing to it would. A broker that refuses the login
        (or a TLS handshake that fails) is named as soon as librdkafka reports it."""
        from confluent_kafka import KafkaException
        deadline = time.monotonic() + self.timeout
        wait = _FIRST_CHECK_S
        while True:
            left = deadline - time.monotonic()
            try:
                return client.list_topics(topic, timeout=max(0.001, min(wait, left)))
            except KafkaException as e:
                client.poll(0)  # serves error_cb: the reason of a refusal
                if self.errors.refusal is not None:
                    raise self.refused() from e
                if left <= wait:
                    raise self.unreachable(e.args[0].str() if e.args else str(e)) from e
            wait *= 2  # a slow broker still gets a request that waits long enough for its answer

    def refused(self) -> CliError:
        return CliError(f"authentication failed at {self.bootstrap}: {self.errors.refusal}")

    def unreachable(self, detail: str) -> CliError:
        return CliError(f"no Kafka broker answered at {self.bootstrap} within {self.timeout:g}s "
                        f"(--timeout): {detail}")

    def admin(self):
        from confluent_kafka.admin import AdminClient
        client = AdminClient(self.config())
        self.reachable(client)
        return client

    def producer(self, extra: Mapping[str, Any] | None = None):
        from confluent_kafka import Producer
        client = Producer(self.config({"message.timeout.ms": max(1, int(self.timeout * 1000)), **(extra or {})}))
        self.reachable(client)
        return client

    def consumer(self, extra: Mapping[str, Any] | None = None, topic: str | None = None):
        """A consumer, and the cluster metadata fetched to prove the broker is up. Naming ``topic`` asks for it
        alone, so a topic the consumer may not describe answers TOPIC_AUTHORIZATION_FAILED (a listing of every
        topic leaves it out); a consumer's metadata request never creates it (allow.auto.create.topics)."""
        from confluent_kafka import Consumer
        client = Consumer(self.config(extra))
        try:
            return client, self.reachable(client, topic)
        except BaseException:
            client.close()
            raise

    def wait(self, future, what: str, tolerate: tuple[int, ...] = ()) -> Any:
        """The result of an admin future, or a CliError saying what failed and why; a KafkaError whose code
        is in ``tolerate`` (e.g. TOPIC_ALREADY_EXISTS with --if-not-exists) is returned instead."""
        from confluent_kafka import KafkaError, KafkaException
        try:
            return future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            raise CliError(f"{what}: no answer within {self.timeout:g}s (--timeout)") from None
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if not isinstance(err, KafkaError):
                raise CliError(f"{what}: {e}") from e
            if err.code() in tolerate:
                return err
            raise CliError(f"{what}: {err.name()}: {err.str()}") from e

    def wait_for_group_coordinator(self, group: str) -> None:
        """Return once the cluster names a coordinator for ``group``; a CliError with the broker's reason after
        ``--timeout`` otherwise. librdkafka's consumer retries that lookup silently for ever, and says nothing of
        the reason a broker gives (e.g. too few brokers up to create __consumer_offsets)."""
        from kafka.errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, KafkaError,
                                  NotCoordinatorError)
        deadline = time.monotonic() + self.timeout
        admin = self.kafka_python_admin()
        try:
            while True:
                try:
                    admin.describe_groups([group])  # FindCoordinator first
                    return
                except (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError) as e:
                    # kafka-python's text: "FindCoordinatorResponse error for GROUP/<group>: <the broker's message>"
                    text = e.args[0] if e.args else type(e).__name__
                    reason = text.partition(f"GROUP/{group}: ")[2] or text
                except KafkaError:  # not about the coordinator (e.g. authorization): the consumer reports it
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CliError(f"no group coordinator: {reason}")
                time.sleep(min(COORDINATOR_RETRY_S, remaining))
        finally:
            admin.close()

    # ---------------------------------------------------------------- kafka-python
    def kafka_python_admin(self):
        """kafka-python's admin client: the one that speaks ListTransactions / DescribeTransactions and asks
        every broker for its groups."""
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError

        from tidelake.security.client_config import kafka_python_config
        # librdkafka names a refused login at once; kafka-python would retry it until its timeout
        self.admin()
        timeout_ms = max(1, int(self.timeout * 1000))
        try:
            return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="tidelake-cli",
                                    request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms,
                                    **kafka_python_config(self.security))
        except KafkaError as e:
            raise self.unreachable(str(e)) from e


def command_config(path: str | None) -> dict[str, str]:
    """The security properties of ``--command-config FILE`` (checked now: a bad one is one error line)."""
    if path is None:
        return {}
    from tidelake.security.client_config import ClientConfigError, librdkafka_config, load_client_properties
    try:
        props = load_client_properties(path)
        librdkafka_config(props)
    except ClientConfigError as e:
        raise CliError(f"--command-config {path}: {e}") from None
    return props


def broker_options(f: Callable) -> Callable:
    """``--bootstrap-server``, ``--timeout`` and ``--command-config``, passed to the command as
    ``conn: BrokerConnection``."""
    @click.option("--bootstrap-server", "-b", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
                  envvar="TIDELAKE_BOOTSTRAP_SERVER", metavar="HOST:PORT",
                  help="Broker to connect to (env TIDELAKE_BOOTSTRAP_SERVER).")
    @click.option("--timeout", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT_S, show_default=True,
                  envvar="TIDELAKE_TIMEOUT", metavar="SECONDS",
                  help="Give up when the broker does not answer within this long (env TIDELAKE_TIMEOUT).")
    @click.option("--command-config", "command_config_file", type=click.Path(dir_okay=False), default=None,
                  envvar="TIDELAKE_COMMAND_CONFIG", metavar="FILE",
                  help="Kafka client properties for security (security.protocol, sasl.*, ssl.*), as Kafka's "
                       "tools take them (env TIDELAKE_COMMAND_CONFIG).")
    @functools.wraps(f)
    def wrapper(*args, bootstrap: str, timeout: float, command_config_file: str | None, **kwargs):
        return f(*args, conn=BrokerConnection(bootstrap, timeout, debug_enabled(), command_config(command_config_file)),
                 **kwargs)
    return wrapper
