"""``RegistrySettings``: the registry's configuration, with Confluent Schema Registry's property names
(``schema-registry.properties``), every default in this one place. A name the registry does not know is an
error naming it (``SettingsError``), so a typo never silently means a default.

Kafka client settings for the ``_schemas`` topic go as ``kafkastore.<Kafka client property>`` (Confluent's
prefix), e.g. ``kafkastore.security.protocol=SASL_SSL``, and are read by ``security/client_config.py``.
TLS of the REST listener takes the broker's ``ssl.*`` names (``ssl.keystore.location``, ``ssl.client.auth`` ...);
HTTP basic auth is ``authentication.method=BASIC`` with users given as the broker gives PLAIN users:
``authentication.jaas.config=...PlainLoginModule required user_alice="secret";``.
"""
from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from tidelake.security.client_config import ClientConfigError, librdkafka_config, parse_client_properties
from tidelake.security.jaas import JaasError, parse_jaas

COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "IMPORT")
ELECTIONS = ("group", "none")

DEFAULTS: dict[str, str] = {
    "listeners": "http://127.0.0.1:8081",
    "host.name": "",                              # the name other registries forward to (default: the listener's)
    "kafkastore.bootstrap.servers": "127.0.0.1:9092",
    "kafkastore.topic": "_schemas",
    "kafkastore.topic.replication.factor": "3",   # at most the number of brokers (Confluent's rule)
    "kafkastore.timeout.ms": "10000",             # a write's bound: produce, commit, read back
    "kafkastore.init.timeout.ms": "60000",        # start-up's bound: topic, read to the end
    "schema.compatibility.level": "BACKWARD",
    "mode.mutability": "true",
    "leader.eligibility": "true",
    "schema.registry.group.id": "schema-registry",
    "tidelake.election": "group",                 # group: Kafka's group protocol elects the primary; none: alone
    "tidelake.max.request.bytes": "16777216",
    "authentication.method": "NONE",              # NONE or BASIC
    "authentication.realm": "SchemaRegistry",
    "authentication.jaas.config": "",
    "metrics.enabled": "true",
}
# librdkafka's own log lines (a broker restarting, connections refused) go here: shown only at DEBUG level
LIBRDKAFKA_LOG = logging.getLogger("tidelake.schema_registry.librdkafka")
LIBRDKAFKA_LOG.setLevel(logging.CRITICAL + 1)
LIBRDKAFKA_LOG.propagate = False
_PASSED_PREFIXES = ("kafkastore.security.", "kafkastore.sasl.", "kafkastore.ssl.", "ssl.")


class SettingsError(ValueError):
    """A setting that cannot be used; the message names it and where it came from."""


@dataclass(frozen=True)
class RegistrySettings:
    values: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def load(path: str | Path | None = None, overrides: Mapping[str, str] | None = None) -> "RegistrySettings":
        merged: dict[str, str] = {}
        if path is not None:
            try:
                text = Path(path).read_text()
            except OSError as e:
                raise SettingsError(f"{path}: {e.strerror}") from None
            for number, line in enumerate(text.splitlines(), 1):   # each name checked where it is written
                one = parse_client_properties(line)
                for key, value in one.items():
                    _check_name(key, f"{path}:{number}")
                    merged[key] = value
        for key, value in (overrides or {}).items():
            _check_name(key, "--set")
            merged[key] = value
        settings = RegistrySettings(merged)
        settings.validate()
        return settings

    def get(self, name: str) -> str:
        return self.values.get(name, DEFAULTS.get(name, ""))

    def get_int(self, name: str) -> int:
        try:
            return int(self.get(name))
        except ValueError:
            raise SettingsError(f"{name}={self.get(name)!r}: expected an integer") from None

    def get_bool(self, name: str) -> bool:
        value = self.get(name).strip().lower()
        if value not in ("true", "false"):
            raise SettingsError(f"{name}={self.get(name)!r}: expected true or false")
        return value == "true"

    @property
    def listener(self) -> "Listener":
        return Listener.parse(self.get("listeners").split(",")[0].strip())

    @property
    def compatibility_level(self) -> str:
        return self.get("schema.compatibility.level").upper()

    def kafka_client_config(self) -> dict[str, str]:
        """librdkafka settings for the ``_schemas`` clients: bootstrap plus the ``kafkastore.*`` security ones."""
        props = {k[len("kafkastore."):]: v for k, v in self.values.items()
                 if k.startswith(("kafkastore.security.", "kafkastore.sasl.", "kafkastore.ssl."))}
        try:
            config = librdkafka_config(props)
        except ClientConfigError as e:
            raise SettingsError(f"kafkastore.{e}") from None
        config["bootstrap.servers"] = self.get("kafkastore.bootstrap.servers")
        return {**config, "logger": LIBRDKAFKA_LOG, "error_cb": _ignore_client_error}

    def basic_auth_users(self) -> dict[str, str]:
        text = self.get("authentication.jaas.config")
        if not text:
            return {}
        try:
            return parse_jaas(text).users()
        except JaasError as e:
            raise SettingsError(f"authentication.jaas.config: {e}") from None

    def validate(self) -> None:
        self.listener  # noqa: B018 - parses, raising SettingsError
        for name in ("kafkastore.topic.replication.factor", "kafkastore.timeout.ms", "kafkastore.init.timeout.ms",
                     "tidelake.max.request.bytes"):
            if self.get_int(name) <= 0:
                raise SettingsError(f"{name}={self.get(name)}: must be positive")
        for name in ("mode.mutability", "leader.eligibility", "metrics.enabled"):
            self.get_bool(name)
        if self.compatibility_level not in COMPATIBILITY_LEVELS:
            raise SettingsError(f"schema.compatibility.level={self.get('schema.compatibility.level')}: expected one "
                                f"of {', '.join(COMPATIBILITY_LEVELS)}")
        if self.get("tidelake.election") not in ELECTIONS:
            raise SettingsError(f"tidelake.election={self.get('tidelake.election')}: expected group or none")
        method = self.get("authentication.method").upper()
        if method not in ("NONE", "BASIC"):
            raise SettingsError(f"authentication.method={method}: expected NONE or BASIC")
        if method == "BASIC" and not self.basic_auth_users():
            raise SettingsError("authentication.method=BASIC needs users in authentication.jaas.config "
                                "(PlainLoginModule required user_NAME=\"PASSWORD\";)")
        self.kafka_client_config()


@dataclass(frozen=True)
class Listener:
    scheme: str      # http or https
    host: str
    port: int

    @staticmethod
    def parse(text: str) -> "Listener":
        scheme, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or scheme not in ("http", "https") or not colon or not port.isdigit():
            raise SettingsError(f"listeners={text!r}: expected http://HOST:PORT or https://HOST:PORT")
        return Listener(scheme, host.strip("[]") or "0.0.0.0", int(port))


def _check_name(name: str, where: str) -> None:
    if name in DEFAULTS or name.startswith(_PASSED_PREFIXES):
        return
    close = difflib.get_close_matches(name, list(DEFAULTS), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise SettingsError(f"{where}: unknown setting {name!r}{hint}")


def _ignore_client_error(error) -> None:
    """librdkafka reports transient errors (a broker down for a moment) here; its clients retry them, and a
    request that finally fails raises on its own."""
