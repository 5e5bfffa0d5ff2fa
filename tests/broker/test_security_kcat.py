"""kcat (librdkafka's command-line client, Debian's package) produces and consumes with a group over
SASL_SSL with SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN and mutual TLS."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from security_fixtures import add_scram_user, secured_broker
from tls_certs import make_pki

KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    assert KCAT, "kcat is not installed (make test installs it as root: apt-get install -y kcat)"
    d = tmp_path_factory.mktemp("kcat")
    pki = make_pki(d / "pki")
    with secured_broker(d / "data", pki) as b:
        add_scram_user(b, "kc", "kc-secret")
        yield b, pki


def _settings(b, pki, kind: str) -> list[str]:
    if kind == "scram":
        conf = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "kc",
                "sasl.password": "kc-secret", "ssl.ca.location": str(pki.ca)}
        listener = "SASL_SSL"
    elif kind == "plain":
        conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
                "sasl.password": "alice-secret"}
        listener = "SASL_PLAINTEXT"
    else:
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
                "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
        listener = "MTLS"
    return ["-b", b.bootstrap_for(listener), *[a for k, v in conf.items() for a in ("-X", f"{k}={v}")]]


@pytest.mark.parametrize("kind", ["scram", "plain", "mtls"])
def test_kcat_produce_and_group_consume(env, kind):
    b, pki = env
    topic = f"kcat-{kind}"
    lines = [f"{kind}-{i}" for i in range(5)]
    subprocess.run([KCAT, *_settings(b, pki, kind), "-P", "-t", topic], input="\n".join(lines) + "\n",
                   text=True, check=True, timeout=60)
    out = subprocess.run([KCAT, *_settings(b, pki, kind), "-G", f"g-{topic}", "-X", "auto.offset.reset=earliest",
                          "-c", "5", "-e", "-q", topic], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(lines)


def test_kcat_wrong_password_is_refused(env):
    b, pki = env
    args = _settings(b, pki, "scram")
    args[args.index("sasl.password=kc-secret")] = "sasl.password=wrong"
    out = subprocess.run([KCAT, *args, "-L", "-m", "5"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "Authentication failed" in out.stderr or "SASL authentication error" in out.stderr, out.stderr
