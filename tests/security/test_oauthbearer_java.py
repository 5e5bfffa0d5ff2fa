"""The reference Java client (kafka-clients 3.9.1) with SASL/OAUTHBEARER's unsecured tokens
(``unsecuredLoginStringClaim_sub``) on a broker with a short ``connections.max.reauth.ms``: it logs in, keeps
producing across several session lifetimes and re-authenticates on its connection (KIP-368) instead of being
closed."""
from __future__ import annotations

import logging
import os
import subprocess
import textwrap

import pytest

from conftest import java_classpath
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java

LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
JAVA = textwrap.dedent("""
    import org.apache.kafka.clients.producer.*;
    import java.util.*;
    public class OAuthReauth {
      public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "OAUTHBEARER");
        p.put("sasl.jaas.config", "%s unsecuredLoginStringClaim_sub=\\"alice\\";");
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("delivery.timeout.ms", "15000"); p.put("request.timeout.ms", "10000"); p.put("max.block.ms", "15000");
        int sent = 0;
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
          long end = System.currentTimeMillis() + Long.parseLong(a[1]);
          while (System.currentTimeMillis() < end) {
            pr.send(new ProducerRecord<>("oauth-java", "k", "v" + sent)).get();
            sent++;
            Thread.sleep(50);
          }
        }
        System.out.println("SENT " + sent);
      }
    }
""" % LOGIN)


def test_java_client_logs_in_with_oauthbearer_and_reauthenticates(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.sasl")
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.transport")  # (the handler takes the last level)
    src = tmp_path / "OAuthReauth.java"
    src.write_text(JAVA)
    lib = java_classpath().split(os.pathsep)[0].rsplit("/", 1)[0]  # the jar folder beside kafka-clients
    # the unsecured login handler writes its token with Jackson (a kafka-clients dependency the tests' set omits)
    cp = os.pathsep.join([java_classpath()] + [f"{lib}/jackson-{j}.jar" for j in ("databind", "core", "annotations")])
    subprocess.run(["javac", "-cp", cp, "-d", str(tmp_path), str(src)], check=True, timeout=180)
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
              "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
              "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER",
              "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{LOGIN};",
              "connections.max.reauth.ms": "2000"}
    with EmbeddedBroker(tmp_path / "data", config=config) as b:
        r = subprocess.run(["java", "-cp", f"{cp}:{tmp_path}", "OAuthReauth", b.bootstrap_servers, "6000"],
                           capture_output=True, text=True, timeout=120)
        log = b.broker.logs.get("oauth-java", 0)
        end_offset = log.log_end_offset if log is not None else None
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    sent = int(r.stdout.split("SENT ")[1])
    assert sent > 0 and end_offset == sent
    messages = [m.getMessage() for m in caplog.records]
    assert any("re-authenticated as User:alice with OAUTHBEARER" in m for m in messages)
    assert not any("expired without re-authentication" in m for m in messages)
