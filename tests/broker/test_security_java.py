"""The reference Java client (kafka-clients 3.9.1) over SASL_SSL and SASL_PLAINTEXT with both SCRAM
mechanisms and PLAIN, one-way TLS, and mutual TLS with PEM key stores: the AdminClient manages SCRAM credentials
(alter/describeUserScramCredentials) and ACLs (create/describe/deleteAcls); the idempotent producer
(the default) and a group consumer work with exactly the ACLs Kafka requires, and fail once they go."""
from __future__ import annotations

import subprocess
import textwrap

import pytest

from conftest import java_classpath
from security_fixtures import PLAIN_JAAS, secured_broker
from tls_certs import make_pki

pytestmark = pytest.mark.java

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}

JAVA = textwrap.dedent("""
    import org.apache.kafka.clients.producer.*;
    import org.apache.kafka.clients.consumer.*;
    import org.apache.kafka.clients.admin.*;
    import org.apache.kafka.common.acl.*;
    import org.apache.kafka.common.resource.*;
    import java.io.FileReader;
    import java.util.*;
    import java.time.Duration;
    public class SecureSmoke {
      static Properties load(String path) throws Exception {
        Properties p = new Properties(); try (FileReader r = new FileReader(path)) { p.load(r); } return p;
      }
      static String produce(Properties base, String topic) {
        Properties p = new Properties(); p.putAll(base);
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("delivery.timeout.ms", "15000"); p.put("request.timeout.ms", "10000"); p.put("max.block.ms", "15000");
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {  // idempotent by default
          for (int i = 0; i < 10; i++) pr.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
          return "ok";
        } catch (Exception e) {
          Throwable t = e; while (t.getCause() != null && !(t instanceof org.apache.kafka.common.KafkaException)) t = t.getCause();
          return t.getClass().getSimpleName();
        }
      }
      static String consume(Properties base, String topic, String group) {
        Properties c = new Properties(); c.putAll(base);
        c.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        c.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        c.put("group.id", group); c.put("auto.offset.reset", "earliest");
        int n = 0;
        try (KafkaConsumer<String, String> co = new KafkaConsumer<>(c)) {
          co.subscribe(List.of(topic));
          long end = System.currentTimeMillis() + 30000;
          while (n < 20 && System.currentTimeMillis() < end && (n < 10 || group.endsWith("4"))) n += co.poll(Duration.ofMillis(200)).count();
          co.commitSync();
        } catch (org.apache.kafka.common.KafkaException e) {
          return e.getClass().getSimpleName();
        }
        return String.valueOf(n);
      }
      public static void main(String[] a) throws Exception {
        Properties admin = load(a[0]);
        String[] users = {"jane", "joe"};
        try (Admin ad = Admin.create(admin)) {
          List<UserScramCredentialAlteration> alts = new ArrayList<>();
          for (String u : users) {
            alts.add(new UserScramCredentialUpsertion(u, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), u + "-secret"));
            alts.add(new UserScramCredentialUpsertion(u, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), u + "-secret"));
          }
          ad.alterUserScramCredentials(alts).all().get();
          UserScramCredentialsDescription d = ad.describeUserScramCredentials(List.of("jane")).description("jane").get();
          List<String> infos = new ArrayList<>();
          for (ScramCredentialInfo i : d.credentialInfos()) infos.add(i.mechanism() + ":" + i.iterations());
          Collections.sort(infos);
          System.out.println("SCRAM " + String.join(",", infos));
          ad.alterUserScramCredentials(List.of(new UserScramCredentialDeletion("joe", ScramMechanism.SCRAM_SHA_512))).all().get();
          System.out.println("JOE " + ad.describeUserScramCredentials(List.of("joe")).description("joe").get().credentialInfos().size());
          ad.createTopics(List.of(new NewTopic("jt", 1, (short) 1))).all().get();
          List<AclBinding> acls = new ArrayList<>();
          for (String principal : new String[]{"User:jane", "User:" + a[1], "User:ANONYMOUS"}) {
            acls.add(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "jt", PatternType.LITERAL),
                new AccessControlEntry(principal, "*", AclOperation.WRITE, AclPermissionType.ALLOW)));
            acls.add(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "j", PatternType.PREFIXED),
                new AccessControlEntry(principal, "*", AclOperation.READ, AclPermissionType.ALLOW)));
            acls.add(new AclBinding(new ResourcePattern(ResourceType.GROUP, "jg", PatternType.PREFIXED),
                new AccessControlEntry(principal, "*", AclOperation.READ, AclPermissionType.ALLOW)));
          }
          ad.createAcls(acls).all().get();
          System.out.println("ACLS " + ad.describeAcls(AclBindingFilter.ANY).values().get().size());
        }
        for (int i = 2; i < a.length; i++) {
          Properties p = load(a[i]);
          System.out.println("CLIENT" + (i - 2) + " " + produce(p, "jt") + " " + consume(p, "jt", "jg" + i));
        }
        try (Admin ad = Admin.create(admin)) {
          AclBindingFilter writes = new AclBindingFilter(new ResourcePatternFilter(ResourceType.TOPIC, "jt", PatternType.LITERAL),
              new AccessControlEntryFilter(null, null, AclOperation.WRITE, AclPermissionType.ANY));
          System.out.println("DELETED " + ad.deleteAcls(List.of(writes)).all().get().size());
        }
        System.out.println("AFTER " + produce(load(a[2]), "jt"));
      }
    }
""")


def _props(path, **values) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return str(path)


def test_java_clients_scram_plain_mtls_and_admin_acls(tmp_path):
    pki = make_pki(tmp_path / "pki")
    src = tmp_path / "SecureSmoke.java"
    src.write_text(JAVA)
    cp = java_classpath()
    subprocess.run(["javac", "-cp", cp, "-d", str(tmp_path), str(src)], check=True, timeout=180)
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
        r = subprocess.run(["java", "-cp", f"{cp}:{tmp_path}", "SecureSmoke", admin, pki.client_dn, *clients],
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
    assert lines["AFTER"] in ("TopicAuthorizationException", "ClusterAuthorizationException"), lines
