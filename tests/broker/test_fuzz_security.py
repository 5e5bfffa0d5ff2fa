"""Bad input on the security path (issue 16 item 6): malformed SASL and SCRAM messages, wrong nonces
and proofs, handshakes out of order, oversize frames before login, TLS bytes on a SASL port and
plaintext (or garbage) on a TLS port. Each closes only its own connection, with the right error where
Kafka answers one; a SCRAM-authenticated client keeps producing and fetching the whole time."""
from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import ssl
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from security_fixtures import add_scram_user, secured_broker
from tidelake.protocol.records import Record, build_batch
from steady_client import SteadyClient, produce
from tidelake.protocol.wire_client import WireClient
from tls_certs import make_pki

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SASL_FAILED, ILLEGAL_STATE, UNSUPPORTED_MECHANISM = 58, 34, 33


def scram_login(c: WireClient, user: str, password: str, *, tamper: str | None = None):
    """SCRAM-SHA-256 over SaslHandshake v1 + SaslAuthenticate v2; returns the last response."""
    r = c.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
    assert r.error_code == 0
    bare = f"n={user},r=fuzznonce"
    r = c.request(SaslAuthenticateRequest(auth_bytes=f"n,,{bare}".encode()), 2)
    if r.error_code:
        return r
    first = bytes(r.auth_bytes).decode()
    attrs = dict(p.split("=", 1) for p in first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    nonce = attrs["r"] + ("x" if tamper == "nonce" else "")
    without_proof = f"c=biws,r={nonce}"
    sig = hmac.new(hashlib.sha256(client_key).digest(), f"{bare},{first},{without_proof}".encode(), "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    if tamper == "proof":
        proof = proof[::-1]
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    if tamper == "garbage-final":
        final = b"\xff" + final
    return c.request(SaslAuthenticateRequest(auth_bytes=final), 2)


def _must(ok: bool) -> None:
    if not ok:
        raise RuntimeError("the steady client's login failed")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-security")
    pki = make_pki(d / "pki")
    with secured_broker(d / "data", pki, **{"sasl.server.max.receive.size": "4096"}) as b:
        add_scram_user(b, "steady", "steady-secret")
        b.run(b.broker.create_topic, "steady", 1, {})
        steady = SteadyClient(b.bootstrap_for("SASL_PLAINTEXT"),
                              login=lambda c: _must(scram_login(c, "steady", "steady-secret").error_code == 0))
        steady.start()
        yield b, pki
        steady.stop_event.set()
        steady.join(30)
        assert not steady.failures, steady.failures
        assert steady.round_trips > 0
        with WireClient("127.0.0.1", b.broker.ports["SASL_PLAINTEXT"]) as c:  # a fresh login still works
            assert scram_login(c, "steady", "steady-secret").error_code == 0


@pytest.fixture(autouse=True)
def no_traceback(caplog):
    """Whatever a case sends, nothing reaches the broker's log as a traceback."""
    yield
    traced = [r for r in caplog.records if r.exc_info and (r.name.startswith("tidelake") or r.name == "asyncio")]
    assert not traced, [r.getMessage() for r in traced]


def closed(c: WireClient) -> bool:
    try:
        c.recv_frame()
    except ConnectionError:
        return True
    return False


def _sasl_port(env) -> int:
    return env[0].broker.ports["SASL_PLAINTEXT"]


@pytest.mark.parametrize("tamper", ["nonce", "proof", "garbage-final"])
def test_bad_scram_final_messages_fail_and_close(env, tamper):
    with WireClient("127.0.0.1", _sasl_port(env)) as c:
        r = scram_login(c, "steady", "steady-secret", tamper=tamper)
        assert r.error_code == SASL_FAILED
        assert closed(c)


@FUZZ
@given(st.binary(max_size=300))
def test_random_scram_client_first(env, token):
    with WireClient("127.0.0.1", _sasl_port(env)) as c:
        assert c.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
        r = c.request(SaslAuthenticateRequest(auth_bytes=token), 2)
        # an unknown user or a malformed message: failed and closed (no user "steady" proof is possible)
        assert r.error_code == SASL_FAILED
        assert closed(c)


@FUZZ
@given(st.binary(max_size=300))
def test_random_plain_tokens(env, token):
    with WireClient("127.0.0.1", _sasl_port(env)) as c:
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = c.request(SaslAuthenticateRequest(auth_bytes=token), 2)
        assert r.error_code == (0 if token == b"\x00alice\x00alice-secret" else SASL_FAILED)


def test_handshakes_out_of_order(env):
    port = _sasl_port(env)
    with WireClient("127.0.0.1", port) as c:  # authenticate before handshake: Kafka closes
        c.send_raw(c.encode(SaslAuthenticateRequest(auth_bytes=b"x"), 2))
        assert closed(c)
    with WireClient("127.0.0.1", port) as c:  # a request before login
        c.send_raw(c.encode(MetadataRequest(topics=None), 1))
        assert closed(c)
    with WireClient("127.0.0.1", port) as c:  # a second handshake instead of SaslAuthenticate
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        c.send_raw(c.encode(SaslHandshakeRequest(mechanism="PLAIN"), 1))
        assert closed(c)
    with WireClient("127.0.0.1", port) as c:  # an unknown mechanism: answered with the enabled ones, closed
        r = c.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert (r.error_code, sorted(r.mechanisms)) == (UNSUPPORTED_MECHANISM,
                                                        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        assert closed(c)
    with WireClient("127.0.0.1", port) as c:  # after login, a new handshake is refused (no KIP-368)
        assert scram_login(c, "steady", "steady-secret").error_code == 0
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == ILLEGAL_STATE
    with WireClient("127.0.0.1", env[0].broker.ports["PLAINTEXT"]) as c:  # SASL on a PLAINTEXT listener
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == ILLEGAL_STATE


def test_oversize_frame_before_login_closes(env):
    with WireClient("127.0.0.1", _sasl_port(env)) as c:
        c.send_raw(struct.pack(">i", 100_000) + b"\x00" * 64)  # over sasl.server.max.receive.size=4096
        assert closed(c)
    with WireClient("127.0.0.1", _sasl_port(env)) as c:  # the limit is lifted once logged in
        assert scram_login(c, "steady", "steady-secret").error_code == 0
        big = build_batch([Record(0, 1, None, b"x" * 20_000)])
        assert c.request(produce("steady-big", 0, big), 9).responses[0].partition_responses[0].error_code in (0, 3)


def _tls_client_hello() -> bytes:
    """The first bytes a TLS client sends (a real ClientHello, from Python's ssl)."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def test_tls_on_the_sasl_port_and_plaintext_or_garbage_on_tls_ports(env):
    b, _ = env
    with WireClient("127.0.0.1", _sasl_port(env)) as c:
        c.send_raw(_tls_client_hello())
        assert closed(c)
    for listener in ("SSL", "SASL_SSL", "MTLS"):
        api_versions = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # a whole ApiVersions v0 request frame
        for payload in [api_versions, b"\x16\x03\x01\x00\x05hello",
                        b"GET / HTTP/1.0\r\n\r\n"]:
            with socket.create_connection(("127.0.0.1", b.broker.ports[listener]), timeout=15) as s:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                assert not data.startswith(struct.pack(">i", len(data) - 4))  # no Kafka response frame
    # every listener still serves
    with WireClient("127.0.0.1", b.broker.ports["PLAINTEXT"]) as c:
        assert c.request(ApiVersionsRequest(), 0).error_code == 0


def test_a_failed_login_is_closed_after_the_configured_delay(tmp_path):
    """connection.failed.authentication.delay.ms: the failure is answered at once, the connection stays
    open (muted) for the delay, then closes — a password guesser pays the delay on every try."""
    pki = make_pki(tmp_path / "pki")
    with secured_broker(tmp_path / "data", pki, **{"connection.failed.authentication.delay.ms": "3000"}) as b:
        with WireClient("127.0.0.1", b.broker.ports["SASL_PLAINTEXT"]) as c:
            assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            assert c.request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00wrong"), 2).error_code == SASL_FAILED
            c.sock.settimeout(0.5)
            with pytest.raises(socket.timeout):   # answered, but not closed yet
                c.sock.recv(1)
            c.sock.settimeout(30)
            assert c.sock.recv(1) == b""            # closed once the delay is over
