"""The schema registry beside a broker: ``schema.registry.listen`` starts one in the broker's process (a Kafka
client of this broker, keeping its schemas in ``_schemas`` here), so the embedded default needs no second
process; and the ``SchemaValidator`` that broker-side schema validation asks, pointed at
``confluent.schema.registry.url`` or else at that embedded registry.

The registry connects to the broker's first PLAINTEXT listener (it is a client like any other); it starts once
the broker serves and stops before the broker does. It runs on its own threads, never on the broker's loop.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from tidelake.broker.config import BrokerConfig
from tidelake.broker.config_definitions import ConfigError
from tidelake.broker.config_validation import SCHEMA_VALIDATION_CONFIGS, schema_validation_without_registry
from tidelake.broker.schema_validation import SchemaValidator
from tidelake.schema_registry.lookup import RegistryLookup

if TYPE_CHECKING:
    from tidelake.schema_registry.server import SchemaRegistryServer

log = logging.getLogger("tidelake.broker.server")

LOOKUP_TIMEOUT_S = 5.0


class BrokerSchemaRegistry:
    def __init__(self, config: BrokerConfig, plaintext_listener: str | None):
        """``plaintext_listener``: the name of the first PLAINTEXT listener (None: there is none)."""
        self._listen = config.get("schema.registry.listen") or None
        self._external_url = config.get("confluent.schema.registry.url") or None
        self._cache_s = config.get_int("confluent.schema.registry.cache.ms") / 1000
        self._user_info = config.get("confluent.basic.auth.user.info") or None
        self._listener = plaintext_listener
        self.server: SchemaRegistryServer | None = None
        if self._listen is not None and plaintext_listener is None:
            raise ConfigError("schema.registry.listen: the embedded schema registry connects to this broker as a "
                              "client and needs a PLAINTEXT listener")
        self.validator: SchemaValidator | None = None
        if self._external_url is not None:
            self.validator = SchemaValidator(self._lookup(self._external_url), config.topic_default)
        elif self._listen is not None:
            self.validator = SchemaValidator(None, config.topic_default)  # bound to the embedded registry once it runs
        else:
            for name in SCHEMA_VALIDATION_CONFIGS:  # broker-wide, with nothing to validate against
                if config.get_bool(name):
                    raise ConfigError(schema_validation_without_registry(name))

    @property
    def wanted(self) -> bool:
        """Whether this broker runs a registry of its own (``schema.registry.listen``)."""
        return self._listen is not None

    @property
    def listener(self) -> str | None:
        """The listener the embedded registry connects to."""
        return self._listener

    @property
    def url(self) -> str | None:
        return self.server.url if self.server is not None else None

    async def start(self, bootstrap: str) -> None:
        """Starts the embedded registry (if configured) against ``bootstrap``, this broker's listener."""
        if self._listen is None:
            return
        # the registry's web stack and schema libraries are loaded only by a broker that runs one (they would add
        # a fifth to every broker's start-up)
        from tidelake.schema_registry.kafka_store import StoreError
        from tidelake.schema_registry.server import SchemaRegistryServer
        from tidelake.schema_registry.settings import RegistrySettings, SettingsError
        try:
            settings = RegistrySettings.load(overrides={"listeners": self._listen,
                                                        "kafkastore.bootstrap.servers": bootstrap})
            self.server = await asyncio.to_thread(SchemaRegistryServer(settings).start)
        except (SettingsError, StoreError) as e:
            raise ConfigError(f"schema.registry.listen={self._listen}: {e}") from None
        if self.validator is not None and self._external_url is None:
            self.validator.bind(self._lookup(self.server.url))
        log.info("schema registry on %s (schemas in _schemas on this broker)", self.server.url)

    async def stop(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            await asyncio.to_thread(server.stop)

    def _lookup(self, url: str) -> RegistryLookup:
        return RegistryLookup(url, LOOKUP_TIMEOUT_S, self._cache_s, self._user_info)
