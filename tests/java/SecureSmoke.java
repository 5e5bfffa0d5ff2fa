// tests/broker/test_security_java.py: SCRAM credentials and ACLs through Admin, then a producer and a
// consumer per security properties file (SASL_SSL, SASL_PLAINTEXT, mTLS, one-way TLS).
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
      StringBuilder chain = new StringBuilder();  // the whole cause chain, for a failing test's message
      for (Throwable t = e; t != null; t = t.getCause()) chain.append(t.getClass().getSimpleName()).append("<").append(t.getMessage()).append(">|");
      System.err.println("CHAIN " + chain);
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
