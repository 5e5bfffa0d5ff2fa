"""SASL/PLAIN (RFC 4616) server: one token ``authzid NUL authcid NUL passwd`` checked against the
users of the listener's JAAS config (Kafka's PlainLoginModule ``user_<name>="<password>"``)."""
from __future__ import annotations

import hmac
from typing import Mapping

from tidelake.security.sasl import SaslAuthenticationError

MAX_TOKEN = 65535  # RFC 4616: each field <= 255 octets of UTF-8 in practice; bound the whole message


class PlainServer:
    mechanism = "PLAIN"
    credential_expiry_ms = None  # a password does not expire (KIP-368: only connections.max.reauth.ms)

    def __init__(self, users: Mapping[str, str]):
        self._users = users
        self.complete = False
        self.username: str | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN takes one message")
        if len(token) > MAX_TOKEN:
            raise SaslAuthenticationError("Authentication failed: PLAIN message too long")
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        expected = self._users.get(username)
        # compare even for an unknown user, so the time taken does not tell which users exist
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\x00" + password).encode())
        if expected is None or not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        self.complete = True
        self.username = username
        return b""
