"""Whatever a client sends as its OAUTHBEARER message or token, the server answers with SaslAuthenticationError (the
broker's SASL_AUTHENTICATION_FAILED with a reason), never another exception."""
from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from joserfc.jwk import RSAKey

from tidelake.security.jwks import JwksKeySet, JwksSettings
from tidelake.security.oauth_tokens import JwksValidator, UnsecuredJwsValidator
from tidelake.security.sasl import SaslAuthenticationError
from tidelake.security.sasl.oauthbearer import OAuthBearerServer

VALIDATOR = UnsecuredJwsValidator("sub", "scope", frozenset({"kafka"}), 0)
NOW_MS = 1_700_000_000_000
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@pytest.fixture(scope="module")
def jwks_validator(tmp_path_factory):
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    path.write_text(json.dumps({"keys": [key.as_dict(private=False)]}))
    keys = JwksKeySet(JwksSettings(path.as_uri(), refresh_ms=3_600_000, retry_backoff_ms=3_600_000))
    return JwksValidator(keys, "https://idp.test", ("tidelake",), "sub", 30)


def b64(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def outcome(message: bytes) -> str:
    server = OAuthBearerServer(VALIDATOR, lambda: NOW_MS)
    try:
        server.step(message)
    except SaslAuthenticationError:
        return "refused"
    return "accepted"


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_refused_cleanly(message):
    assert outcome(message) == "refused"


@settings(max_examples=150, deadline=None)
@given(header=st.one_of(st.just({"alg": "none"}), JSON), claims=st.one_of(st.just({"sub": "a", "scope": "kafka"}), JSON), exp=st.one_of(st.floats(), st.integers(), st.text(max_size=3)),
       iat=st.one_of(st.floats(), st.integers(), st.none()))
def test_any_claims_are_judged_without_error(header, claims, exp, iat):
    if isinstance(claims, dict):
        claims = {**claims, "exp": exp, "iat": iat}
    token = f"{b64(header)}.{b64(claims)}."
    assert outcome(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) in ("refused", "accepted")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.one_of(st.just({"alg": "RS256", "kid": "k1"}), JSON), claims=JSON,
       signature=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", max_size=40))
def test_any_token_is_judged_by_the_jwks_validator_without_error(jwks_validator, header, claims, signature):
    token = f"{b64(header)}.{b64(claims)}.{signature}"
    server = OAuthBearerServer(jwks_validator, lambda: NOW_MS)
    try:
        server.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    except SaslAuthenticationError:
        pass
