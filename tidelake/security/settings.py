"""The broker's settings as the security layer reads them: typed, each name's type, default and check defined once
in the broker's config definitions (``BrokerConfig`` implements this), so no reader here writes a default.

Kafka's per-listener overrides: ``listener.name.<listener>.<name>`` and, for a SASL mechanism's settings,
``listener.name.<listener>.<mechanism>.<name>``; ``listener_key`` picks the one set, else the broker-wide name."""
from __future__ import annotations

from typing import Protocol


class BrokerSettings(Protocol):
    def get(self, name: str) -> str | None:
        """The raw value (None when unset and without a default)."""

    def get_int(self, name: str) -> int: ...

    def get_bool(self, name: str) -> bool: ...

    def get_list(self, name: str) -> list[str]: ...

    def get_string(self, name: str) -> str: ...

    def get_optional(self, name: str) -> str | None: ...


def listener_key(settings: BrokerSettings, listener: str, name: str, mechanism: str | None = None) -> str:
    """The key that holds ``name`` for ``listener`` (and ``mechanism``): its per-listener override when set."""
    scope = f"{listener.lower()}.{mechanism.lower()}" if mechanism else listener.lower()
    key = f"listener.name.{scope}.{name}"
    return key if settings.get(key) is not None else name
