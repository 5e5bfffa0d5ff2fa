"""Listeners: ``NAME://HOST:PORT`` entries of ``listeners`` / ``advertised.listeners``, and the
``--listen`` / ``--advertised`` shortcuts of the command line, checked against each other."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidelake.broker.config_definitions import ConfigError

if TYPE_CHECKING:
    from tidelake.broker.config import BrokerConfig


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


def _address(text: str, option: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{option}: expected HOST:PORT, got {text!r}")
    return host.removeprefix("[").removesuffix("]") or "0.0.0.0", int(port)


def listen_address(config: BrokerConfig, listen: str | None) -> tuple[str, int]:
    """Where to bind: ``--listen HOST:PORT`` (a shortcut) or the served entry of ``listeners``. Both
    given and different is an error: the operator asked for two things."""
    listener = config.listener()
    configured = (listener.host or "0.0.0.0", listener.port)
    if listen is None:
        return configured
    address = _address(listen, "--listen")
    if "listeners" in config.static and address != configured:
        raise ConfigError(f"--listen {listen} disagrees with listeners={config.static['listeners']}")
    return address


def advertised_address(config: BrokerConfig, advertised: str | None) -> tuple[str | None, int | None]:
    """What clients are told: ``--advertised HOST:PORT`` or ``advertised.listeners`` (None: the bind
    address, see ``Broker``)."""
    if advertised is not None:
        return _address(advertised, "--advertised")
    listener = config.advertised_listener()
    return (None, None) if listener is None else (listener.host or None, listener.port)


def parse_listeners(value: str | None, key: str) -> list[Listener]:
    return [Listener.parse(item, key) for item in (value or "").split(",") if item.strip()]
