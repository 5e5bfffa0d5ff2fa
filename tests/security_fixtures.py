"""Shared by the security tests: a broker serving every security protocol (with a test PKI), and
each Python client's settings for one of them."""
from __future__ import annotations

import contextlib
import json
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tls_certs import Pki
from tidelake.broker import EmbeddedBroker

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS")


def broker_config(pki: Pki, **extra: str) -> dict[str, str]:
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        **extra,
    }


@contextlib.contextmanager
def secured_broker(directory: Path, pki: Pki, **extra: str):
    with EmbeddedBroker(directory, config=broker_config(pki, **extra)) as b:
        yield b


@dataclass(frozen=True)
class Login:
    """How a client connects: a listener, and for SASL a mechanism with user and password; ``cert``
    presents the client certificate (mTLS)."""
    listener: str
    mechanism: str | None = None
    user: str | None = None
    password: str | None = None
    cert: bool = False

    @property
    def protocol(self) -> str:
        return "SSL" if self.listener == "MTLS" else self.listener

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def __str__(self) -> str:
        return f"{self.listener}-{self.mechanism or ('cert' if self.cert else 'none')}"


def confluent_config(b: EmbeddedBroker, pki: Pki, login: Login) -> dict:
    c = {"bootstrap.servers": b.bootstrap_for(login.listener), "security.protocol": login.protocol}
    if login.tls:
        c["ssl.ca.location"] = str(pki.ca)
    if login.cert:
        c.update({"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)})
    if login.mechanism:
        c.update({"sasl.mechanism": login.mechanism, "sasl.username": login.user, "sasl.password": login.password})
    return c


def kafka_python_config(b: EmbeddedBroker, pki: Pki, login: Login) -> dict:
    c = {"bootstrap_servers": b.bootstrap_for(login.listener), "security_protocol": login.protocol}
    if login.tls:
        c["ssl_cafile"] = str(pki.ca)
    if login.cert:
        c.update({"ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(pki.client_key)})
    if login.mechanism:
        c.update({"sasl_mechanism": login.mechanism, "sasl_plain_username": login.user,
                  "sasl_plain_password": login.password})
    return c


def aiokafka_config(b: EmbeddedBroker, pki: Pki, login: Login) -> dict:
    c = {"bootstrap_servers": b.bootstrap_for(login.listener), "security_protocol": login.protocol}
    if login.tls:
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        if login.cert:
            ctx.load_cert_chain(str(pki.client_cert), str(pki.client_key))
        c["ssl_context"] = ctx
    if login.mechanism:
        c.update({"sasl_mechanism": login.mechanism, "sasl_plain_username": login.user,
                  "sasl_plain_password": login.password})
    return c


ADMIN = Login("SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret")


def add_scram_user(b: EmbeddedBroker, user: str, password: str, admin_conf: dict | None = None) -> None:
    """Both SCRAM credentials for ``user`` (KIP-554 with confluent-kafka), through the PLAINTEXT
    listener or as the client ``admin_conf`` describes."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient(admin_conf or {"bootstrap.servers": b.bootstrap_for("PLAINTEXT")})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), password.encode())
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)])
    for f in futures.values():
        f.result(30)


@contextlib.contextmanager
def serve_jwks(*keys):
    """An identity provider's JWKS (the public halves of ``keys``, joserfc keys) served over HTTP on 127.0.0.1:
    yields (its URL, the document's bytes); stopped on exit."""
    body = json.dumps({"keys": [k.as_dict(private=False) for k in keys]}).encode()

    class Jwks(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json", body
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
