import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Consume-transform-produce across broker failures, the way an application written against the
 * reference client's documentation does it: a consumer group member (subscribe, read_committed) and a
 * transactional producer; each poll batch is one transaction carrying the upper-cased records and
 * the consumer's offsets (sendOffsetsToTransaction with the group metadata). An abortable error
 * aborts and rewinds to the committed offsets; a fatal one (fenced, ...) starts a new producer.
 *
 *   java ClusterCtpClient BOOTSTRAP IN OUT GROUP TXN_ID N TIMEOUT_MS
 *
 * Prints "progress COUNT" after each committed transaction (COUNT input records so far), "recovered
 * CLASS" after each error it recovered from, and "done COUNT" once N input records are committed
 * (exit 0), or "timeout COUNT" (exit 1).
 */
public class ClusterCtpClient {
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String in = args[1], out = args[2], group = args[3], txnId = args[4];
        long n = Long.parseLong(args[5]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[6]);
        long processed = 0;
        KafkaProducer<String, String> producer = newProducer(txnId);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(group))) {
            consumer.subscribe(Collections.singletonList(in));
            while (processed < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (KafkaException e) {
                    say("recovered\t" + e.getClass().getSimpleName());
                    continue;
                }
                if (records.isEmpty()) continue;
                try {
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        producer.send(new ProducerRecord<>(out, r.partition(), r.key(), r.value().toUpperCase()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    commit(producer);
                    processed += records.count();
                    say("progress\t" + processed);
                } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException
                         | InvalidProducerEpochException e) {
                    say("recovered\t" + e.getClass().getSimpleName());
                    producer.close(Duration.ZERO);
                    producer = newProducer(txnId);
                    rewind(consumer);
                } catch (KafkaException e) {
                    say("recovered\t" + e.getClass().getSimpleName());
                    try {
                        producer.abortTransaction();
                    } catch (KafkaException fatal) {
                        producer.close(Duration.ZERO);
                        producer = newProducer(txnId);
                    }
                    rewind(consumer);
                }
            }
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
        say((processed >= n ? "done\t" : "timeout\t") + processed);
        System.exit(processed >= n ? 0 : 1);
    }

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** commitTransaction may time out while the coordinator moves: calling it again resumes it. */
    static void commit(KafkaProducer<String, String> producer) {
        for (int attempt = 1; ; attempt++) {
            try {
                producer.commitTransaction();
                return;
            } catch (TimeoutException e) {
                if (attempt == 5) throw e;
                say("recovered\t" + e.getClass().getSimpleName());
            }
        }
    }

    /** After an abort: back to the group's committed offsets (the aborted batch is read again). */
    static void rewind(KafkaConsumer<String, String> consumer) {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned, Duration.ofSeconds(60));
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata o = committed.get(tp);
            if (o != null) consumer.seek(tp, o.offset()); else consumer.seekToBeginning(Collections.singleton(tp));
        }
    }

    static KafkaProducer<String, String> newProducer(String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static Properties consumerProps(String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }
}
