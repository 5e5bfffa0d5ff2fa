// tests/broker/test_groups_interop.py: one member of a classic or KIP-848 group that consumes, commits
// and prints what it read.
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.serialization.StringDeserializer;
import java.time.Duration;
import java.util.*;

public class GroupConsumer {
  // args: bootstrap group protocol(classic|consumer) topic want [remoteAssignor]
  public static void main(String[] a) {
    Properties p = new Properties();
    p.put("bootstrap.servers", a[0]);
    p.put("group.id", a[1]);
    p.put("group.protocol", a[2]);
    p.put("key.deserializer", StringDeserializer.class.getName());
    p.put("value.deserializer", StringDeserializer.class.getName());
    p.put("auto.offset.reset", "earliest");
    p.put("enable.auto.commit", "false");
    if (a[2].equals("classic")) {
      p.put("session.timeout.ms", "6000");
      p.put("heartbeat.interval.ms", "500");
    } else if (a.length > 5) {
      p.put("group.remote.assignor", a[5]);
    }
    int want = Integer.parseInt(a[4]);
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
      c.subscribe(List.of(a[3]));
      List<String> got = new ArrayList<>();
      long deadline = System.currentTimeMillis() + 60000;
      while (got.size() < want && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r.value());
      }
      c.commitSync();
      System.out.println("ASSIGNED " + c.assignment().size());
      for (String v : got) System.out.println("VALUE " + v);
    }
  }
}
