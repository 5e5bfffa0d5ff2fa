"""Who is asking: the console's login, an ASGI middleware before every page but ``/healthz``.

Two ways in, either or both configured:

* HTTP basic against the users file (``users_file.py``): the browser's own login prompt;
* an OIDC bearer token (``Authorization: Bearer JWT``, as an API client or oauth2-proxy's
  ``--pass-authorization-header`` sends it), verified as the broker verifies OAUTHBEARER tokens: the issuer's
  JWKS (``tidelake.security.jwks``), signature, ``exp``/``iat``, issuer and audience
  (``tidelake.security.oauth_tokens.JwksValidator``); its role is read from a claim (a string or a list naming
  ``viewer`` or ``operator``).

The identity is put in the request's scope (``IDENTITY``); actions check its role (``require_role``). A refused
login is answered 401 (with ``WWW-Authenticate``: the browser asks again) or 403 for a valid token without a
console role, and logged as one line: who, from where, why.
"""
from __future__ import annotations

import base64
import binascii
import logging
import time
from dataclasses import dataclass
from urllib.parse import urlencode
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse

from tidelake.console.oidc_login import CALLBACK_PATH, LOGIN_PATH, SESSION_COOKIE, BrowserLogin, CallbackRefused
from tidelake.console.oidc_settings import OidcSettings
from tidelake.console.roles import OPERATOR, ROLES, role_allows
from tidelake.console.users_file import UsersFile
from tidelake.security.jwks import JwksKeySet, JwksSettings
from tidelake.security.oauth_tokens import JwksValidator, TokenValidationError

log = logging.getLogger("tidelake.console.login")
IDENTITY = "tidelake.identity"   # the request scope's key
REALM = "tidelake console"
OPEN_PATHS = ("/healthz",)       # a load balancer's probe needs no login (it says only "ok")


@dataclass(frozen=True)
class Identity:
    name: str
    role: str
    how: str   # basic | bearer (an Authorization header, or the session cookie of a browser login)


class NoConsoleRole(TokenValidationError):
    """A valid token whose role claim names no console role: 403, not a login prompt again."""


class BearerTokens:
    """OIDC bearer tokens: the issuer's key set is fetched at start (a console that cannot verify tokens does not
    start: ``JwksError``) and again as the broker's is."""

    def __init__(self, settings: OidcSettings):
        self.settings = settings
        keys = JwksKeySet(JwksSettings(settings.jwks_url, settings.jwks_refresh_ms, settings.jwks_retry_backoff_ms,
                                       setting="--oidc-jwks-url"))
        self.validator = JwksValidator(keys, settings.issuer, settings.audiences, settings.principal_claim,
                                       settings.clock_skew_s)

    def identify(self, token: str) -> Identity:
        """The token's identity, or ``TokenValidationError`` saying why not."""
        claims = self.validator.verified_claims(token, int(time.time() * 1000))
        name = claims.get(self.settings.principal_claim)
        if not isinstance(name, str) or not name:
            raise TokenValidationError(f"the token has no '{self.settings.principal_claim}' claim naming the user")
        value = claims.get(self.settings.role_claim)
        named = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        roles = [r for r in ROLES if r in named]
        if not roles:
            raise NoConsoleRole(f"{name}: the token's '{self.settings.role_claim}' claim names no console role "
                                f"({' or '.join(ROLES)}; it has {value!r})")
        return Identity(name, roles[-1], "bearer")


class Refused(Exception):
    def __init__(self, who: str, why: str, status: int = 401, bearer: bool = False):
        super().__init__(why)
        self.who, self.why, self.status, self.bearer = who, why, status, bearer


def _one_line(text: str) -> str:
    """What a client sent (a name, a claim) cannot start a log line of its own."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _client(scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "?"


class ConsoleLogin:
    """The ASGI middleware: an identity for every request but ``OPEN_PATHS``, or a refusal."""

    def __init__(self, app, users: UsersFile | None = None, bearer: BearerTokens | None = None,
                 browser: BrowserLogin | None = None):
        assert users is not None or bearer is not None
        self.app, self.users, self.bearer, self.browser = app, users, bearer, browser
        self.challenge = ", ".join(([f'Basic realm="{REALM}", charset="UTF-8"'] if users else []) +
                                   ([f'Bearer realm="{REALM}"'] if bearer else []))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            return await self.app(scope, receive, send)
        request = Request(scope, receive)
        if self.browser is not None and scope.get("path") in (LOGIN_PATH, CALLBACK_PATH):
            answer = await self._browser_login(request)
            return await answer(scope, receive, send)
        authorization = request.headers.get("authorization")
        try:
            scope[IDENTITY] = await run_in_threadpool(self._identify, authorization,
                                                      request.cookies.get(SESSION_COOKIE))
        except Refused as e:
            if e.who:   # a browser's first request carries no credentials: the prompt, not a refusal
                log.warning("console login refused: %s from %s: %s", _one_line(e.who), _client(scope),
                            _one_line(e.why))
            if self.browser is not None and authorization is None and request.method == "GET" and e.status == 401:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                answer = RedirectResponse(f"{LOGIN_PATH}?{urlencode({'next': target})}", status_code=302)
                if e.who:
                    answer.delete_cookie(SESSION_COOKIE)
                return await answer(scope, receive, send)
            # a refused token is told so (RFC 6750), not offered the basic prompt it did not come through
            challenge = f'Bearer realm="{REALM}", error="invalid_token"' if e.bearer else self.challenge
            headers = {"WWW-Authenticate": challenge} if e.status == 401 else {}
            message = "log in to the tidelake console" if not e.who else f"login refused: {e.why}"
            return await PlainTextResponse(message, e.status, headers=headers)(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _browser_login(self, request: Request):
        if request.url.path == LOGIN_PATH:
            return self.browser.start(request)
        try:
            identity, answer = await run_in_threadpool(self.browser.finish, request)
        except CallbackRefused as e:
            log.warning("console login refused: an OIDC callback from %s: %s", _client(request.scope),
                        _one_line(str(e)))
            return self.browser.refused_page(str(e))
        log.info("console login: %s (%s) through the OIDC provider", identity.name, identity.role)
        return answer

    def _identify(self, authorization: str | None, session: str | None = None) -> Identity:
        """Run in a thread: Argon2 verification takes a CPU for most of a second."""
        scheme, _, credentials = (authorization or "").partition(" ")
        scheme, credentials = scheme.lower(), credentials.strip()
        if not authorization and session and self.browser is not None:
            try:   # the ID token the provider gave at login, checked again: the session ends with it
                return self.bearer.identify(session)
            except TokenValidationError as e:
                raise Refused("a session cookie", str(e), 403 if isinstance(e, NoConsoleRole) else 401) from None
        if not authorization:
            raise Refused("", "no credentials")
        if scheme == "basic" and self.users is not None:
            try:
                name, sep, password = base64.b64decode(credentials, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise Refused("(unreadable)", "basic credentials that are not base64 of NAME:PASSWORD") from None
            if not sep:
                raise Refused("(unreadable)", "basic credentials that are not base64 of NAME:PASSWORD")
            checked = self.users.check(name, password)
            if isinstance(checked, str):
                raise Refused(f"user {name!r}", checked)
            return Identity(checked.name, checked.role, "basic")
        if scheme == "bearer" and self.bearer is not None:
            try:
                return self.bearer.identify(credentials)
            except TokenValidationError as e:
                raise Refused("a bearer token", str(e), 403 if isinstance(e, NoConsoleRole) else 401,
                              bearer=True) from None
        offered = " or ".join(s for s, on in (("basic", self.users), ("bearer", self.bearer)) if on)
        raise Refused(f"a {scheme or 'malformed'} Authorization", f"this console takes {offered} credentials")


def require_role(request: Request, needed: str = OPERATOR) -> Identity:
    """The request's identity when its role allows ``needed``, else 403 naming the role needed."""
    identity: Any = request.scope.get(IDENTITY)
    if identity is None:
        raise HTTPException(403, f"this needs the {needed} role: start the console with --users-file or --oidc-* "
                                 f"to log in")
    if not role_allows(identity.role, needed):
        log.warning("console action refused: %s (%s) from %s: %s needs the %s role", _one_line(identity.name),
                    identity.role, _client(request.scope), request.url.path, needed)
        raise HTTPException(403, f"this needs the {needed} role; {identity.name} is a {identity.role}")
    return identity
