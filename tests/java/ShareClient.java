// tests/broker/test_java_share_consumer.py: Kafka 4.4's KafkaShareConsumer (KIP-932) in a share group, explicit or
// implicit acknowledgement, or a member that dies holding its records.
import java.time.Duration;
import java.util.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * args: BOOTSTRAP GROUP TOPIC PRODUCE WANT MODE (explicit|implicit|crash)
 * Sets the group's share.auto.offset.reset to earliest (crash: and share.record.lock.duration.ms to 2 s), writes PRODUCE
 * records "v<i>" to TOPIC (partition 0), then reads in GROUP until WANT records are settled.
 *   explicit: each record's first delivery is RELEASEd when i % 3 == 0 (so it comes back with delivery count 2)
 *             and REJECTed when i % 5 == 1; everything else is ACCEPTed; commitSync after each poll.
 *   implicit: every delivered record is accepted by the next poll (and by close).
 *   crash:    the first poll that delivers records prints them, then the JVM halts: no acknowledgement, no
 *             leaving the group (the records come back to another member once their locks expire).
 * prints "got VALUE DELIVERY_COUNT ACK" per delivery, then "done".
 */
public class ShareClient {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], group = a[1], topic = a[2], mode = a[5];
        int produce = Integer.parseInt(a[3]), n = Integer.parseInt(a[4]);
        Properties base = new Properties();
        base.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(base)) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            List<AlterConfigOp> ops = new ArrayList<>(List.of(
                    new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)));
            if (mode.equals("crash"))   // the held records come back after 2 s, not Kafka's default 30 s
                ops.add(new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", "2000"), AlterConfigOp.OpType.SET));
            admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
        }
        Properties pp = new Properties(); pp.putAll(base);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < produce; i++) p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
            p.flush();
        }
        Properties cp = new Properties(); cp.putAll(base);
        cp.put("group.id", group);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, mode.equals("explicit") ? "explicit" : "implicit");
        Set<String> settled = new HashSet<>();
        long deadline = System.currentTimeMillis() + 60000;   // a last guard; the loop ends on the count
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            while (settled.size() < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : recs) {
                    int i = mode.equals("explicit") ? Integer.parseInt(r.value().substring(1)) : -1;
                    short count = r.deliveryCount().orElse((short) -1);
                    AcknowledgeType ack = AcknowledgeType.ACCEPT;
                    if (mode.equals("explicit")) {
                        if (count == 1 && i % 3 == 0) ack = AcknowledgeType.RELEASE;
                        else if (count == 1 && i % 5 == 1) ack = AcknowledgeType.REJECT;
                        c.acknowledge(r, ack);
                    }
                    if (ack != AcknowledgeType.RELEASE) settled.add(r.value());
                    System.out.println("got " + r.value() + " " + count + " " + ack.name());
                }
                if (mode.equals("crash") && !recs.isEmpty()) {
                    System.out.println("done");
                    System.out.flush();
                    Runtime.getRuntime().halt(0);
                }
                if (mode.equals("explicit") && !recs.isEmpty()) {
                    for (Map.Entry<?, Optional<org.apache.kafka.common.KafkaException>> e : c.commitSync().entrySet())
                        if (e.getValue().isPresent()) throw e.getValue().get();
                }
            }
        }
        System.out.println("done");
    }
}
