// tests/broker/test_java_streams.py: a Kafka Streams 4.4 application with exactly_once_v2 and a RocksDB store that
// counts the words of INPUT into OUTPUT (word -> count), running until it is stopped; with the classic group protocol,
// or with GROUP_PROTOCOL "streams" (KIP-1071: the broker's streams group assigns the tasks), tests/broker/test_streams_groups.py.
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/** args: BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [GROUP_PROTOCOL]; prints "running" once the application is
 * RUNNING. */
public class StreamsCount {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, a[4]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (a.length > 5) p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, a[5]);  // "classic" (the default) or "streams"
        StreamsBuilder b = new StreamsBuilder();
        b.stream(a[2], Consumed.with(Serdes.String(), Serdes.String()))
                .groupBy((k, v) -> v, Grouped.with(Serdes.String(), Serdes.String()))   // a repartition topic
                .count(Materialized.as("word-counts"))                                  // RocksDB + changelog
                .toStream()
                .to(a[3], Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) { System.out.println("running"); System.out.flush(); }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) stopped.countDown();
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> { streams.close(); stopped.countDown(); }));
        streams.start();
        stopped.await();
        System.out.println("stopped " + streams.state());
    }
}
