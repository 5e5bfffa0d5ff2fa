"""SASL/OAUTHBEARER (RFC 7628) server: one client message ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01
[<key>=<value>\\x01]*\\x01``, its token checked by the listener's validator (``oauth_tokens.py``). The token's
expiry bounds the session (KIP-368 ``credential_expiry_ms``). Extensions are accepted and not used, as Kafka's
default validators do. A refused token is answered at once (not RFC 7628's error challenge): SaslAuthenticate
carries the reason to the client."""
from __future__ import annotations

import re
from typing import Callable

from tidelake.security.oauth_tokens import TokenValidationError, TokenValidator
from tidelake.security.sasl import SaslAuthenticationError

MAX_MESSAGE = 65536  # a JWT with its header fits many times over; bounds what is parsed before login
_AUTH = re.compile(r"^auth=Bearer +([A-Za-z0-9\-._~+/]+=*)$")  # RFC 6750 b64token


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator, clock_ms: Callable[[], int]):
        self._validator = validator
        self._clock_ms = clock_ms
        self.complete = False
        self.username: str | None = None
        self.credential_expiry_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: OAUTHBEARER takes one message")
        if len(token) > MAX_MESSAGE:
            raise SaslAuthenticationError("Authentication failed: OAUTHBEARER message too long")
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid OAUTHBEARER client message: not UTF-8") from None
        gs2, _, rest = text.partition("\x01")
        parts = rest.split("\x01")
        if not gs2.startswith(("n,", "y,")) or len(parts) < 2 or parts[-2:] != ["", ""]:
            raise SaslAuthenticationError("Invalid OAUTHBEARER client message: expected "
                                          "'n,,\\x01auth=Bearer <token>\\x01\\x01'")
        authzid = gs2.split(",")[1] if gs2.count(",") >= 2 else ""
        auth = next((_AUTH.match(p) for p in parts if p.startswith("auth=")), None)
        if auth is None:
            raise SaslAuthenticationError("Invalid OAUTHBEARER client message: no 'auth=Bearer <token>'")
        try:
            validated = self._validator.validate(auth.group(1), self._clock_ms())
        except TokenValidationError as e:
            raise SaslAuthenticationError(f"Authentication failed: {e}") from None
        if authzid and authzid != f"a={validated.principal}":
            raise SaslAuthenticationError("Authentication failed: the authorization id differs from the token's "
                                          "principal")
        self.complete = True
        self.username = validated.principal
        self.credential_expiry_ms = validated.expiry_ms
        return b""
