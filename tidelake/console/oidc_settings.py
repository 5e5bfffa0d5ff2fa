"""The console's ``--oidc-*`` options as one value (its defaults' home; no imports beyond the standard library,
so the command line reads them without loading the web app)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OidcSettings:
    """``--oidc-*``: the issuer whose tokens the console accepts. The JWKS timings are Kafka's defaults for the
    broker's ``sasl.oauthbearer.jwks.endpoint.*``."""
    jwks_url: str
    issuer: str | None = None
    audiences: tuple[str, ...] = ()
    role_claim: str = "roles"
    principal_claim: str = "sub"
    clock_skew_s: int = 30
    jwks_refresh_ms: int = 3_600_000
    jwks_retry_backoff_ms: int = 100
