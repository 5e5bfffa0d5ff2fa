// tests/broker/test_java.py: Admin create/describe, the producer's defaults (idempotent, acks=all), a
// read_committed consumer with many small fetches (incremental fetch sessions), offsetsForTimes.
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;
import java.util.*;
import java.time.Duration;
public class BrokerSmoke {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", a[0]);
    p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
    p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
    try (Admin ad = Admin.create(p)) {
      ad.createTopics(List.of(new NewTopic("jt", 3, (short) 1))).all().get();
      TopicDescription d = ad.describeTopics(List.of("jt")).allTopicNames().get().get("jt");
      System.out.println("PARTITIONS " + d.partitions().size() + " LEADER " + d.partitions().get(0).leader().id());
    }
    long t0 = System.currentTimeMillis();
    try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {  // defaults: idempotent, acks=all
      for (int i = 0; i < 1000; i++) pr.send(new ProducerRecord<>("jt", 0, t0 + i, "k" + i, "v" + i));
      pr.flush();
      System.out.println("LAST " + pr.send(new ProducerRecord<>("jt", 0, t0 + 1000, "k", "last")).get().offset());
    }
    Properties c = new Properties();
    c.put("bootstrap.servers", a[0]);
    c.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    c.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    c.put("isolation.level", "read_committed");
    c.put("max.partition.fetch.bytes", "4096");  // many fetches: exercises incremental fetch sessions
    try (KafkaConsumer<String, String> co = new KafkaConsumer<>(c)) {
      TopicPartition tp = new TopicPartition("jt", 0);
      co.assign(List.of(tp));
      co.seekToBeginning(List.of(tp));
      int n = 0; long end = System.currentTimeMillis() + 30000; long expect = 0; boolean ordered = true;
      while (n < 1001 && System.currentTimeMillis() < end) {
        for (ConsumerRecord<String, String> r : co.poll(Duration.ofMillis(200))) {
          ordered &= r.offset() == expect++; n++;
        }
      }
      System.out.println("CONSUMED " + n + " ORDERED " + ordered);
      System.out.println("TIMES " + co.offsetsForTimes(Map.of(tp, t0 + 500)).get(tp).offset());
    }
  }
}
