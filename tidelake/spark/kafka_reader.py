"""Executor side of the Kafka source: read exact offset ranges with confluent-kafka into Arrow batches.

No pyspark imports here, so the pipeline runner and tests can use it directly.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator

import pyarrow as pa

from tidelake.spark.kafka_offsets import DataLossError, KafkaSourceError, KafkaSourceOptions, OffsetRange

log = logging.getLogger(__name__)

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

# Spark's Kafka row schema, as DDL (headers only with includeHeaders=true).
KAFKA_SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
                    "timestamp timestamp, timestampType int")
KAFKA_SCHEMA_WITH_HEADERS_DDL = KAFKA_SCHEMA_DDL + ", headers array<struct<key: string, value: binary>>"


def kafka_arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)


class _BatchBuilder:
    """Column lists for one Arrow batch of Kafka rows."""

    def __init__(self, include_headers: bool):
        self.include_headers = include_headers
        self.schema = kafka_arrow_schema(include_headers)
        self.reset()

    def reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.topics: list = []
        self.partitions: list = []
        self.offsets: list = []
        self.timestamps: list = []
        self.timestamp_types: list = []
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, message) -> None:
        self.keys.append(message.key())
        self.values.append(message.value())
        self.topics.append(message.topic())
        self.partitions.append(message.partition())
        self.offsets.append(message.offset())
        ts_type, ts = message.timestamp()
        # librdkafka: 1 = CreateTime, 2 = LogAppendTime, 0 = none; Spark: 0, 1, -1 (Java's ids).
        self.timestamp_types.append(ts_type - 1 if ts_type in (1, 2) else -1)
        self.timestamps.append(ts * 1000 if ts_type in (1, 2) and ts >= 0 else None)
        if self.include_headers:
            raw = message.headers()
            self.headers.append(None if raw is None else [{"key": k, "value": v} for k, v in raw])

    def flush(self) -> pa.RecordBatch:
        arrays = [
            pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
            pa.array(self.topics, pa.string()), pa.array(self.partitions, pa.int32()),
            pa.array(self.offsets, pa.int64()), pa.array(self.timestamps, pa.timestamp("us", tz="UTC")),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, HEADER_TYPE))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.reset()
        return batch


def read_ranges(options: KafkaSourceOptions, ranges: list[OffsetRange]) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches holding exactly the records of ``ranges`` (each ``[start, end)``).

    All ranges are read together by one consumer (assign + explicit offsets, no group commits). A range
    ends at its first record at or past ``end``, or when the partition's end (EOF) is at or past ``end``
    — so offsets that hold no visible record (transaction markers, compacted-away or aborted records)
    never make the reader wait. A range whose start is below the log start is data loss: an error with
    failOnDataLoss=true, otherwise the range continues at the log start.
    Waits are bounded: no progress on any range for ``kafkaConsumer.pollTimeoutMs`` is an error.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition as KafkaTP

    # Split ranges of one partition (minPartitions) never share a group, so key by partition.
    by_partition = {(r.topic, r.partition): r for r in ranges if r.size > 0}
    if len(by_partition) != len([r for r in ranges if r.size > 0]):
        raise KafkaSourceError("one input partition got two ranges of the same Kafka partition")
    if not by_partition:
        return
    consumer = Consumer(options.consumer_config())
    timeout_s = options.poll_timeout_ms / 1000
    try:
        positions: dict[tuple[str, int], int] = {}
        for key, r in by_partition.items():
            low, _high = consumer.get_watermark_offsets(KafkaTP(r.topic, r.partition), timeout=timeout_s,
                                                        cached=False)
            positions[key] = _checked_start(r, r.start, low, options)
        pending = {key for key, pos in positions.items() if pos < by_partition[key].end}
        consumer.assign([KafkaTP(t, p, positions[(t, p)]) for t, p in sorted(pending)])

        builder = _BatchBuilder(options.include_headers)
        deadline = time.monotonic() + timeout_s
        while pending:
            messages = consumer.consume(num_messages=min(options.max_arrow_batch_rows, 10_000), timeout=0.5)
            for message in messages:
                key = (message.topic(), message.partition())
                if key not in pending:
                    continue  # a record fetched past a range's end before it was paused
                r = by_partition[key]
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= r.end:
                            _finish(consumer, pending, key)
                        continue
                    if error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                        low, _ = consumer.get_watermark_offsets(KafkaTP(*key), timeout=timeout_s, cached=False)
                        position = _checked_start(r, positions[key], low, options)
                        if position >= r.end:
                            _finish(consumer, pending, key)
                        else:
                            positions[key] = position
                            consumer.assign([KafkaTP(t, p, positions[(t, p)]) for t, p in sorted(pending)])
                        continue
                    raise KafkaSourceError(f"reading {key[0]}-{key[1]}: {error}")
                offset = message.offset()
                if offset >= r.end:
                    _finish(consumer, pending, key)
                    continue
                if offset < positions[key]:
                    continue  # re-delivered after a re-assign
                builder.add(message)
                positions[key] = offset + 1
                if offset + 1 >= r.end:
                    _finish(consumer, pending, key)
                deadline = time.monotonic() + timeout_s
                if len(builder) >= options.max_arrow_batch_rows:
                    yield builder.flush()
            if pending and time.monotonic() > deadline:
                raise KafkaSourceError(
                    f"no record arrived in {options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs) for "
                    + ", ".join(f"{t}-{p} at {positions[(t, p)]} (end {by_partition[(t, p)].end})"
                                for t, p in sorted(pending)))
        if len(builder):
            yield builder.flush()
    finally:
        consumer.close()


def _checked_start(r: OffsetRange, position: int, log_start: int, options: KafkaSourceOptions) -> int:
    if log_start <= position:
        return position
    if r.new_partition:
        return log_start
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{r.topic}-{r.partition}: offsets {position}..{min(log_start, r.end) - 1} are no longer in the log "
            f"(log start offset is {log_start}); set failOnDataLoss=false to skip them")
    log.warning("%s-%d: skipping lost offsets %d..%d (log start %d)", r.topic, r.partition,
                position, log_start - 1, log_start)
    return log_start


def _finish(consumer, pending: set, key: tuple[str, int]) -> None:
    from confluent_kafka import TopicPartition as KafkaTP
    pending.discard(key)
    try:
        consumer.pause([KafkaTP(*key)])
    except Exception:  # pause of an already-unassigned partition: nothing left to stop
        pass
