"""A browser's login through the OIDC provider (the authorization-code flow, OpenID Connect Core 3.1), with
``--oidc-client-id`` (and the secret from ``TIDELAKE_CONSOLE_OIDC_CLIENT_SECRET``).

The provider's endpoints come from its discovery document (``ISSUER/.well-known/openid-configuration``), read at
start. A browser without a session is sent to ``/oidc/login``, which sends it to the provider with a random
``state`` and ``nonce`` (kept in a cookie this process signs); the provider sends it back to ``/oidc/callback``
with a code, exchanged at the token endpoint for an ID token. That token is checked as a bearer token is
(``login.BearerTokens``: signature by the JWKS, expiry, issuer, audience, role claim) and its ``nonce`` against the
cookie's; it then is the session cookie (HttpOnly, SameSite=Lax, Secure over https) and is checked again at every
request, so the session ends when the token expires.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from tidelake.security.oauth_tokens import TokenValidationError

LOGIN_PATH, CALLBACK_PATH = "/oidc/login", "/oidc/callback"
SESSION_COOKIE, STATE_COOKIE = "tidelake_console_session", "tidelake_console_oidc_state"
STATE_TTL_S = 600          # a login started longer ago than this is refused at the callback
FETCH_TIMEOUT_S = 10.0     # the discovery document, the token endpoint


class OidcLoginError(ValueError):
    """The provider's discovery document cannot be read (at start; the message names the URL)."""


class CallbackRefused(Exception):
    """The provider's answer is refused; the message says why (logged, and shown to the browser)."""


@dataclass(frozen=True)
class ProviderEndpoints:
    authorization: str
    token: str

    @classmethod
    def discover(cls, issuer: str) -> "ProviderEndpoints":
        url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:
                document = json.loads(answer.read())
            return cls(document["authorization_endpoint"], document["token_endpoint"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise OidcLoginError(f"--oidc-issuer {issuer}: cannot read its discovery document {url} ({e})") from None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class BrowserLogin:
    def __init__(self, issuer: str, client_id: str, client_secret: str | None, bearer):
        self.endpoints = ProviderEndpoints.discover(issuer)
        self.client_id, self.client_secret, self.bearer = client_id, client_secret, bearer
        self._key = secrets.token_bytes(32)   # signs the state cookie; a restart ends logins under way

    # ------------------------------------------------------------------ the state cookie
    def _sign(self, payload: dict) -> str:
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return body + "." + _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def _unsign(self, cookie: str | None) -> dict | None:
        body, _, mac = (cookie or "").partition(".")
        expected = _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())
        if not body or not hmac.compare_digest(mac, expected):
            return None
        return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))

    @staticmethod
    def _redirect_uri(request: Request) -> str:
        return str(request.base_url).rstrip("/") + CALLBACK_PATH

    @staticmethod
    def _secure(request: Request) -> bool:
        return request.url.scheme == "https"

    # ------------------------------------------------------------------ the two pages
    def start(self, request: Request) -> Response:
        """``/oidc/login?next=PATH``: to the provider, with a fresh state and nonce."""
        next_path = request.query_params.get("next", "/")
        if not next_path.startswith("/") or next_path.startswith("//"):   # only this console's own pages
            next_path = "/"
        state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        query = urllib.parse.urlencode({"response_type": "code", "client_id": self.client_id, "scope": "openid",
                                        "redirect_uri": self._redirect_uri(request), "state": state, "nonce": nonce})
        sep = "&" if "?" in self.endpoints.authorization else "?"
        answer = RedirectResponse(f"{self.endpoints.authorization}{sep}{query}", status_code=302)
        answer.set_cookie(STATE_COOKIE, self._sign({"state": state, "nonce": nonce, "next": next_path,
                                                    "at": int(time.time())}),
                          max_age=STATE_TTL_S, httponly=True, samesite="lax", secure=self._secure(request))
        return answer

    def finish(self, request: Request):
        """``/oidc/callback?code&state``: the identity and the response setting its session; or
        ``CallbackRefused``."""
        params = request.query_params
        if "error" in params:
            raise CallbackRefused(f"the provider answered {params['error']}: {params.get('error_description', '')}")
        started = self._unsign(request.cookies.get(STATE_COOKIE))
        if started is None or not hmac.compare_digest(str(started.get("state")), params.get("state", "")):
            raise CallbackRefused("the callback's state is not the one this console sent (a forged or stale login)")
        if time.time() - started["at"] > STATE_TTL_S:
            raise CallbackRefused(f"the login was started more than {STATE_TTL_S} s ago")
        id_token = self._exchange(params.get("code", ""), self._redirect_uri(request))
        try:
            identity = self.bearer.identify(id_token)
            claims = self.bearer.validator.verified_claims(id_token, int(time.time() * 1000))
        except TokenValidationError as e:
            raise CallbackRefused(f"the provider's ID token: {e}") from None
        if not hmac.compare_digest(str(claims.get("nonce", "")), str(started["nonce"])):
            raise CallbackRefused("the ID token's nonce is not the one this console sent (a replayed token)")
        answer = RedirectResponse(started["next"], status_code=303)
        answer.set_cookie(SESSION_COOKIE, id_token, httponly=True, samesite="lax", secure=self._secure(request))
        answer.delete_cookie(STATE_COOKIE)
        return identity, answer

    def _exchange(self, code: str, redirect_uri: str) -> str:
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                "client_id": self.client_id}
        if self.client_secret:
            form["client_secret"] = self.client_secret   # client_secret_post
        call = urllib.request.Request(self.endpoints.token, data=urllib.parse.urlencode(form).encode(),
                                      headers={"Content-Type": "application/x-www-form-urlencoded",
                                               "Accept": "application/json"})
        try:
            with urllib.request.urlopen(call, timeout=FETCH_TIMEOUT_S) as answer:
                token = json.loads(answer.read()).get("id_token")
        except urllib.error.HTTPError as e:
            raise CallbackRefused(f"the token endpoint refused the code: HTTP {e.code}") from None
        except (OSError, ValueError, AttributeError) as e:
            raise CallbackRefused(f"the token endpoint {self.endpoints.token} did not answer a token ({e})") from None
        if not isinstance(token, str):
            raise CallbackRefused("the token endpoint's answer has no id_token")
        return token

    @staticmethod
    def refused_page(why: str) -> Response:
        return PlainTextResponse(f"login refused: {why}\n(start again at {LOGIN_PATH})", 403)
