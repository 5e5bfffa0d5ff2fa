"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka serves them.

Only salted, iterated credentials are stored (``ScramCredential``: salt, StoredKey, ServerKey,
iterations); the password is never seen by the broker (KIP-554 clients send the SaltedPassword).
``ScramServer`` is the server side of one exchange, sans-IO:
client-first -> server-first, client-final -> server-final; proofs compared in constant time."""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

from tidelake.security.sasl import SaslAuthenticationError

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# KIP-554 / Kafka's ScramMechanism: the iterations a credential may have
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
MAX_MESSAGE = 8192  # no legitimate SCRAM message is near this


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return {"salt": b64(self.salt), "stored_key": b64(self.stored_key), "server_key": b64(self.server_key),
                "iterations": self.iterations}

    @classmethod
    def from_json(cls, d: dict) -> ScramCredential:
        return cls(base64.b64decode(d["salt"]), base64.b64decode(d["stored_key"]), base64.b64decode(d["server_key"]),
                   int(d["iterations"]))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 (PBKDF2 with the mechanism's HMAC)."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted_password(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    h = HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", h).digest()
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), hmac.new(salted, b"Server Key", h).digest(),
                           iterations)


def new_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> ScramCredential:
    salt = secrets.token_bytes(32)
    return credential_from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                           iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1 or key in out:
            raise SaslAuthenticationError("Invalid SCRAM message")
        out[key] = value
    return out


def _decode_username(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is invalid."""
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslAuthenticationError("Invalid SCRAM username")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange. ``credential_for(username)`` returns the stored credential or None."""

    credential_expiry_ms = None  # a stored credential does not expire (KIP-368: only connections.max.reauth.ms)

    def __init__(self, mechanism: str, credential_for: Callable[[str], ScramCredential | None],
                 nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24)):
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._credential_for = credential_for
        self._nonce = nonce
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = self._server_first = self._gs2_header = self._full_nonce = ""
        self.complete = False
        self.username: str | None = None

    def step(self, token: bytes) -> bytes:
        if len(token) > MAX_MESSAGE:
            raise SaslAuthenticationError("Invalid SCRAM message: too long")
        try:
            message = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._client_first(message)
        if self._state == "final":
            return self._client_final(message)
        raise SaslAuthenticationError("Invalid SCRAM exchange: already complete")

    def _fail(self) -> SaslAuthenticationError:
        self._state = "failed"
        return SaslAuthenticationError("Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism}")

    def _client_first(self, message: str) -> bytes:
        # gs2-header: "n,," or "y,," (no channel binding over Kafka), optionally with "a=authzid"
        flag, sep1, rest = message.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2 or flag not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            self._state = "failed"
            raise SaslAuthenticationError("Invalid SCRAM client-first message")
        attrs = _attributes(bare)
        if "m" in attrs or "n" not in attrs or "r" not in attrs or not attrs["r"] or not attrs["n"]:
            self._state = "failed"
            raise SaslAuthenticationError("Invalid SCRAM client-first message")
        username = _decode_username(attrs["n"])
        if authzid and _decode_username(authzid[2:]) != username:
            self._state = "failed"
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        credential = self._credential_for(username)
        if credential is None:
            raise self._fail()
        self.username = username
        self._credential = credential
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._full_nonce = attrs["r"] + self._nonce()
        self._server_first = (f"r={self._full_nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise self._fail()
        attrs = _attributes(without_proof)
        # Kafka's ScramSaslServer accepts a nonce that ends with the one it issued (librdkafka 2.0.x
        # sends the client nonce twice); the server's part, which makes the proof fresh, must be there
        if not attrs.get("r", "").endswith(self._full_nonce):
            raise self._fail()  # a nonce the server did not issue: a replay or a broken client
        if attrs.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise self._fail()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise self._fail() from None
        cred = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = hmac.new(cred.stored_key, auth_message, self._hash).digest()
        if len(proof) != len(client_signature):
            raise self._fail()
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), cred.stored_key):
            raise self._fail()
        server_signature = hmac.new(cred.server_key, auth_message, self._hash).digest()
        self._state = "done"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
