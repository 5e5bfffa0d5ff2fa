"""``Session``: who is on one connection (Kafka's ``RequestContext.principal`` / listener name), and
the SASL exchange in progress there. Made by the transport when the connection opens; the SASL
handlers fill in the principal and move the connection's authentication state.

KIP-368 re-authentication lives here too: a SASL login may end with a session lifetime (the listener's
``connections.max.reauth.ms``, shortened to the credential's own expiry); once it has passed, the next
request closes the connection, unless it is a SaslHandshake that starts a re-authentication, as Kafka's
``SocketServer`` decides it. Times are ``time.monotonic()`` seconds."""
from __future__ import annotations

from dataclasses import dataclass, field

from tidelake.protocol.connection import SASL_HANDSHAKE_KEY, Connection
from tidelake.security.principal import ANONYMOUS

MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's KafkaChannel: at most one re-authentication a second


def session_lifetime_ms(max_reauth_ms: int, credential_expiry_ms: int | None, now_ms: int) -> int:
    """What SaslAuthenticate tells the client (0: no limit), as Kafka's SaslServerAuthenticator computes it:
    the listener's ``connections.max.reauth.ms``, or the credential's remaining life if that is shorter."""
    if credential_expiry_ms is None:
        return max(0, max_reauth_ms)
    remaining = max(0, credential_expiry_ms - now_ms)
    return remaining if max_reauth_ms <= 0 else min(remaining, max_reauth_ms)


@dataclass(slots=True, eq=False)
class Session:
    listener: str  # the listener's name (Metadata advertises that listener's address)
    security_protocol: str  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    client_host: str
    principal: str = ANONYMOUS
    connection: Connection | None = field(default=None, repr=False)  # None for socketless callers (tools)
    sasl: object | None = field(default=None, repr=False)  # the SASL server of the exchange in progress
    mechanism: str | None = None
    expires_at: float | None = None  # when the SASL session ends (KIP-368); None: with the connection
    reauth_started_at: float | None = None  # the last re-authentication's start
    reauthenticating: bool = False  # a re-authentication's SaslHandshake was answered, its login is due

    @classmethod
    def plaintext(cls, client_host: str = "", listener: str = "PLAINTEXT") -> Session:
        return cls(listener, "PLAINTEXT", client_host)

    def may_reauthenticate(self, now: float) -> bool:
        """A SaslHandshake on the authenticated connection starts a re-authentication: only for a session
        that expires, and not twice within a second (otherwise it is answered ILLEGAL_SASL_STATE)."""
        return self.expires_at is not None and (
            self.reauth_started_at is None or now - self.reauth_started_at >= MIN_REAUTH_INTERVAL_S)

    def expired_on(self, api_key: int, now: float) -> bool:
        """Whether this request finds the session expired, so the connection is closed without an answer."""
        if self.expires_at is None or self.reauthenticating or now < self.expires_at:
            return False
        return not (api_key == SASL_HANDSHAKE_KEY and self.may_reauthenticate(now))
