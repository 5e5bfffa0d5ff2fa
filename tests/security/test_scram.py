"""SCRAM-SHA-256/512 server against RFC 7677's test vector and a client written from RFC 5802."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from tidelake.security.sasl import SaslAuthenticationError
from tidelake.security.sasl.plain import PlainServer
from tidelake.security.sasl.scram import ScramServer, credential_from_salted_password, new_credential, salted_password


def test_rfc7677_sha256_vector():
    # RFC 7677 section 3: user "user", password "pencil", i=4096
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = credential_from_salted_password("SCRAM-SHA-256", salted_password("SCRAM-SHA-256", "pencil", salt, 4096),
                                           salt, 4096)
    server = ScramServer("SCRAM-SHA-256", {"user": cred}.get, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


def client_exchange(mechanism: str, server: ScramServer, user: str, password: str, *, tamper=None) -> bytes:
    h = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    bare = f"n={user},r=clientnonce"
    first = server.step(f"n,,{bare}".encode()).decode()
    attrs = dict(p.split("=", 1) for p in first.split(","))
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored = hashlib.new(h, client_key).digest()
    nonce = attrs["r"] if tamper != "nonce" else attrs["r"] + "x"
    without_proof = f"c=biws,r={nonce}"
    sig = hmac.new(stored, f"{bare},{first},{without_proof}".encode(), h).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    if tamper == "proof":
        proof = bytes([proof[0] ^ 1]) + proof[1:]
    return server.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_and_refusals(mechanism):
    creds = {"alice": new_credential(mechanism, "alice-secret")}
    server = ScramServer(mechanism, creds.get)
    assert client_exchange(mechanism, server, "alice", "alice-secret").startswith(b"v=")
    assert server.username == "alice"
    for user, password, tamper in [("alice", "wrong", None), ("alice", "alice-secret", "nonce"),
                                   ("alice", "alice-secret", "proof"), ("mallory", "x", None)]:
        with pytest.raises(SaslAuthenticationError, match="Authentication failed"):
            client_exchange(mechanism, ScramServer(mechanism, creds.get), user, password, tamper=tamper)


@pytest.mark.parametrize("message", [b"", b"n,,", b"x,,n=a,r=b", b"n,,n=a", b"n,,r=b", b"n,,n=a,r=b,m=ext",
                                     b"n,,n=a=b,r=c", b"\xff\xfe", b"n,," + b"n=a,r=" + b"x" * 9000])
def test_malformed_client_first_is_refused(message):
    with pytest.raises(SaslAuthenticationError):
        ScramServer("SCRAM-SHA-256", {"a": new_credential("SCRAM-SHA-256", "p")}.get).step(message)


def test_client_final_out_of_order_and_garbage():
    creds = {"a": new_credential("SCRAM-SHA-256", "p")}
    s = ScramServer("SCRAM-SHA-256", creds.get)
    s.step(b"n,,n=a,r=abc")
    with pytest.raises(SaslAuthenticationError):
        s.step(b"c=biws,r=abc,p=!!!notbase64")
    with pytest.raises(SaslAuthenticationError):  # a failed exchange stays failed
        s.step(b"n,,n=a,r=abc")


def test_plain():
    server = PlainServer({"admin": "admin-secret"})
    assert server.step(b"\x00admin\x00admin-secret") == b"" and server.username == "admin"
    for token in [b"\x00admin\x00wrong", b"\x00nobody\x00x", b"other\x00admin\x00admin-secret", b"admin-secret",
                  b"\x00\x00x", b"\x00admin\x00", b"\xff\x00admin\x00admin-secret"]:
        with pytest.raises(SaslAuthenticationError):
            PlainServer({"admin": "admin-secret"}).step(token)
