"""The reference Java client (kafka-clients 4.4.0, tests/java/OAuthReauth.java) with SASL/OAUTHBEARER's unsecured tokens
(``unsecuredLoginStringClaim_sub``) on a broker with a short ``connections.max.reauth.ms``: it logs in, keeps
producing across several session lifetimes and re-authenticates on its connection (KIP-368) instead of being
closed."""
from __future__ import annotations

import logging
import subprocess

import pytest

from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java

LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


def test_java_client_logs_in_with_oauthbearer_and_reauthenticates(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.sasl")
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.transport")  # (the handler takes the last level)
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
              "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
              "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER",
              "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{LOGIN};",
              "connections.max.reauth.ms": "2000"}
    with EmbeddedBroker(tmp_path / "data", config=config) as b:
        r = subprocess.run(java_command("OAuthReauth", b.bootstrap_servers, "6000"),
                           capture_output=True, text=True, timeout=120)
        log = b.broker.logs.get("oauth-java", 0)
        end_offset = log.log_end_offset if log is not None else None
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    sent = int(r.stdout.split("SENT ")[1])
    assert sent > 0 and end_offset == sent
    messages = [m.getMessage() for m in caplog.records]
    assert any("re-authenticated as User:alice with OAUTHBEARER" in m for m in messages)
    assert not any("expired without re-authentication" in m for m in messages)
