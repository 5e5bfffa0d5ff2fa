"""`ssl.client.auth=requested`, as Kafka: a client certificate the truststore trusts names the principal; a client
with an untrusted certificate, or none, still connects, as User:ANONYMOUS; only `required` refuses them. Real
clients: kcat (librdkafka) and confluent-kafka over a listener of each kind, with an authorizer whose super users
are the trusted certificate's subject and the untrusted one's (so an unverified subject taken at its word would
be let in)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka import Consumer, Producer

from tidelake.broker import EmbeddedBroker
from tls_certs import make_pki, make_untrusted_client

KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    assert KCAT, "kcat is not installed (make test installs it as root: apt-get install -y kcat)"
    d = tmp_path_factory.mktemp("tls-requested")
    pki = make_pki(d / "pki")
    untrusted = make_untrusted_client(d / "pki")
    config = {"listeners": "REQUESTED://127.0.0.1:0,REQUIRED://127.0.0.1:0",
              "listener.security.protocol.map": "REQUESTED:SSL,REQUIRED:SSL",
              "ssl.keystore.location": str(pki.server_keystore), "ssl.truststore.location": str(pki.ca),
              "listener.name.requested.ssl.client.auth": "requested",
              "listener.name.required.ssl.client.auth": "required",
              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": f"User:{pki.client_dn};User:{untrusted[2]}"}
    with EmbeddedBroker(d / "data", config=config) as b:
        yield b, pki, untrusted


def kcat_settings(b, pki, listener: str, cert=None, key=None) -> list[str]:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    if cert is not None:
        conf.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    return ["-b", b.bootstrap_for(listener), *[a for k, v in conf.items() for a in ("-X", f"{k}={v}")]]


def kcat(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_a_trusted_certificate_is_its_principal(env):
    b, pki, _ = env
    settings = kcat_settings(b, pki, "REQUESTED", pki.client_cert, pki.client_key)
    produced = kcat(*settings, "-P", "-t", "requested", stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat(*settings, "-C", "-t", "requested", "-e", "-q")
    assert consumed.returncode == 0 and consumed.stdout.split() == ["a", "b"], consumed.stderr
    # larger records both ways through the listener's TLS (many TLS records per request and response)
    conf = {"bootstrap.servers": b.bootstrap_for("REQUESTED"), "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca), "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key)}
    p = Producer(conf)
    values = [bytes([i]) * 200_000 for i in range(20)]
    for v in values:
        p.produce("requested-big", v, partition=0)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "big", "auto.offset.reset": "earliest"})
    c.subscribe(["requested-big"])
    got = []
    for _ in range(200):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
        if len(got) == len(values):
            break
    c.close()
    assert got == values
    # a client on Python's ssl (kafka-python) too
    from kafka import KafkaProducer
    kp = KafkaProducer(bootstrap_servers=b.bootstrap_for("REQUESTED"), security_protocol="SSL",
                       ssl_cafile=str(pki.ca), ssl_certfile=str(pki.client_cert), ssl_keyfile=str(pki.client_key))
    assert kp.send("requested", b"c").get(30).offset == 2
    kp.close()


@pytest.mark.parametrize("who", ["untrusted", "no-certificate"])
def test_an_untrusted_or_absent_certificate_connects_as_anonymous(env, who):
    b, pki, (cert, key, _dn) = env
    settings = kcat_settings(b, pki, "REQUESTED", *((cert, key) if who == "untrusted" else ()))
    listed = kcat(*settings, "-L", "-m", "10")
    assert listed.returncode == 0, listed.stderr  # connected
    refused = kcat(*settings, "-P", "-t", "requested", "-m", "10", stdin="x\n")
    assert refused.returncode != 0 and "Topic authorization failed" in refused.stderr, refused.stderr


def test_required_still_refuses_them(env):
    b, pki, (cert, key, _dn) = env
    for extra in [(cert, key), ()]:
        r = kcat(*kcat_settings(b, pki, "REQUIRED", *extra), "-L", "-m", "5")
        assert r.returncode != 0, r.stdout
    ok = kcat(*kcat_settings(b, pki, "REQUIRED", pki.client_cert, pki.client_key), "-L", "-m", "10")
    assert ok.returncode == 0, ok.stderr
