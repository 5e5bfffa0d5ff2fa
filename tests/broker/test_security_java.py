"""The reference Java client (kafka-clients 4.4.0, tests/java/SecureSmoke.java) over SASL_SSL and SASL_PLAINTEXT with both SCRAM
mechanisms and PLAIN, one-way TLS, and mutual TLS with PEM key stores: the AdminClient manages SCRAM credentials
(alter/describeUserScramCredentials) and ACLs (create/describe/deleteAcls); the idempotent producer
(the default) and a group consumer work with exactly the ACLs Kafka requires, and fail once they go."""
from __future__ import annotations

import subprocess

import pytest

from kafka_peer import java_command
from security_fixtures import PLAIN_JAAS, secured_broker
from tls_certs import make_pki

pytestmark = pytest.mark.java

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}



def _props(path, **values) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return str(path)


def test_java_clients_scram_plain_mtls_and_admin_acls(tmp_path):
    pki = make_pki(tmp_path / "pki")
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required"
    with secured_broker(tmp_path / "data", pki, **AUTHORIZER) as b:
        admin = _props(tmp_path / "admin.properties", **{
            "bootstrap.servers": b.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS.split(" user_")[0] + ";"})
        clients = [
            _props(tmp_path / "jane512.properties", **{
                "bootstrap.servers": b.bootstrap_for("SASL_SSL"), "security.protocol": "SASL_SSL", **trust,
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": f'{scram} username="jane" password="jane-secret";'}),
            _props(tmp_path / "joe256.properties", **{
                "bootstrap.servers": b.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f'{scram} username="joe" password="joe-secret";'}),
            _props(tmp_path / "mtls.properties", **{
                "bootstrap.servers": b.bootstrap_for("MTLS"), "security.protocol": "SSL", **trust,
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": pki.client_cert.read_text().replace("\n", "\\n"),
                "ssl.keystore.key": pki.client_key.read_text().replace("\n", "\\n")}),
            # one-way TLS: the broker is verified, the client is User:ANONYMOUS
            _props(tmp_path / "ssl.properties", **{
                "bootstrap.servers": b.bootstrap_for("SSL"), "security.protocol": "SSL", **trust}),
        ]
        r = subprocess.run(java_command("SecureSmoke", admin, pki.client_dn, *clients),
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert lines["SCRAM"] == "SCRAM_SHA_256:4096,SCRAM_SHA_512:8192"
    assert lines["JOE"] == "1"
    assert lines["ACLS"] == "9"
    # joe (User:joe) has no ACLs: his producer is refused before any record is written
    assert lines["CLIENT0"] == "ok 10"
    assert lines["CLIENT1"] in ("TopicAuthorizationException TopicAuthorizationException",
                                "ClusterAuthorizationException TopicAuthorizationException"), lines
    assert lines["CLIENT2"] == "ok 20"  # the mTLS principal reads jane's 10 and its own 10
    produced, consumed = lines["CLIENT3"].split()
    assert produced == "ok" and int(consumed) >= 10, lines   # one-way SSL: writes 10, reads at least those
    assert lines["DELETED"] == "3"
    assert lines["AFTER"] in ("TopicAuthorizationException", "ClusterAuthorizationException"), (lines, r.stderr[-3000:])
