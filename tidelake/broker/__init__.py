"""The Kafka-compatible broker: ``Broker`` (asyncio server) and ``EmbeddedBroker`` (background thread)."""
from __future__ import annotations

__all__ = ["Broker", "EmbeddedBroker"]


def __getattr__(name: str):
    # Lazy, so importing tidelake.broker.registry (done by every api_* module) stays cheap and acyclic.
    if name == "EmbeddedBroker":
        from tidelake.broker.embedded import EmbeddedBroker
        return EmbeddedBroker
    if name == "Broker":
        from tidelake.broker.server import Broker
        return Broker
    raise AttributeError(name)
