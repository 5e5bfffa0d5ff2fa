"""KIP-368 SASL re-authentication: connections.max.reauth.ms is accepted, SaslAuthenticate tells the session
lifetime, a connection whose session expired is closed on its next request, and a client re-authenticates over
the same connection (by hand on the wire, and librdkafka on its own)."""
from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Producer
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from tidelake.broker import EmbeddedBroker
from tidelake.protocol.wire_client import WireClient

LIFETIME_MS = 1500
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')
SASL_FAILED, ILLEGAL_STATE, UNSUPPORTED_MECHANISM = 58, 34, 33


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
              "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
              "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
              "connections.max.reauth.ms": str(LIFETIME_MS)}
    with EmbeddedBroker(tmp_path_factory.mktemp("reauth"), config=config) as b:
        yield b


def plain_login(c: WireClient, user: str, password: str, mechanism: str = "PLAIN"):
    """SaslHandshake v1 + SaslAuthenticate v2 with PLAIN; (handshake error, authenticate response or None)."""
    h = c.request(SaslHandshakeRequest(mechanism=mechanism), 1)
    if h.error_code:
        return h.error_code, None
    return 0, c.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 2)


def metadata(c: WireClient):
    return c.request(MetadataRequest[1](topics=[]), 1)


def sleep_past(deadline: float) -> None:
    """Wait until the monotonic clock has passed ``deadline`` (a session's end, not a timed assertion)."""
    time.sleep(max(0.0, deadline - time.monotonic()) + 0.05)


def test_the_session_lifetime_is_told_and_an_expired_session_is_closed_on_its_next_request(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        started = time.monotonic()
        error, r = plain_login(c, "alice", "alice-secret")
        assert (error, r.error_code, r.session_lifetime_ms) == (0, 0, LIFETIME_MS)
        assert metadata(c).brokers  # inside the session
        sleep_past(started + LIFETIME_MS / 1000)
        with pytest.raises((ConnectionError, OSError)):  # closed without an answer, as Kafka does
            metadata(c)


def test_reauthentication_over_the_same_connection_extends_the_session(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        started = time.monotonic()
        assert plain_login(c, "alice", "alice-secret")[1].error_code == 0
        sleep_past(started + 1.0)  # well into the first session
        again = time.monotonic()
        error, r = plain_login(c, "alice", "alice-secret")
        assert (error, r.error_code, r.session_lifetime_ms) == (0, 0, LIFETIME_MS)
        sleep_past(started + LIFETIME_MS / 1000)  # the first session's end: the second one holds
        assert again + LIFETIME_MS / 1000 > time.monotonic()
        assert metadata(c).brokers


def test_an_expired_session_may_still_reauthenticate_before_anything_else(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        started = time.monotonic()
        assert plain_login(c, "alice", "alice-secret")[1].error_code == 0
        sleep_past(started + LIFETIME_MS / 1000)
        assert plain_login(c, "alice", "alice-secret")[1].error_code == 0  # the handshake starts it, as Kafka
        assert metadata(c).brokers


def test_reauthentication_keeps_principal_and_mechanism(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        assert plain_login(c, "alice", "alice-secret")[1].error_code == 0
        assert plain_login(c, "alice", "alice-secret")[1].error_code == 0  # a re-authentication at once is fine
        assert plain_login(c, "alice", "alice-secret")[0] == ILLEGAL_STATE  # a second within the same second not
        assert metadata(c).brokers  # the refused one left the session as it was
        time.sleep(1.05)
        error, r = plain_login(c, "admin", "admin-secret")
        assert (error, r.error_code) == (0, SASL_FAILED)
        assert "Cannot change principals during re-authentication" in r.error_message
        with pytest.raises((ConnectionError, OSError)):
            metadata(c)
    with WireClient.connect(broker.bootstrap_servers) as c:
        assert plain_login(c, "alice", "alice-secret")[1].error_code == 0
        assert plain_login(c, "alice", "x", mechanism="SCRAM-SHA-256")[0] == UNSUPPORTED_MECHANISM
        with pytest.raises((ConnectionError, OSError)):
            metadata(c)


def test_librdkafka_reauthenticates_and_keeps_producing_on_one_connection(broker, caplog):
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.sasl")
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.transport")  # (the handler takes the last level)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
                  "linger.ms": 0})
    delivered, failed = [], []
    deadline = time.monotonic() + 3 * LIFETIME_MS / 1000  # two re-authentications' worth of sessions
    i = 0
    while time.monotonic() < deadline:
        p.produce("reauth-topic", f"m{i}".encode(),
                  on_delivery=lambda err, msg: (failed if err else delivered).append(err or msg.offset()))
        i += 1
        p.flush(10)
        time.sleep(0.05)
    assert p.flush(10) == 0
    assert failed == [] and len(delivered) == i
    messages = [r.getMessage() for r in caplog.records]
    assert any(" re-authenticated as User:alice with PLAIN" in m for m in messages)
    assert not any("expired without re-authentication" in m for m in messages)
