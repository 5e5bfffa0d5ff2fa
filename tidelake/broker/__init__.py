"""The Kafka-compatible broker: ``Broker`` (asyncio server) and ``EmbeddedBroker`` (background thread)."""
from __future__ import annotations

__all__ = ["Broker", "EmbeddedBroker"]


def __getattr__(name: str):
    # Lazy (PEP 562), so importing one module of the package (e.g. tidelake.broker.config from the
    # CLI) does not load the whole broker.
    if name == "EmbeddedBroker":
        from tidelake.broker.embedded import EmbeddedBroker
        return EmbeddedBroker
    if name == "Broker":
        from tidelake.broker.server import Broker
        return Broker
    raise AttributeError(name)
