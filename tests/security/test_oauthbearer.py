"""SASL/OAUTHBEARER: Kafka's unsecured JWS validator (alg none, sub, exp, the unsecuredValidator* options) and the
JWKS validator (signature by the provider's keys, issuer, audience, expiry; the JWKS served over HTTP on
127.0.0.1 by the test, or read from a file). librdkafka (confluent-kafka) logs in both ways and produces; bad
tokens are refused with the reason; the token's expiry bounds the session (KIP-368)."""
from __future__ import annotations

import base64
import json
import logging
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from joserfc import jwt
from joserfc.jwk import RSAKey
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from security_fixtures import serve_jwks
from tidelake.broker import EmbeddedBroker
from tidelake.broker.config import BrokerConfig
from tidelake.broker.config_definitions import TYPE_INT, TYPE_LIST, TYPE_LONG, TYPE_STRING, ConfigError
from tidelake.cli.main import cli
from tidelake.protocol.wire_client import WireClient
from tidelake.security.config import BrokerSecurity, SecurityConfigError

SASL_FAILED = 58
LOGIN = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required'
ISSUER, AUDIENCE = "https://idp.test", "tidelake"


def listener_config(**extra: str) -> dict[str, str]:
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER", **extra}


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured(claims: dict, header: dict | None = None) -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}."


def login(c: WireClient, token: str):
    assert c.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
    return c.request(SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()), 2)


def produce_and_read_back(bootstrap: str, client: dict, topic: str) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, **client})
    for i in range(5):
        p.produce(topic, f"m{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-g", "auto.offset.reset": "earliest", **client})
    c.subscribe([topic])
    values, deadline = [], time.monotonic() + 30
    while len(values) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            values.append(m.value())
    c.close()
    return values


# -- unsecured JWS (Kafka's default validator) -------------------------------------------------------------------
@pytest.fixture(scope="module")
def unsecured_broker(tmp_path_factory):
    config = listener_config(**{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                                f'{LOGIN} unsecuredValidatorRequiredScope="kafka";'})
    with EmbeddedBroker(tmp_path_factory.mktemp("oauth-unsecured"), config=config) as b:
        yield b


def test_librdkafka_logs_in_with_an_unsecured_token(unsecured_broker, caplog):
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.sasl")
    client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
              "enable.sasl.oauthbearer.unsecure.jwt": True,
              "sasl.oauthbearer.config": "principal=alice scope=kafka lifeSeconds=600"}
    assert produce_and_read_back(unsecured_broker.bootstrap_servers, client, "oauth-u") == [
        f"m{i}".encode() for i in range(5)]
    assert any("authenticated as User:alice with OAUTHBEARER" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("token, reason", [
    (unsecured({"sub": "alice", "exp": 1, "scope": "kafka"}), "the token expired"),
    (unsecured({"exp": 4102444800, "scope": "kafka"}), "no 'sub' claim"),
    (unsecured({"sub": "alice", "scope": "kafka"}), "no numeric 'exp' claim"),
    (unsecured({"sub": "alice", "exp": 4102444800, "scope": "other"}), "lacks the required scope kafka"),
    (unsecured({"sub": "alice", "exp": 4102444800, "scope": "kafka"}, {"alg": "HS256"}), "alg 'none'"),
    ("not-a-jws", "not a JWS"),
])
def test_a_bad_unsecured_token_is_refused_with_the_reason(unsecured_broker, token, reason):
    with WireClient.connect(unsecured_broker.bootstrap_servers) as c:
        r = login(c, token)
    assert r.error_code == SASL_FAILED and reason in r.error_message


def test_the_session_lasts_until_the_token_expires(unsecured_broker):
    exp = time.time() + 20
    with WireClient.connect(unsecured_broker.bootstrap_servers) as c:
        r = login(c, unsecured({"sub": "alice", "exp": exp, "scope": "kafka"}))
    assert r.error_code == 0 and 0 < r.session_lifetime_ms <= 20_000


# -- JWKS-validated tokens ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def provider():
    """An identity provider's signing key, its JWKS served over HTTP on 127.0.0.1 (stopped by the fixture)."""
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with serve_jwks(key) as (url, body):
        yield key, url, body


def signed(key: RSAKey, **claims) -> str:
    now = int(time.time())
    return jwt.encode({"alg": "RS256", "kid": key.kid},
                      {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, **claims}, key)


@pytest.fixture(scope="module")
def jwks_broker(tmp_path_factory, provider):
    _key, url, _body = provider
    config = listener_config(**{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{LOGIN};",
                                "sasl.oauthbearer.jwks.endpoint.url": url,
                                "sasl.oauthbearer.expected.issuer": ISSUER,
                                "sasl.oauthbearer.expected.audience": AUDIENCE})
    with EmbeddedBroker(tmp_path_factory.mktemp("oauth-jwks"), config=config) as b:
        yield b


def test_librdkafka_logs_in_with_a_jwks_signed_token(jwks_broker, provider):
    key, _url, _body = provider

    def token(_config):
        return signed(key), time.time() + 600

    client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "oauth_cb": token}
    assert produce_and_read_back(jwks_broker.bootstrap_servers, client, "oauth-j") == [
        f"m{i}".encode() for i in range(5)]


def test_a_bad_signed_token_is_refused_with_the_reason(jwks_broker, provider):
    key, _url, _body = provider
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    now = int(time.time())
    cases = [(signed(key, iss="https://other.test"), "iss"),
             (signed(key, aud="someone-else"), "aud"),
             (signed(key, iat=now - 1200, exp=now - 600), "exp"),
             (signed(stranger), "does not verify"),
             (signed(RSAKey.generate_key(2048, parameters={"kid": "k9"})), "no key with id 'k9'"),
             (unsecured({"sub": "alice", "exp": now + 600}), "does not verify")]
    for token, reason in cases:
        with WireClient.connect(jwks_broker.bootstrap_servers) as c:
            r = login(c, token)
        assert r.error_code == SASL_FAILED and reason in r.error_message, (reason, r.error_message)
    with WireClient.connect(jwks_broker.bootstrap_servers) as c:
        assert login(c, signed(key)).error_code == 0


def test_a_jwks_file_and_the_settings_checked_at_start(tmp_path, provider):
    _key, _url, body = provider
    (tmp_path / "jwks.json").write_bytes(body)
    jaas = {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{LOGIN};"}
    listeners = {"SASL_PLAINTEXT": "SASL_PLAINTEXT"}

    def security(**configs: str) -> BrokerSecurity:
        return BrokerSecurity(BrokerConfig.from_file(None, {"sasl.enabled.mechanisms": "OAUTHBEARER", **configs}),
                              listeners, tmp_path)

    assert security(**jaas, **{"sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "jwks.json").as_uri()})
    for configs, message in [
        ({}, "oauthbearer.sasl.jaas.config is required"),
        ({**jaas, "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "none.json").as_uri()},
         "cannot read a JSON Web Key Set"),
        ({**jaas, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
          "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"},
         "needs sasl.oauthbearer.jwks.endpoint.url"),
    ]:
        with pytest.raises(SecurityConfigError, match=message):
            security(**configs)


def test_the_oauthbearer_broker_configs_are_typed_as_kafka_defines_them(tmp_path, provider):
    described = {e.name: (e.type, e.value) for e in BrokerConfig().describe()}
    assert {name: described.get(name) for name in [
        "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name"]} == {
        "sasl.oauthbearer.jwks.endpoint.url": (TYPE_STRING, None),
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": (TYPE_LONG, "3600000"),
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (TYPE_LONG, "100"),
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (TYPE_LONG, "10000"),
        "sasl.oauthbearer.expected.audience": (TYPE_LIST, None),
        "sasl.oauthbearer.clock.skew.seconds": (TYPE_INT, "30"),
        "sasl.oauthbearer.sub.claim.name": (TYPE_STRING, "sub"),
        "sasl.oauthbearer.scope.claim.name": (TYPE_STRING, "scope")}
    # a bad value is refused at start naming its key, whether OAUTHBEARER is enabled or not, per listener too
    for key in ["sasl.oauthbearer.clock.skew.seconds", "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer."
                "jwks.endpoint.refresh.ms"]:
        with pytest.raises(ConfigError, match=f"^--set: {key}='soon' is not a valid number"):
            BrokerConfig.from_file(None, {key: "soon"})
    # read typed: the JWKS validator gets the listener's override, else the broker-wide value, else the default
    _key, _url, body = provider
    (tmp_path / "jwks.json").write_bytes(body)
    validator = BrokerSecurity(BrokerConfig.from_file(None, {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{LOGIN};",
        "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "jwks.json").as_uri(),
        "sasl.oauthbearer.expected.audience": "a, b",
        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "5"}),
        {"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, tmp_path).listeners["SASL_PLAINTEXT"].oauthbearer
    assert (validator.expected_issuer, validator.expected_audiences, validator.principal_claim,
            validator.clock_skew_s, validator.keys.settings.refresh_ms) == (None, ("a", "b"), "sub", 5, 3600000)


def test_the_cli_logs_in_with_kafka_oauthbearer_client_properties(unsecured_broker, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.sasl")
    config = tmp_path / "alice.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                      f'sasl.jaas.config={LOGIN} unsecuredLoginStringClaim_sub="alice" '
                      'unsecuredLoginStringClaim_scope="kafka";\n')

    def tl(*args: str, stdin: str | None = None):
        result = CliRunner().invoke(cli, [*args, "--bootstrap-server", unsecured_broker.bootstrap_servers,
                                          "--command-config", str(config), "--timeout", "10"], input=stdin,
                                    catch_exceptions=False)
        assert result.exit_code == 0, (args, result.output)
        return result.output

    tl("produce", "oauth-cli", stdin="a\nb\n")
    out = tl("consume", "oauth-cli", "--from-beginning", "--group", "oauth-cli-g", "--max-messages", "2")
    assert out.split()[:2] == ["a", "b"] and "Processed a total of 2 messages" in out
    assert "oauth-cli-g" in tl("groups", "list", "--json")  # a kafka-python based command: its token provider
    assert any("authenticated as User:alice with OAUTHBEARER" in r.getMessage() for r in caplog.records)
