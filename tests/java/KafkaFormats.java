// tests/kafka44/test_kafka_formats.py: Kafka 4.4's own readers of the internal topics and the log files, several
// runs in one JVM (a JVM start costs seconds on the suite's two cores).
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.MessageFormatter;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * args: BOOTSTRAP (or "-" when only dump commands follow). Commands on stdin, one per line, TAB-separated; the output
 * of each ends with a line "end"; a command that throws prints "error\tEXCEPTION-CLASS\tMESSAGE" first.
 *   dump ARG...                      kafka-dump-log: org.apache.kafka.tools.DumpLogSegments.main(ARG...)
 *   format FORMATTER_CLASS TOPIC     kafka-console-consumer --formatter FORMATTER_CLASS --from-beginning: every
 *                                    record of every partition of TOPIC up to its end offset, as the formatter
 *                                    writes it (e.g. org.apache.kafka.tools.consumer.OffsetsMessageFormatter)
 */
public class KafkaFormats {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] f = line.split("\t");
            try {
                switch (f[0]) {
                    case "dump": org.apache.kafka.tools.DumpLogSegments.main(Arrays.copyOfRange(f, 1, f.length)); break;
                    case "format": format(bootstrap, f[1], f[2]); break;
                    default: throw new IllegalArgumentException("unknown command " + f[0]);
                }
            } catch (Exception e) {
                System.out.println("error\t" + e.getClass().getName() + "\t"
                        + String.valueOf(e.getMessage()).replace('\n', ' ').replace('\t', ' '));
            }
            System.out.flush();
            System.out.println("end");
            System.out.flush();
        }
        System.exit(0);
    }

    static void format(String bootstrap, String formatterClass, String topic) throws Exception {
        MessageFormatter formatter = (MessageFormatter) Class.forName(formatterClass).getDeclaredConstructor().newInstance();
        formatter.configure(Map.of());
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("exclude.internal.topics", "false");
        PrintStream out = System.out;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30)))
                parts.add(new TopicPartition(topic, pi.partition()));
            c.assign(parts);
            c.seekToBeginning(parts);
            Map<TopicPartition, Long> end = c.endOffsets(parts, Duration.ofSeconds(30));
            Set<TopicPartition> pending = new HashSet<>();
            for (TopicPartition tp : parts) if (end.get(tp) > c.position(tp)) pending.add(tp);
            long deadline = System.currentTimeMillis() + 60000;   // a last guard; the loop ends on the end offsets
            while (!pending.isEmpty() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    // a line per record of a type the formatter shows (Kafka's coordinator formatters end none)
                    ByteArrayOutputStream one = new ByteArrayOutputStream();
                    formatter.writeTo(r, new PrintStream(one, true, StandardCharsets.UTF_8));
                    if (one.size() > 0) out.println(one.toString(StandardCharsets.UTF_8).stripTrailing());
                }
                pending.removeIf(tp -> c.position(tp) >= end.get(tp));
            }
            if (!pending.isEmpty()) throw new IllegalStateException("not read to the end: " + pending);
        }
        formatter.close();
    }
}
