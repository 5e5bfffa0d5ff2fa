"""The console behind a login, in chromium: HTTP basic against a users file written by ``tidelake console users
add``, OIDC bearer tokens verified with a JWKS this test serves, the roles (a viewer sees pages, an operator runs
actions), https with a certificate of the test CA; each refused login one line in the console's log."""
from __future__ import annotations

import json
import os
import re
import secrets
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey
from playwright.sync_api import expect

from console_fixtures import OPERATOR_LOGIN, ROOT, VIEWER_LOGIN, add_console_user, browser_page, console_process
from security_fixtures import serve_jwks
from tls_certs import make_pki
from tidelake.console.oidc_login import SESSION_COOKIE
from tidelake.console.oidc_settings import CLIENT_SECRET_ENV
from tidelake.table import Table

ISSUER, AUDIENCE = "https://idp.test", "tidelake-console"


@pytest.fixture(scope="module")
def provider():
    key = RSAKey.generate_key(2048, parameters={"kid": "console-k1"})
    with serve_jwks(key) as (url, _body):
        yield key, url


def token(key: RSAKey, **claims) -> str:
    now = int(time.time())
    return jwt.encode({"alg": "RS256", "kid": key.kid},
                      {"sub": "dana", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600,
                       "roles": ["viewer"], **claims}, key)


@pytest.fixture(scope="module")
def secured(data, users_file, provider):
    """A console offering actions, with both logins: the users file and the test's issuer."""
    _key, url = provider
    with console_process(data, "--allow-actions", "--users-file", str(users_file), "--oidc-jwks-url", url,
                         "--oidc-issuer", ISSUER, "--oidc-audience", AUDIENCE) as c:
        yield c


def logged_in(browser, login: tuple[str, str]):
    return browser_page(browser, http_credentials={"username": login[0], "password": login[1]})


def bearer(browser, jwt_text: str):
    return browser_page(browser, extra_http_headers={"Authorization": f"Bearer {jwt_text}"})


def test_basic_login_with_the_right_password_shows_the_pages(secured, browser) -> None:
    with logged_in(browser, VIEWER_LOGIN) as page:
        answer = page.goto(f"{secured.url}/topics")
        assert answer is not None and answer.status == 200
        expect(page.locator("#identity")).to_have_text(f"{VIEWER_LOGIN[0]} (viewer)")
        expect(page.locator("h1")).to_have_text("Topics")


def test_a_wrong_password_is_refused_and_logged_in_one_line(secured, browser) -> None:
    with logged_in(browser, (VIEWER_LOGIN[0], "not-the-password")) as page:
        answer = page.goto(f"{secured.url}/topics")
        assert answer is not None and answer.status == 401
        assert "Topics" not in page.content()
    line = secured.log_line("console login refused", repr(VIEWER_LOGIN[0]))
    assert re.search(r"from 127\.0\.0\.1:\d+: wrong password$", line.strip()), line
    with logged_in(browser, ("nobody", "x")) as page:
        assert page.goto(f"{secured.url}/").status == 401
    assert secured.log_line("console login refused", "'nobody'").strip().endswith("no such user")
    assert "Traceback" not in secured.stderr


def test_a_user_added_or_removed_counts_at_the_next_request(secured, users_file, browser) -> None:
    """The users file is read again when it changes: no restart (tidelake console users add|remove)."""
    with logged_in(browser, ("late", "late-password")) as page:
        assert page.goto(f"{secured.url}/").status == 401
        add_console_user(users_file, "late", "late-password", "viewer")
        assert page.goto(f"{secured.url}/").status == 200
        expect(page.locator("#identity")).to_have_text("late (viewer)")
    done = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "console", "users", "remove", "late",
                           "--users-file", str(users_file)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    with logged_in(browser, ("late", "late-password")) as page:
        assert page.goto(f"{secured.url}/").status == 401


def test_no_credentials_is_asked_to_log_in(secured, page) -> None:
    answer = page.request.get(f"{secured.url}/topics")
    assert answer.status == 401
    assert answer.headers["www-authenticate"].startswith('Basic realm="tidelake console"')
    assert "Bearer" in answer.headers["www-authenticate"]
    assert page.request.get(f"{secured.url}/healthz").status == 200   # the probe needs no login


def test_a_viewer_is_refused_an_action_naming_the_role(secured, data, browser) -> None:
    version = Table.open(str(data.table_path)).version
    with logged_in(browser, VIEWER_LOGIN) as page:
        page.goto(f"{secured.url}/tables/orders")
        page.click("a.button:has-text('Compact')")
        expect(page.locator("main")).to_contain_text(f"this needs the operator role; {VIEWER_LOGIN[0]} is a viewer")
        answer = page.request.post(f"{secured.url}/actions/compact", form={"table": "orders", "confirm": "yes"})
        assert answer.status == 403 and "operator role" in answer.text()
    assert Table.open(str(data.table_path)).version == version
    assert "needs the operator role" in secured.log_line("console action refused", VIEWER_LOGIN[0])


def test_an_operator_is_offered_the_action(secured, browser) -> None:
    with logged_in(browser, OPERATOR_LOGIN) as page:
        answer = page.goto(f"{secured.url}/actions/compact?table=orders")
        assert answer is not None and answer.status == 200
        expect(page.locator("h1")).to_have_text("Compact table orders?")
        expect(page.locator("#identity")).to_have_text(f"{OPERATOR_LOGIN[0]} (operator)")


def test_an_oidc_bearer_token_logs_in_with_its_role(secured, provider, browser) -> None:
    key, _url = provider
    with bearer(browser, token(key)) as page:
        assert page.goto(f"{secured.url}/groups").status == 200
        expect(page.locator("#identity")).to_have_text("dana (viewer)")
        assert page.goto(f"{secured.url}/actions/compact?table=orders").status == 403
        expect(page.locator("main")).to_contain_text("this needs the operator role; dana is a viewer")
    with bearer(browser, token(key, sub="omar", roles="operator")) as page:
        assert page.goto(f"{secured.url}/actions/compact?table=orders").status == 200
        expect(page.locator("#identity")).to_have_text("omar (operator)")


@pytest.mark.parametrize("claims, status, reason", [
    ({"exp": int(time.time()) - 600, "iat": int(time.time()) - 1200}, 401, "expired"),
    ({"aud": "someone-else"}, 401, "aud"),
    ({"roles": ["admin"]}, 403, "names no console role"),
], ids=["expired", "wrong-audience", "wrong-role"])
def test_a_bad_bearer_token_is_refused_with_the_reason(secured, provider, browser, claims, status, reason) -> None:
    key, _url = provider
    with bearer(browser, token(key, sub=f"bad-{status}-{reason.split()[0]}", **claims)) as page:
        answer = page.goto(f"{secured.url}/topics")
        assert answer is not None and answer.status == status
        expect(page.locator("body")).to_contain_text("login refused")
        expect(page.locator("body")).to_contain_text(reason)
    line = secured.log_line("console login refused: a bearer token from 127.0.0.1", reason)
    assert "Traceback" not in secured.stderr and "eyJ" not in line   # the token itself is never logged


def test_a_token_signed_by_another_key_is_refused(secured, browser) -> None:
    stranger = RSAKey.generate_key(2048, parameters={"kid": "console-k1"})
    with bearer(browser, token(stranger)) as page:
        assert page.goto(f"{secured.url}/").status == 401
    assert "signature" in secured.log_line("console login refused: a bearer token", "does not verify")


# -- https -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("console-pki"))


def test_tls_serves_the_console_with_the_given_certificate(data, users_file, pki, browser) -> None:
    with console_process(data, "--users-file", str(users_file), "--tls-cert", str(pki.server_cert),
                         "--tls-key", str(pki.server_key)) as c:
        assert c.url.startswith("https://127.0.0.1:")
        trusting = ssl.create_default_context(cafile=str(pki.ca))
        with pytest.raises(urllib.error.HTTPError) as refused:   # the handshake verifies: the CA signed it
            urllib.request.urlopen(f"{c.url}/topics", context=trusting, timeout=30)
        assert refused.value.code == 401
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(f"{c.url}/topics", context=ssl.create_default_context(cafile=str(pki.other_ca)),
                                   timeout=30)
        with pytest.raises((urllib.error.URLError, ConnectionError)):   # no plain http on the port
            urllib.request.urlopen(c.url.replace("https://", "http://") + "/healthz", timeout=30)
        # chromium trusts no test CA: the certificate was checked above; here the pages over https, logged in
        with browser_page(browser, ignore_https_errors=True,
                          http_credentials={"username": VIEWER_LOGIN[0], "password": VIEWER_LOGIN[1]}) as page:
            assert page.goto(f"{c.url}/topics").status == 200
            expect(page.locator("#identity")).to_have_text(f"{VIEWER_LOGIN[0]} (viewer)")
            assert page.evaluate("location.protocol") == "https:"


# -- a browser's login through the provider (the authorization-code flow) ----------------------------------------
CLIENT_ID, CLIENT_SECRET = "tidelake-console-web", "client-secret-for-tests"


@pytest.fixture(scope="module")
def issuer():
    """A small OIDC provider on 127.0.0.1: discovery, an authorization endpoint that logs 'ivy' in at once
    (no form), a token endpoint answering a signed ID token for the code, and its JWKS."""
    key = RSAKey.generate_key(2048, parameters={"kid": "idp-k1"})
    jwks = json.dumps({"keys": [key.as_dict(private=False)]}).encode()
    codes: dict[str, dict] = {}
    seen: list[dict] = []

    class Provider(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: bytes = b"", headers: dict | None = None):
            self.send_response(status)
            for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            if url.path == "/.well-known/openid-configuration":
                return self._answer(200, json.dumps({"issuer": base, "authorization_endpoint": f"{base}/authorize",
                                                     "token_endpoint": f"{base}/token",
                                                     "jwks_uri": f"{base}/jwks.json"}).encode())
            if url.path == "/jwks.json":
                return self._answer(200, jwks)
            if url.path == "/authorize":
                q = dict(urllib.parse.parse_qsl(url.query))
                seen.append(q)
                code = secrets.token_urlsafe(8)
                codes[code] = q
                back = f"{q['redirect_uri']}?{urllib.parse.urlencode({'code': code, 'state': q['state']})}"
                return self._answer(302, headers={"Location": back})
            self._answer(404)

        def do_POST(self):
            form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
            asked = codes.pop(form.get("code"), None)
            if (asked is None or form.get("client_secret") != CLIENT_SECRET
                    or form.get("redirect_uri") != asked["redirect_uri"]):
                return self._answer(400, b'{"error": "invalid_grant"}')
            now = int(time.time())
            id_token = jwt.encode({"alg": "RS256", "kid": key.kid},
                                  {"sub": "ivy", "iss": base, "aud": CLIENT_ID, "iat": now, "exp": now + 600,
                                   "nonce": asked["nonce"], "roles": ["operator"]}, key)
            self._answer(200, json.dumps({"id_token": id_token, "token_type": "Bearer"}).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base, seen, key
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def browser_login_console(data, issuer):
    base, _seen, _key = issuer
    os.environ[CLIENT_SECRET_ENV] = CLIENT_SECRET   # (the console's env; never an option)
    try:
        with console_process(data, "--allow-actions", "--oidc-jwks-url", f"{base}/jwks.json", "--oidc-issuer", base,
                             "--oidc-audience", CLIENT_ID, "--oidc-client-id", CLIENT_ID) as c:
            yield c
    finally:
        del os.environ[CLIENT_SECRET_ENV]


def test_a_browser_logs_in_through_the_provider(browser_login_console, issuer, page) -> None:
    _base, seen, _key = issuer
    answer = page.goto(f"{browser_login_console.url}/groups?x=1")
    assert answer is not None and answer.status == 200
    assert page.url == f"{browser_login_console.url}/groups?x=1"      # back where it started
    expect(page.locator("#identity")).to_have_text("ivy (operator)")
    asked = seen[-1]
    assert (asked["response_type"], asked["client_id"], asked["scope"]) == ("code", CLIENT_ID, "openid")
    assert asked["redirect_uri"] == f"{browser_login_console.url}/oidc/callback" and asked["nonce"]
    cookie = next(c for c in page.context.cookies() if c["name"] == SESSION_COOKIE)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert page.goto(f"{browser_login_console.url}/actions/compact?table=orders").status == 200   # the session


def test_a_forged_callback_is_refused(browser_login_console, page) -> None:
    answer = page.goto(f"{browser_login_console.url}/oidc/callback?code=stolen&state=forged")
    assert answer is not None and answer.status == 403
    expect(page.locator("body")).to_contain_text("state is not the one this console sent")
    assert browser_login_console.log_line("console login refused: an OIDC callback from 127.0.0.1", "forged")
    assert page.request.get(f"{browser_login_console.url}/topics", max_redirects=0).status == 302


def test_an_expired_session_goes_to_the_provider_again(browser_login_console, issuer, page) -> None:
    base, seen, key = issuer
    now = int(time.time())
    expired = jwt.encode({"alg": "RS256", "kid": key.kid}, {"sub": "ivy", "iss": base, "aud": CLIENT_ID,
                                                            "iat": now - 1200, "exp": now - 600, "roles": "viewer"},
                         key)
    page.context.add_cookies([{"name": SESSION_COOKIE, "value": expired, "url": browser_login_console.url}])
    logins = len(seen)
    assert page.goto(f"{browser_login_console.url}/tables").status == 200
    expect(page.locator("#identity")).to_have_text("ivy (operator)")   # the fresh token's role
    assert len(seen) == logins + 1
    assert "expired" in browser_login_console.log_line("console login refused: a session cookie from 127.0.0.1")

