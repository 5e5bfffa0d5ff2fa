"""OAUTHBEARER token validation, the two ways Kafka's broker does it:

* ``UnsecuredJwsValidator``: Kafka's default (``OAuthBearerUnsecuredValidatorCallbackHandler``), for tests and
  development: an unsigned JWS (``alg: none``) whose principal claim (``sub``) and ``exp`` are checked, with the
  JAAS options ``unsecuredValidatorPrincipalClaimName``, ``unsecuredValidatorScopeClaimName``,
  ``unsecuredValidatorRequiredScope`` and ``unsecuredValidatorAllowableClockSkewMs``.
* ``JwksValidator``: ``OAuthBearerValidatorCallbackHandler``: a signed JWT verified with the provider's key set
  (``jwks.py``), ``exp`` and ``iat`` required, ``sasl.oauthbearer.expected.issuer`` /
  ``sasl.oauthbearer.expected.audience`` checked, the principal from ``sasl.oauthbearer.sub.claim.name``, within
  ``sasl.oauthbearer.clock.skew.seconds``.

Both answer a ``ValidatedToken`` (principal, expiry: the session lifetime's bound, KIP-368) or raise
``TokenValidationError`` with the reason the client is told."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from joserfc import jws, jwt
from joserfc.errors import JoseError

from tidelake.security.jwks import JwksKeySet

# what a signed token may use (jose4j's DISALLOW_NONE: anything but "none")
LATEST_TIME_S = 2**53 / 1000  # past this a time in milliseconds is no longer exact (and floats overflow)
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class TokenValidationError(Exception):
    """The token is refused; the message says why (never echoing the token)."""


@dataclass(frozen=True)
class ValidatedToken:
    principal: str
    expiry_ms: int


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> ValidatedToken: ...


def _string_claim(claims: dict, name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise TokenValidationError(f"the token has no '{name}' claim naming the principal")
    return value


def _time_ms(claims: dict, name: str) -> int | None:
    """A NumericDate claim (seconds) in milliseconds; None when absent; refused when not a time."""
    value = claims.get(name)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < LATEST_TIME_S:
        raise TokenValidationError(f"the token's '{name}' claim is not a time in seconds")
    return int(value * 1000)


def _scopes(value) -> set[str]:
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return set(value)
    return set()


@dataclass(frozen=True)
class UnsecuredJwsValidator:
    principal_claim: str
    scope_claim: str
    required_scopes: frozenset[str]
    clock_skew_ms: int

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        try:
            compact = jws.extract_compact(token.encode())
            header, claims = compact.headers(), json.loads(compact.payload)
        except (JoseError, ValueError, UnicodeDecodeError):
            raise TokenValidationError("the token is not a JWS (header.payload.signature in base64url)") from None
        if header.get("alg") != "none" or token.rsplit(".", 1)[-1]:  # an unsigned JWS ends with its empty signature
            raise TokenValidationError("an unsecured token has alg 'none' and no signature (the unsecured validator "
                                       "is in use: sasl.oauthbearer.jwks.endpoint.url is not set)")
        if not isinstance(claims, dict):
            raise TokenValidationError("the token's payload is not a JSON object")
        principal = _string_claim(claims, self.principal_claim)
        expiry_ms = _time_ms(claims, "exp")
        if expiry_ms is None:
            raise TokenValidationError("the token has no numeric 'exp' claim")
        if now_ms - self.clock_skew_ms >= expiry_ms:
            raise TokenValidationError(f"the token expired at {expiry_ms} ms (now {now_ms} ms)")
        issued_ms = _time_ms(claims, "iat")
        if issued_ms is not None and issued_ms > now_ms + self.clock_skew_ms:
            raise TokenValidationError("the token was issued in the future ('iat')")
        missing = self.required_scopes - _scopes(claims.get(self.scope_claim))
        if missing:
            raise TokenValidationError(f"the token's '{self.scope_claim}' lacks the required scope "
                                       f"{' '.join(sorted(missing))}")
        return ValidatedToken(principal, expiry_ms)


@dataclass(frozen=True)
class JwksValidator:
    keys: JwksKeySet
    expected_issuer: str | None
    expected_audiences: tuple[str, ...]
    principal_claim: str
    clock_skew_s: int

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        claims = self.verified_claims(token, now_ms)
        return ValidatedToken(_string_claim(claims, self.principal_claim), _time_ms(claims, "exp"))

    def verified_claims(self, token: str, now_ms: int) -> dict:
        """The token's claims once its signature, times, issuer and audience are checked (the web console
        reads its role claim too)."""
        try:
            header = jws.extract_compact(token.encode()).headers()
        except (JoseError, ValueError, UnicodeDecodeError):
            raise TokenValidationError("the token is not a JWS (header.payload.signature in base64url)") from None
        kid = header.get("kid")
        if not self.keys.has_key(kid):
            self.keys.refresh_soon()
            raise TokenValidationError(f"no key with id {kid!r} in the JWKS (fetching it again; retry)")
        try:
            decoded = jwt.decode(token, self.keys.keys, algorithms=SIGNING_ALGORITHMS)
        except JoseError as e:
            raise TokenValidationError(f"the token's signature does not verify with the JWKS ({e})") from None
        options: dict[str, dict] = {"exp": {"essential": True}, "iat": {"essential": True}}
        if self.expected_issuer:
            options["iss"] = {"essential": True, "value": self.expected_issuer}
        if self.expected_audiences:
            options["aud"] = {"essential": True, "values": list(self.expected_audiences)}
        registry = jwt.JWTClaimsRegistry(now=now_ms // 1000, leeway=self.clock_skew_s, **options)
        try:
            registry.validate(decoded.claims)
        except JoseError as e:
            raise TokenValidationError(f"the token's claims are refused: {e}") from None
        return decoded.claims
