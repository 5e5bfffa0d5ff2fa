// tests/cluster/test_java_admin.py: Admin on a three-broker cluster (describe, create RF=3, reassign,
// elect) and an idempotent acks=all producer that rides through leader changes.
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.atomic.*;
import java.util.stream.*;

public class ClusterClient {
  static String ids(List<Node> nodes) {
    return nodes.stream().map(n -> String.valueOf(n.id())).collect(Collectors.joining(","));
  }
  static void describe(Admin ad, String topic) throws Exception {
    TopicDescription d = ad.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    for (TopicPartitionInfo p : d.partitions())
      System.out.println("DESCRIBE " + topic + "-" + p.partition() + " leader=" + p.leader().id()
          + " replicas=" + ids(p.replicas()) + " isr=" + ids(p.isr()));
  }
  static TopicPartitionInfo partition0(Admin ad, String topic) throws Exception {
    return ad.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().get(0);
  }
  static void waitFor(Admin ad, String topic, List<Integer> replicas) throws Exception {
    long end = System.currentTimeMillis() + 60000;
    while (System.currentTimeMillis() < end) {
      TopicPartitionInfo p = partition0(ad, topic);
      List<Integer> r = p.replicas().stream().map(Node::id).collect(Collectors.toList());
      List<Integer> isr = p.isr().stream().map(Node::id).sorted().collect(Collectors.toList());
      if (r.equals(replicas) && isr.equals(replicas.stream().sorted().collect(Collectors.toList()))
          && ad.listPartitionReassignments().reassignments().get().isEmpty()) return;
      Thread.sleep(100);
    }
    throw new IllegalStateException(topic + " did not reach replicas " + replicas);
  }

  static void admin(String bootstrap) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    try (Admin ad = Admin.create(p)) {
      ad.createTopics(List.of(new NewTopic("jadmin", 3, (short) 3))).all().get();
      Thread.sleep(500);
      describe(ad, "jadmin");
      ad.createTopics(List.of(new NewTopic("jmove", Map.of(0, List.of(1, 2))))).all().get();
      TopicPartition tp = new TopicPartition("jmove", 0);
      Optional<Throwable> e = ad.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get().get(tp);
      System.out.println("ELECT_FIRST " + e.map(x -> x.getClass().getSimpleName()).orElse("NONE"));
      ad.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(2, 3)))))
          .all().get();
      waitFor(ad, "jmove", List.of(2, 3));
      describe(ad, "jmove");
      // the same replicas in another order: a new preferred replica (3), still led by 2
      ad.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(3, 2)))))
          .all().get();
      waitFor(ad, "jmove", List.of(3, 2));
      System.out.println("LEADER_BEFORE " + partition0(ad, "jmove").leader().id());
      e = ad.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get().get(tp);
      System.out.println("ELECT_PREFERRED " + e.map(x -> x.getClass().getSimpleName()).orElse("NONE"));
      long end = System.currentTimeMillis() + 30000;
      while (partition0(ad, "jmove").leader().id() != 3 && System.currentTimeMillis() < end) Thread.sleep(100);
      System.out.println("LEADER_AFTER " + partition0(ad, "jmove").leader().id());
      try {
        ad.alterPartitionReassignments(Map.of(tp, Optional.empty())).all().get();
        System.out.println("CANCEL NONE");
      } catch (java.util.concurrent.ExecutionException x) {
        System.out.println("CANCEL " + x.getCause().getClass().getSimpleName());
      }
      try {
        ad.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(3, 42)))))
            .all().get();
        System.out.println("BAD_TARGET NONE");
      } catch (java.util.concurrent.ExecutionException x) {
        System.out.println("BAD_TARGET " + x.getCause().getClass().getSimpleName());
      }
    }
  }

  // an idempotent acks=all producer (3.x defaults) writing to partition 0 until STOPFILE exists
  static void produce(String bootstrap, String topic, String stopFile) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
    p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
    p.put("linger.ms", "2");
    AtomicInteger failed = new AtomicInteger();
    List<String> firstErrors = Collections.synchronizedList(new ArrayList<>());
    int sent = 0;
    try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
      while (!Files.exists(Paths.get(stopFile)) || sent < 1000) {
        pr.send(new ProducerRecord<>(topic, 0, null, String.format("j-%07d", sent)), (md, ex) -> {
          if (ex != null) { failed.incrementAndGet(); if (firstErrors.size() < 3) firstErrors.add(ex.toString()); }
        });
        sent++;
        if (sent % 200 == 0) pr.flush();
      }
      pr.flush();
    }
    for (String x : firstErrors) System.out.println("ERROR " + x);
    System.out.println("SENT " + sent);
    System.out.println("FAILED " + failed.get());
  }

  public static void main(String[] a) throws Exception {
    if (a[0].equals("admin")) admin(a[1]); else produce(a[1], a[2], a[3]);
  }
}
