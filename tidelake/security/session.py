"""``Session``: who is on one connection (Kafka's ``RequestContext.principal`` / listener name), and
the SASL exchange in progress there. Made by the transport when the connection opens; the SASL
handlers fill in the principal and move the connection's authentication state."""
from __future__ import annotations

from dataclasses import dataclass, field

from tidelake.protocol.connection import Connection
from tidelake.security.principal import ANONYMOUS


@dataclass(slots=True, eq=False)
class Session:
    listener: str  # the listener's name (Metadata advertises that listener's address)
    security_protocol: str  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    client_host: str
    principal: str = ANONYMOUS
    connection: Connection | None = field(default=None, repr=False)  # None for socketless callers (tools)
    sasl: object | None = field(default=None, repr=False)  # the SASL server of the exchange in progress
    mechanism: str | None = None

    @classmethod
    def plaintext(cls, client_host: str = "", listener: str = "PLAINTEXT") -> Session:
        return cls(listener, "PLAINTEXT", client_host)
