"""Listeners: ``NAME://HOST:PORT`` entries of ``listeners`` / ``advertised.listeners``."""
from __future__ import annotations

from dataclasses import dataclass

from tidelake.broker.config_definitions import ConfigError


@dataclass(frozen=True)
class Listener:
    """One entry of ``listeners`` / ``advertised.listeners``: ``NAME://HOST:PORT``."""
    name: str
    host: str  # "" binds every interface
    port: int

    @classmethod
    def parse(cls, text: str, key: str) -> Listener:
        name, sep, address = text.strip().partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not name or not colon or not port.isdigit() or int(port) > 65535:
            raise ConfigError(f"{key}: expected NAME://HOST:PORT, got {text.strip()!r}")
        return cls(name.upper(), host.removeprefix("[").removesuffix("]"), int(port))

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(value: str | None, key: str) -> list[Listener]:
    return [Listener.parse(item, key) for item in (value or "").split(",") if item.strip()]
