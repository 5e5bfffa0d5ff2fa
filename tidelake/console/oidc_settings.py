"""The console's ``--oidc-*`` options as one value (its defaults' home; no imports beyond the standard library,
so the command line reads them without loading the web app)."""
from __future__ import annotations

from dataclasses import dataclass, field

CLIENT_SECRET_ENV = "TIDELAKE_CONSOLE_OIDC_CLIENT_SECRET"   # never an option: argv is visible to every user


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
    client_id: str | None = None        # set: browsers log in through the provider (oidc_login.py)
    client_secret: str | None = field(default=None, repr=False)
