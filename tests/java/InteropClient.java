import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Runs a script of Kafka client operations with the reference Java client, so that one JVM start
 * (slow on a small machine) does many things. Script on stdin, one command per line, fields
 * separated by TAB; bytes are hex, "-" is null. Output on stdout, one result per line, TAB-separated.
 * A command that throws prints "error\t<command>\t<exception class>\t<message>" and the script goes on;
 * every command's output ends with a line "end".
 *
 * Commands (see tests/clients.py, which writes these scripts and parses the answers):
 *   produce  TOPIC COMPRESSION|default N       then N lines: PARTITION|- KEY VALUE TIMESTAMP|- HEADERS
 *            producer with the client's DEFAULTS (idempotent, acks=all) except compression.type;
 *            prints "ack P OFFSET TIMESTAMP" per record in order, then "producer_config enable.idempotence V acks V"
 *   consume  TIMEOUT_MS TOPIC:PARTITION:COUNT ...   assign, seek to beginning, read COUNT records of each;
 *            prints "rec TOPIC P OFFSET TIMESTAMP_TYPE TIMESTAMP KEY VALUE HEADERS", then "consumed N"
 *   create   TOPIC PARTITIONS [k=v,...]           admin createTopics (replication factor 1)
 *   topics                                        admin listTopics -> "topic NAME" ..., "topics_end"
 *   describe TOPIC                                -> "partition P LEADER" ..., "describe_end"
 *   configs  TOPIC                                -> "config NAME VALUE SOURCE READONLY" ..., "configs_end"
 *   alter    TOPIC k=v,... [DELETE-KEY,...|-]     incrementalAlterConfigs SET / DELETE
 *   partitions TOPIC TOTAL                        createPartitions
 *   delete   TOPIC                                deleteTopics
 *   list_offsets TOPIC PARTITION SPEC             admin listOffsets; SPEC earliest|latest|max|<timestamp>
 *                                                 -> "offset TOPIC P SPEC OFFSET TIMESTAMP"
 *   offsets_for_times TOPIC PARTITION TS          consumer offsetsForTimes -> "oft TOPIC P TS OFFSET|- TIMESTAMP|-"
 */
public class InteropClient {
    static final HexFormat HEX = HexFormat.of();
    static String bootstrap;

    static byte[] unhex(String s) { return s.equals("-") ? null : HEX.parseHex(s); }
    static String hex(byte[] b) { return b == null ? "-" : (b.length == 0 ? "" : HEX.formatHex(b)); }

    static String headers(Iterable<Header> hs) {
        List<String> parts = new ArrayList<>();
        for (Header h : hs) parts.add(HEX.formatHex(h.key().getBytes(StandardCharsets.UTF_8)) + "=" + hex(h.value()));
        return String.join(",", parts);
    }

    static List<Header> parseHeaders(String s) {
        List<Header> out = new ArrayList<>();
        if (s.isEmpty()) return out;
        for (String kv : s.split(",", -1)) {
            int eq = kv.indexOf('=');
            String name = new String(HEX.parseHex(kv.substring(0, eq)), StandardCharsets.UTF_8);
            out.add(new RecordHeader(name, unhex(kv.substring(eq + 1))));
        }
        return out;
    }

    static Map<String, String> parseConfigs(String s) {
        Map<String, String> m = new HashMap<>();
        if (s == null || s.isEmpty() || s.equals("-")) return m;
        for (String kv : s.split(",")) {
            int eq = kv.indexOf('=');
            m.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return m;
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        return Admin.create(p);
    }

    static void out(Object... fields) {
        List<String> s = new ArrayList<>();
        for (Object f : fields) s.add(String.valueOf(f));
        System.out.println(String.join("\t", s));
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        try (Admin admin = admin()) {
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) continue;
                String[] f = line.split("\t", -1);
                try {
                    run(admin, f, in);
                } catch (Exception e) {
                    Throwable c = e.getCause() != null ? e.getCause() : e;
                    out("error", f[0], c.getClass().getName(), String.valueOf(c.getMessage()).replace('\n', ' '));
                }
                out("end");  // lets the caller split the output per command
                System.out.flush();
            }
        }
        out("done");
        System.out.flush();
    }

    static void run(Admin admin, String[] f, BufferedReader in) throws Exception {
        switch (f[0]) {
            case "produce": produce(f[1], f[2], Integer.parseInt(f[3]), in); break;
            case "consume": consume(Long.parseLong(f[1]), Arrays.copyOfRange(f, 2, f.length)); break;
            case "create": {
                NewTopic t = new NewTopic(f[1], Integer.parseInt(f[2]), (short) 1);
                t.configs(parseConfigs(f.length > 3 ? f[3] : ""));
                admin.createTopics(List.of(t)).all().get(30, TimeUnit.SECONDS);
                out("created", f[1]);
                break;
            }
            case "topics": {
                for (String n : admin.listTopics().names().get(30, TimeUnit.SECONDS)) out("topic", n);
                out("topics_end");
                break;
            }
            case "describe": {
                TopicDescription d = admin.describeTopics(List.of(f[1])).allTopicNames().get(30, TimeUnit.SECONDS).get(f[1]);
                for (TopicPartitionInfo p : d.partitions()) out("partition", p.partition(), p.leader() == null ? -1 : p.leader().id());
                out("describe_end");
                break;
            }
            case "configs": {
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, f[1]);
                Config c = admin.describeConfigs(List.of(r)).all().get(30, TimeUnit.SECONDS).get(r);
                for (ConfigEntry e : c.entries()) out("config", e.name(), e.value() == null ? "-" : e.value(), e.source(), e.isReadOnly());
                out("configs_end");
                break;
            }
            case "alter": {
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, f[1]);
                List<AlterConfigOp> ops = new ArrayList<>();
                for (Map.Entry<String, String> e : parseConfigs(f[2]).entrySet())
                    ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
                if (f.length > 3 && !f[3].equals("-"))
                    for (String k : f[3].split(",")) ops.add(new AlterConfigOp(new ConfigEntry(k, null), AlterConfigOp.OpType.DELETE));
                admin.incrementalAlterConfigs(Map.of(r, ops)).all().get(30, TimeUnit.SECONDS);
                out("altered", f[1]);
                break;
            }
            case "partitions": {
                admin.createPartitions(Map.of(f[1], NewPartitions.increaseTo(Integer.parseInt(f[2])))).all().get(30, TimeUnit.SECONDS);
                out("partitioned", f[1], f[2]);
                break;
            }
            case "delete": {
                admin.deleteTopics(List.of(f[1])).all().get(30, TimeUnit.SECONDS);
                out("deleted", f[1]);
                break;
            }
            case "list_offsets": {
                TopicPartition tp = new TopicPartition(f[1], Integer.parseInt(f[2]));
                OffsetSpec spec;
                switch (f[3]) {
                    case "earliest": spec = OffsetSpec.earliest(); break;
                    case "latest": spec = OffsetSpec.latest(); break;
                    case "max": spec = OffsetSpec.maxTimestamp(); break;
                    default: spec = OffsetSpec.forTimestamp(Long.parseLong(f[3]));
                }
                ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get(30, TimeUnit.SECONDS);
                out("offset", f[1], f[2], f[3], info.offset(), info.timestamp());
                break;
            }
            case "offsets_for_times": {
                TopicPartition tp = new TopicPartition(f[1], Integer.parseInt(f[2]));
                try (KafkaConsumer<byte[], byte[]> c = consumer()) {
                    Map<TopicPartition, OffsetAndTimestamp> r = c.offsetsForTimes(Map.of(tp, Long.parseLong(f[3])), Duration.ofSeconds(30));
                    OffsetAndTimestamp o = r.get(tp);
                    out("oft", f[1], f[2], f[3], o == null ? "-" : o.offset(), o == null ? "-" : o.timestamp());
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + f[0]);
        }
    }

    static void produce(String topic, String compression, int n, BufferedReader in) throws Exception {
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String[] r = in.readLine().split("\t", -1);
            Integer partition = r[0].equals("-") ? null : Integer.valueOf(r[0]);
            Long ts = r[3].equals("-") ? null : Long.valueOf(r[3]);
            records.add(new ProducerRecord<>(topic, partition, ts, unhex(r[1]), unhex(r[2]), parseHeaders(r[4])));
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (!compression.equals("default")) p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        ProducerConfig effective = new ProducerConfig(p);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : records) acks.add(producer.send(r));
            producer.flush();
            for (Future<RecordMetadata> a : acks) {
                RecordMetadata m = a.get(60, TimeUnit.SECONDS);
                out("ack", m.partition(), m.offset(), m.timestamp());
            }
        }
        out("producer_config", "enable.idempotence", effective.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG),
            "acks", effective.getString(ProducerConfig.ACKS_CONFIG));
    }

    static KafkaConsumer<byte[], byte[]> consumer() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return new KafkaConsumer<>(p);
    }

    static void consume(long timeoutMs, String[] specs) {
        Map<TopicPartition, Integer> wanted = new HashMap<>();
        for (String s : specs) {
            int a = s.lastIndexOf(':'), b = s.lastIndexOf(':', a - 1);
            wanted.put(new TopicPartition(s.substring(0, b), Integer.parseInt(s.substring(b + 1, a))), Integer.parseInt(s.substring(a + 1)));
        }
        Map<TopicPartition, Integer> got = new HashMap<>();
        int total = 0, need = wanted.values().stream().mapToInt(Integer::intValue).sum();
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            Collection<TopicPartition> tps = wanted.keySet();
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (total < need && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    out("rec", r.topic(), r.partition(), r.offset(), r.timestampType().name, r.timestamp(),
                        hex(r.key()), hex(r.value()), headers(r.headers()));
                    total++;
                }
            }
        }
        out("consumed", total);
    }
}
