import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transaction scenarios with the reference Java client, several per JVM (JVM start is slow here).
 * Script on stdin, one command per line, TAB-separated; each command's output ends with "end";
 * a command that throws prints "error\tCOMMAND\tEXCEPTION-CLASS\tMESSAGE" (then "end").
 *
 *   produce_txn TXN_ID TOPIC SPEC   SPEC = comma list of c:N (commit N records) / a:N (abort N);
 *                                   record values "TXN_ID/t<txn>/<i>", partition i % partitions.
 *                                   prints "txn INDEX commit|abort N TV2 PRODUCER_ID EPOCH" per transaction,
 *                                   the producer's state after it ended (TV2 true|false: transactions v2)
 *   read TOPIC ISOLATION TIMEOUT_MS read_committed|read_uncommitted: read every partition from the
 *                                   beginning to its end offset (the LSO for read_committed);
 *                                   prints "rec P OFFSET VALUE" per record, "count N"
 *   ctp IN OUT GROUP TXN_ID N ABORT_BATCH MODE
 *                                   consume-transform-produce: read IN (read_committed), write
 *                                   upper-case values to OUT and sendOffsetsToTransaction per poll
 *                                   batch, until N input records are committed. The ABORT_BATCH-th
 *                                   batch (1-based; 0 = none) is aborted and re-processed after
 *                                   seeking back to the committed offsets. MODE assign|subscribe.
 *                                   prints "ctp processed N batches B aborted A"
 *   fence TXN_ID TOPIC              a producer with an open transaction is replaced by a second one
 *                                   with the same id; prints "fenced CLASS" when the first one's
 *                                   commit fails, then the second commits its own record.
 *   committed GROUP TOPIC PARTITIONS   prints "committed P OFFSET|-1" per partition
 */
public class TxnClient {
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] f = line.split("\t");
            try {
                switch (f[0]) {
                    case "produce_txn": produceTxn(f[1], f[2], f[3]); break;
                    case "read": read(f[1], f[2], Long.parseLong(f[3])); break;
                    case "ctp": ctp(f[1], f[2], f[3], f[4], Integer.parseInt(f[5]), Integer.parseInt(f[6]), f[7]); break;
                    case "fence": fence(f[1], f[2]); break;
                    case "committed": committed(f[1], f[2], Integer.parseInt(f[3])); break;
                    default: throw new IllegalArgumentException("unknown command " + f[0]);
                }
            } catch (Exception e) {
                System.out.println("error\t" + f[0] + "\t" + e.getClass().getName() + "\t"
                        + String.valueOf(e.getMessage()).replace('\n', ' ').replace('\t', ' '));
            }
            System.out.println("end");
            System.out.flush();
        }
        System.exit(0);
    }

    static Properties producerProps(String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    static Properties consumerProps(String group, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        return p;
    }

    static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> c, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) tps.add(new TopicPartition(topic, pi.partition()));
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return tps;
    }

    /** "TV2 PRODUCER_ID EPOCH" from the producer's transaction manager (no public API tells the epoch, and the
     *  epoch bump at every EndTxn is what transactions v2 promise). */
    static String producerState(KafkaProducer<?, ?> p) throws ReflectiveOperationException {
        java.lang.reflect.Field f = KafkaProducer.class.getDeclaredField("transactionManager");
        f.setAccessible(true);
        org.apache.kafka.clients.producer.internals.TransactionManager tm =
                (org.apache.kafka.clients.producer.internals.TransactionManager) f.get(p);
        java.lang.reflect.Method m = tm.getClass().getDeclaredMethod("producerIdAndEpoch");
        m.setAccessible(true);
        org.apache.kafka.common.utils.internals.ProducerIdAndEpoch pe =
                (org.apache.kafka.common.utils.internals.ProducerIdAndEpoch) m.invoke(tm);
        return tm.isTransactionV2Enabled() + "\t" + pe.producerId + "\t" + pe.epoch;
    }

    static void produceTxn(String txnId, String topic, String spec) throws ReflectiveOperationException {
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(txnId))) {
            p.initTransactions();
            int partitions = p.partitionsFor(topic).size();
            String[] txns = spec.split(",");
            for (int t = 0; t < txns.length; t++) {
                String[] kv = txns[t].split(":");
                int n = Integer.parseInt(kv[1]);
                p.beginTransaction();
                for (int i = 0; i < n; i++) {
                    String v = txnId + "/t" + t + "/" + i;
                    p.send(new ProducerRecord<>(topic, i % partitions, "k" + i, v));
                }
                p.flush();  // the records are in the log before the outcome is decided
                if (kv[0].equals("c")) p.commitTransaction(); else p.abortTransaction();
                System.out.println("txn\t" + t + "\t" + (kv[0].equals("c") ? "commit" : "abort") + "\t" + n + "\t"
                        + producerState(p));
            }
        }
    }

    static void read(String topic, String isolation, long timeoutMs) {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(null, isolation))) {
            List<TopicPartition> tps = partitionsOf(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            int count = 0;
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) if (c.position(tp) < end.get(tp)) done = false;
                if (done) break;
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    System.out.println("rec\t" + r.partition() + "\t" + r.offset() + "\t" + r.value());
                    count++;
                }
            }
            System.out.println("count\t" + count);
        }
    }

    static void ctp(String inTopic, String outTopic, String group, String txnId, int n, int abortBatch,
                    String mode) {
        Properties cp = consumerProps(group, "read_committed");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(txnId))) {
            p.initTransactions();
            List<TopicPartition> tps = partitionsOf(c, inTopic);
            if (mode.equals("subscribe")) c.subscribe(Collections.singletonList(inTopic)); else c.assign(tps);
            int committedRecords = 0, batches = 0, aborted = 0;
            long deadline = System.currentTimeMillis() + 120_000;
            while (committedRecords < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                batches++;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : recs) {
                    p.send(new ProducerRecord<>(outTopic, r.partition() % p.partitionsFor(outTopic).size(), r.key(),
                            r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                ConsumerGroupMetadata gm = mode.equals("subscribe") ? c.groupMetadata() : new ConsumerGroupMetadata(group);
                p.sendOffsetsToTransaction(offsets, gm);
                if (batches == abortBatch) {
                    p.flush();
                    p.abortTransaction();
                    aborted++;
                    // rewind to what the group has committed (the aborted offsets must not count)
                    Set<TopicPartition> assigned = c.assignment();
                    Map<TopicPartition, OffsetAndMetadata> committed = c.committed(new HashSet<>(assigned));
                    for (TopicPartition tp : assigned) {
                        OffsetAndMetadata om = committed.get(tp);
                        if (om == null) c.seekToBeginning(Collections.singletonList(tp)); else c.seek(tp, om.offset());
                    }
                    continue;
                }
                p.commitTransaction();
                committedRecords += recs.count();
            }
            System.out.println("ctp\tprocessed\t" + committedRecords + "\tbatches\t" + batches + "\taborted\t" + aborted);
        }
    }

    static void fence(String txnId, String topic) {
        KafkaProducer<String, String> zombie = new KafkaProducer<>(producerProps(txnId));
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(topic, 0, "z", "zombie"));
            zombie.flush();
            try (KafkaProducer<String, String> fresh = new KafkaProducer<>(producerProps(txnId))) {
                fresh.initTransactions();  // bumps the epoch: the zombie is fenced, its txn aborted
                String outcome = "not_fenced";
                try {
                    zombie.commitTransaction();  // EndTxn with the old epoch
                } catch (Exception e) {
                    Throwable t = e;
                    while (t.getCause() != null && !(t instanceof org.apache.kafka.common.errors.ProducerFencedException)
                            && !(t instanceof org.apache.kafka.common.errors.InvalidProducerEpochException)) t = t.getCause();
                    outcome = "fenced\t" + t.getClass().getName();
                }
                System.out.println(outcome);
                fresh.beginTransaction();
                fresh.send(new ProducerRecord<>(topic, 0, "f", "fresh"));
                fresh.commitTransaction();
                System.out.println("fresh_committed");
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
    }

    static void committed(String group, String topic, int partitions) {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(group, "read_committed"))) {
            Set<TopicPartition> tps = new HashSet<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            Map<TopicPartition, OffsetAndMetadata> m = c.committed(tps, Duration.ofSeconds(30));
            for (int i = 0; i < partitions; i++) {
                OffsetAndMetadata om = m.get(new TopicPartition(topic, i));
                System.out.println("committed\t" + i + "\t" + (om == null ? -1 : om.offset()));
            }
        }
    }
}
