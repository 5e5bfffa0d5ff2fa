"""The ``tidelake-kafka`` Spark data source against real brokers (Tansu; tidelake's own broker once it lands).

Planning helpers are checked directly; reads go through real confluent-kafka consumers and a local Spark.
"""
from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_fixtures import spark  # noqa: F401  (session-scoped fixture)
from tidelake.spark.kafka_offset_reader import KafkaOffsetReader
from tidelake.spark.kafka_options import DEFAULTS, KafkaSourceError, KafkaSourceOptions
from tidelake.spark.kafka_reader import read_ranges
from tidelake.spark.offset_range import (
    OffsetRange, cap_end_offsets, group_ranges, offsets_from_json, offsets_to_json, plan_ranges,
)

BASE_TS_MS = 1_700_000_000_000


# ---------------------------------------------------------------- planning (no broker)

def test_options_are_validated_like_sparks_kafka_source():
    base = {"kafka.bootstrap.servers": "127.0.0.1:1"}
    with pytest.raises(KafkaSourceError, match="bootstrap"):
        KafkaSourceOptions.parse({"subscribe": "t"}, streaming=False)
    with pytest.raises(KafkaSourceError, match="exactly one"):
        KafkaSourceOptions.parse({**base, "subscribe": "t", "subscribePattern": "t.*"}, streaming=False)
    with pytest.raises(KafkaSourceError, match="auto.offset.reset"):
        KafkaSourceOptions.parse({**base, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, streaming=True)
    with pytest.raises(KafkaSourceError, match="batch"):
        KafkaSourceOptions.parse({**base, "subscribe": "t", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(KafkaSourceError, match="batch queries only"):
        KafkaSourceOptions.parse({**base, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(KafkaSourceError, match="earliest"):
        KafkaSourceOptions.parse({**base, "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, streaming=False)
    opts = KafkaSourceOptions.parse({**base, "assign": '{"b":[1,0],"a":[2]}', "maxRatePerPartition": "50",
                                     "batchInterval": "2s", "kafka.isolation.level": "read_committed"},
                                    streaming=True)
    assert opts.assign == [("a", 2), ("b", 0), ("b", 1)]
    assert opts.batch_interval_ms == 2000 and opts.max_rate_per_partition == 50
    assert opts.starting_offsets == "latest"  # Spark's default for streams
    assert opts.consumer_config()["isolation.level"] == "read_committed"
    assert opts.consumer_config()["enable.auto.commit"] is False


def test_an_option_left_out_takes_its_default_from_one_home_and_a_bad_number_names_the_option():
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    stream, batch = (KafkaSourceOptions.parse(base, streaming=s) for s in (True, False))
    assert (stream.starting_offsets, batch.starting_offsets, batch.ending_offsets) == (
        DEFAULTS.starting_offsets_streaming, DEFAULTS.starting_offsets_batch, DEFAULTS.ending_offsets) == (
        "latest", "earliest", "latest")
    assert (batch.fail_on_data_loss, batch.include_headers, batch.batch_interval_ms, batch.poll_timeout_ms,
            batch.max_arrow_batch_rows, batch.verify_latest_offsets, batch.isolation_level) == (
        DEFAULTS.fail_on_data_loss, DEFAULTS.include_headers, DEFAULTS.batch_interval_ms, DEFAULTS.poll_timeout_ms,
        DEFAULTS.max_arrow_batch_rows, DEFAULTS.verify_latest_offsets, DEFAULTS.isolation_level)
    assert batch.consumer_config()["fetch.wait.max.ms"] == DEFAULTS.fetch_wait_max_ms
    assert KafkaSourceOptions.parse({**base, "kafkaConsumer.pollTimeoutMs": "5"}, streaming=False).poll_timeout_ms == 5
    for name in ["maxOffsetsPerTrigger", "batchIntervalMs", "kafkaConsumer.pollTimeoutMs", "maxArrowBatchRows"]:
        with pytest.raises(KafkaSourceError, match=f"^option {name} must be a whole number, got 'many'$"):
            KafkaSourceOptions.parse({**base, name: "many"}, streaming=True)
    with pytest.raises(KafkaSourceError, match="^option failOnDataLoss must be true or false, got 'maybe'$"):
        KafkaSourceOptions.parse({**base, "failOnDataLoss": "maybe"}, streaming=True)


def test_offsets_json_round_trip_uses_sparks_layout():
    offsets = {("t", 10): 5, ("t", 2): 7, ("u", 0): -2}
    as_json = offsets_to_json(offsets)
    assert as_json == {"t": {"2": 7, "10": 5}, "u": {"0": -2}}
    assert offsets_from_json(json.dumps(as_json)) == offsets


def test_admission_control_caps_total_and_per_partition():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 1000, ("t", 1): 150, ("t", 2): 50}
    # Total cap shared by backlog (1000 : 50 : 0) and exact.
    end = cap_end_offsets(start, latest, max_total=210, max_per_partition=None)
    assert sum(end[tp] - start[tp] for tp in end) == 210
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in end)
    assert end[("t", 0)] - start[("t", 0)] == 200 and end[("t", 1)] - start[("t", 1)] == 10
    # Per-partition cap (maxRatePerPartition x interval).
    end = cap_end_offsets(start, latest, max_total=None, max_per_partition=30)
    assert end == {("t", 0): 30, ("t", 1): 130, ("t", 2): 50}
    # No cap: everything up to latest; a partition new since start begins at 0.
    end = cap_end_offsets(start, {**latest, ("t", 3): 9}, max_total=None, max_per_partition=None)
    assert end == {**latest, ("t", 3): 9}
    ranges = plan_ranges(start, end)
    assert OffsetRange("t", 3, 0, 9, new_partition=True) in ranges
    assert all(r.size > 0 for r in ranges)


def test_ranges_are_grouped_per_core_or_split_for_min_partitions():
    ranges = [OffsetRange("t", p, 0, size) for p, size in enumerate([100, 10, 60, 50, 5])]
    groups = group_ranges(ranges, num_groups=2, min_partitions=None)
    assert len(groups) == 2
    assert sorted((r.partition for g in groups for r in g)) == [0, 1, 2, 3, 4]
    loads = sorted(sum(r.size for r in g) for g in groups)
    assert loads == [110, 115]  # largest-first onto the least loaded group
    split = group_ranges([OffsetRange("t", 0, 10, 110), OffsetRange("t", 1, 0, 100)], num_groups=2, min_partitions=6)
    assert len(split) >= 6 and all(len(g) == 1 for g in split)
    covered = sorted((g[0].partition, o) for g in split for o in range(g[0].start, g[0].end))
    assert covered == [(0, o) for o in range(10, 110)] + [(1, o) for o in range(100)]


# ---------------------------------------------------------------- against a broker

@pytest.fixture
def tidelake_broker(tmp_path):
    from tidelake.broker import EmbeddedBroker
    with EmbeddedBroker(tmp_path / "broker-data", port=0) as broker:
        yield broker.bootstrap_servers


@pytest.fixture(params=["tidelake", "tansu"])
def bootstrap(request):
    """A running Kafka-protocol broker (tidelake's own, then Tansu); yields its bootstrap address."""
    yield request.getfixturevalue("tidelake_broker" if request.param == "tidelake" else "tansu")


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    return topic


def produce(bootstrap: str, topic: str, count: int, partitions: int, *, start: int = 0) -> dict:
    """Produce keyed records with headers and explicit timestamps; return {(partition, offset): i}."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered: dict[tuple[int, int], int] = {}
    errors: list = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered[(msg.partition(), msg.offset())] = int(msg.key())

    for i in range(start, start + count):
        producer.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(), partition=i % partitions,
                         timestamp=BASE_TS_MS + i, headers=[("n", str(i).encode())], on_delivery=on_delivery)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors and len(delivered) == count
    return delivered


def test_batch_read_returns_every_record_with_sparks_schema(spark, bootstrap):
    topic = create_topic(bootstrap, 3)
    produced = produce(bootstrap, topic, 600, 3)
    df = (spark.read.format("tidelake-kafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("includeHeaders", "true").option("numInputPartitions", "2").load())
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>")]
    assert df.rdd.getNumPartitions() == 2  # 3 Kafka partitions packed into 2 core-sized groups
    rows = df.collect()
    assert len(rows) == 600
    seen = {}
    for row in rows:
        i = int(row.key)
        assert row.value == f"value-{i}".encode() and row.topic == topic
        assert row.timestamp.replace(tzinfo=dt.timezone.utc) == dt.datetime.fromtimestamp((BASE_TS_MS + i) / 1000, dt.timezone.utc)
        assert row.timestampType == 0  # CreateTime
        assert [(h.key, h.value) for h in row.headers] == [("n", str(i).encode())]
        seen[(row.partition, row.offset)] = i
    assert seen == produced


def test_batch_offsets_json_assign_and_pattern(spark, bootstrap):
    topic = create_topic(bootstrap, 2)
    produce(bootstrap, topic, 200, 2)  # 100 per partition, offsets 0..99

    def offsets_read(**options):
        reader = spark.read.format("tidelake-kafka").option("kafka.bootstrap.servers", bootstrap)
        for name, value in options.items():
            reader = reader.option(name, value)
        return sorted((r.partition, r.offset) for r in reader.load().select("partition", "offset").collect())

    got = offsets_read(subscribe=topic, startingOffsets=json.dumps({topic: {"0": 10, "1": -2}}),
                       endingOffsets=json.dumps({topic: {"0": 20, "1": -1}}))
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(100)]
    got = offsets_read(assign=json.dumps({topic: [1]}), startingOffsets=json.dumps({topic: {"1": 95}}))
    assert got == [(1, o) for o in range(95, 100)]
    got = offsets_read(subscribePattern=topic[:4] + ".*" + topic[-3:], minPartitions="5")
    assert got == [(p, o) for p in range(2) for o in range(100)]
    with pytest.raises(Exception, match="does not cover"):
        offsets_read(assign=json.dumps({topic: [1]}), startingOffsets=json.dumps({topic: {"0": 1}}))


def test_batch_offsets_by_timestamp(spark, tidelake_broker):
    """startingTimestamp / endingOffsetsByTimestamp (ListOffsets by time). Only against tidelake's broker:
    Tansu answers ListOffsets by timestamp with offsets unrelated to the records' timestamps."""
    topic = create_topic(tidelake_broker, 2)
    produce(tidelake_broker, topic, 200, 2)
    reader = (spark.read.format("tidelake-kafka").option("kafka.bootstrap.servers", tidelake_broker)
              .option("subscribe", topic).option("startingTimestamp", str(BASE_TS_MS + 150))
              .option("endingOffsetsByTimestamp", json.dumps({topic: {"0": BASE_TS_MS + 170}})))
    got = sorted((r.partition, r.offset) for r in reader.load().select("partition", "offset").collect())
    # Record i has timestamp BASE_TS_MS + i and sits in partition i % 2 at offset i // 2.
    assert got == [(0, o) for o in range(75, 85)] + [(1, o) for o in range(75, 100)]


def test_range_ending_in_transaction_marker_is_read_without_waiting(bootstrap):
    """The last offset of a committed transaction is its COMMIT marker: no record will ever arrive there,
    and the reader must stop at the end offset anyway (a hang would hit the 5 s poll timeout and fail)."""
    topic = create_topic(bootstrap, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=f"committed-{i}".encode(), partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"aborted-{i}".encode(), partition=0)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed-last", partition=0)
    producer.commit_transaction(30)

    options = KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                        "kafka.isolation.level": "read_committed",
                                        "kafkaConsumer.pollTimeoutMs": "5000"}, streaming=False)
    offsets = KafkaOffsetReader(options)
    try:
        partitions = offsets.partitions()
        end = offsets.list_offsets(partitions, "latest")
    finally:
        offsets.close()
    values = [v for batch in read_ranges(options, plan_ranges({(topic, 0): 0}, end))
              for v in batch.column("value").to_pylist()]
    assert values == [f"committed-{i}".encode() for i in range(10)] + [b"committed-last"]
    # A range that stops right after the first COMMIT marker (offset 10) ends there too.
    first_txn = [v for batch in read_ranges(options, [OffsetRange(topic, 0, 0, 11)])
                 for v in batch.column("value").to_pylist()]
    assert first_txn == [f"committed-{i}".encode() for i in range(10)]
    # Only the columns a caller asks for (the pipeline needs no keys, timestamps or headers).
    (projected,) = read_ranges(options, [OffsetRange(topic, 0, 0, 11)], columns=("value", "offset"))
    assert projected.schema.names == ["value", "offset"] and projected.num_rows == 10


def run_available_now(spark, bootstrap, topic, checkpoint, **options):
    """Run one Trigger.AvailableNow query; return [(batch_id, [(partition, offset, key)])]."""
    batches = []

    def collect(df, batch_id):
        batches.append((batch_id, [(r.partition, r.offset, int(r.key)) for r in df.select("partition", "offset", "key").collect()]))

    reader = (spark.readStream.format("tidelake-kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (reader.load().writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    try:
        assert query.awaitTermination(300), "AvailableNow query did not finish"
        assert query.exception() is None
    finally:
        query.stop()
    return [b for b in batches if b[1]]


def test_stream_admission_control_and_restart_from_checkpoint(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, 3)
    produced = produce(bootstrap, topic, 900, 3)
    batches = run_available_now(spark, bootstrap, topic, tmp_path / "ckpt", maxOffsetsPerTrigger="350")
    assert len(batches) == 3  # 900 records, at most 350 per micro-batch
    assert all(len(rows) <= 350 for _, rows in batches)
    first_run = [row for _, rows in batches for row in rows]
    assert {(p, o): k for p, o, k in first_run} == produced and len(first_run) == 900

    # New records, same checkpoint: exactly the new ones, none of the old.
    more = produce(bootstrap, topic, 90, 3, start=900)
    batches = run_available_now(spark, bootstrap, topic, tmp_path / "ckpt", maxOffsetsPerTrigger="350")
    second_run = [row for _, rows in batches for row in rows]
    assert {(p, o): k for p, o, k in second_run} == more and len(second_run) == 90

    # The paper's cap: maxRatePerPartition x batch interval records per partition per batch.
    batches = run_available_now(spark, bootstrap, topic, tmp_path / "ckpt-rate",
                                maxRatePerPartition="60", batchInterval="2s")
    for _, rows in batches:
        per_partition = {p: sum(1 for q, _, _ in rows if q == p) for p in range(3)}
        assert max(per_partition.values()) <= 120
    everything = [row for _, rows in batches for row in rows]
    assert {(p, o): k for p, o, k in everything} == {**produced, **more} and len(everything) == 990
    assert len(batches) == 3  # 330 records per partition, 120 at a time


def test_fail_on_data_loss(spark, tidelake_broker):
    """Offsets below the log start (moved by DeleteRecords) are an error, or skipped with failOnDataLoss=false."""
    from confluent_kafka import TopicPartition as KafkaTP
    topic = create_topic(tidelake_broker, 1)
    produce(tidelake_broker, topic, 100, 1)
    admin = AdminClient({"bootstrap.servers": tidelake_broker})
    for future in admin.delete_records([KafkaTP(topic, 0, 30)]).values():
        assert future.result(30).low_watermark == 30

    def read(fail_on_data_loss: str):
        return (spark.read.format("tidelake-kafka").option("kafka.bootstrap.servers", tidelake_broker)
                .option("subscribe", topic).option("startingOffsets", json.dumps({topic: {"0": 10}}))
                .option("failOnDataLoss", fail_on_data_loss).load().select("offset", "key").collect())

    with pytest.raises(Exception, match="no longer in the log"):
        read("true")
    rows = read("false")
    assert sorted((r.offset, int(r.key)) for r in rows) == [(o, o) for o in range(30, 100)]
    # A partition that appeared after the query started begins at its log start: new, not lost.
    options = KafkaSourceOptions.parse({"kafka.bootstrap.servers": tidelake_broker, "subscribe": topic,
                                        "failOnDataLoss": "true"}, streaming=False)
    offsets = [o for batch in read_ranges(options, [OffsetRange(topic, 0, 0, 100, new_partition=True)])
               for o in batch.column("offset").to_pylist()]
    assert offsets == list(range(30, 100))


def test_compacted_gaps_end_ranges_without_waiting(tmp_path):
    """Compaction removes offsets from the middle and from the end of a range: the reader returns the
    survivors and stops at the end offset without waiting for records that no longer exist."""
    from confluent_kafka import Consumer, TopicPartition as KafkaTP
    from tidelake.broker import EmbeddedBroker
    with EmbeddedBroker(tmp_path / "broker-data", port=0) as broker:
        bootstrap = broker.bootstrap_servers
        topic = f"compacted-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new_topic = NewTopic(topic, 1, 1, config={"cleanup.policy": "compact", "segment.bytes": "1024"})
        for future in admin.create_topics([new_topic]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
        for i in range(100):  # ten rounds over keys k0..k9: offsets 0..99, newest values in the last round
            producer.produce(topic, key=f"k{i % 10}".encode(), value=f"round-{i // 10}".encode(), partition=0)
            producer.flush(30)
        stats = broker.broker.logs.get(topic, 0).compact()
        assert stats is not None

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.partition.eof": True,
                             "auto.offset.reset": "earliest"})
        consumer.assign([KafkaTP(topic, 0, 0)])
        survivors, eof = [], False
        for _ in range(100):
            for message in consumer.consume(500, timeout=0.5):
                if message.error():
                    eof = True
                else:
                    survivors.append(message.offset())
            if eof:
                break
        consumer.close()
        assert eof and len(survivors) < 100 and survivors[-1] == 99  # compaction did remove offsets

        options = KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                            "kafka.isolation.level": "read_committed",
                                            "kafkaConsumer.pollTimeoutMs": "5000"}, streaming=False)

        def offsets_in(start: int, end: int) -> list[int]:
            return [o for batch in read_ranges(options, [OffsetRange(topic, 0, start, end)])
                    for o in batch.column("offset").to_pylist()]

        assert offsets_in(0, 100) == survivors
        removed = sorted(set(range(100)) - set(survivors))
        gap_end = removed[len(removed) // 2] + 1  # a range whose last offset was compacted away
        assert offsets_in(0, gap_end) == [o for o in survivors if o < gap_end]
