// tests/security/test_oauthbearer_java.py: a producer logged in with SASL/OAUTHBEARER's unsecured
// tokens, producing across several re-authentications (KIP-368).
import org.apache.kafka.clients.producer.*;
import java.util.*;
public class OAuthReauth {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", a[0]);
    p.put("security.protocol", "SASL_PLAINTEXT");
    p.put("sasl.mechanism", "OAUTHBEARER");
    p.put("sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"alice\";");
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
