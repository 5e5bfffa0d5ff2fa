"""Executor side of Kafka reading: exact offset ranges, with confluent-kafka, into Arrow batches of Spark's
Kafka rows. The one reader: the ``tidelake-kafka`` data source's tasks and the pipeline runner's tasks call
:func:`read_ranges`. No pyspark imports.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.kafka_options import DataLossError, KafkaSourceError, KafkaSourceOptions
from tidelake.spark.offset_range import OffsetRange

log = logging.getLogger(__name__)

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

# Spark's Kafka row schema, as DDL (headers only with includeHeaders=true).
KAFKA_SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
                    "timestamp timestamp, timestampType int")
KAFKA_SCHEMA_WITH_HEADERS_DDL = KAFKA_SCHEMA_DDL + ", headers array<struct<key: string, value: binary>>"

KAFKA_FIELDS = {
    "key": pa.binary(), "value": pa.binary(), "topic": pa.string(), "partition": pa.int32(),
    "offset": pa.int64(), "timestamp": pa.timestamp("us", tz="UTC"), "timestampType": pa.int32(),
    "headers": HEADER_TYPE,
}


def kafka_arrow_schema(include_headers: bool, columns: Sequence[str] | None = None) -> pa.Schema:
    """Spark's Kafka rows as Arrow (``columns``: a subset, in this order)."""
    names = list(columns) if columns is not None else [n for n in KAFKA_FIELDS if include_headers or n != "headers"]
    return pa.schema([pa.field(n, KAFKA_FIELDS[n]) for n in names])


def _to_batch(messages: list, schema: pa.Schema) -> pa.RecordBatch:
    """confluent-kafka messages -> one Arrow batch of ``schema``'s Kafka columns."""
    columns = {}
    for name in schema.names:
        if name == "key":
            columns[name] = pa.array([m.key() for m in messages], pa.binary())
        elif name == "value":
            columns[name] = pa.array([m.value() for m in messages], pa.binary())
        elif name == "topic":
            columns[name] = pa.array([m.topic() for m in messages], pa.string())
        elif name == "partition":
            columns[name] = pa.array([m.partition() for m in messages], pa.int32())
        elif name == "offset":
            columns[name] = pa.array([m.offset() for m in messages], pa.int64())
        elif name == "headers":
            columns[name] = pa.array([None if (h := m.headers()) is None else [{"key": k, "value": v} for k, v in h]
                                      for m in messages], HEADER_TYPE)
        elif name not in columns:
            columns["timestamp"], columns["timestampType"] = _timestamps(messages)
    return pa.RecordBatch.from_arrays([columns[n] for n in schema.names], schema=schema)


def _timestamps(messages: list) -> tuple[pa.Array, pa.Array]:
    """(timestamp, timestampType) with the one timestampType rule: librdkafka's 1 = CreateTime,
    2 = LogAppendTime, 0 = none are Spark's (Java's) 0, 1 and -1; a timestamp is only set for CreateTime
    and LogAppendTime."""
    stamps = [m.timestamp() for m in messages]
    kind = pa.array([k for k, _ in stamps], pa.int32())
    known = pc.or_(pc.equal(kind, 1), pc.equal(kind, 2))
    kind = pc.if_else(known, pc.subtract(kind, 1), pa.scalar(-1, pa.int32()))
    millis = pa.array([t for _, t in stamps], pa.int64())
    valid = pc.and_(known, pc.greater_equal(millis, 0))
    micros = pc.if_else(valid, pc.multiply(millis, 1000), pa.scalar(None, pa.int64()))
    return micros.cast(pa.timestamp("us", tz="UTC")), kind


def read_ranges(options: KafkaSourceOptions, ranges: list[OffsetRange],
                columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches holding exactly the records of ``ranges`` (each ``[start, end)``): Spark's Kafka
    rows, or only ``columns`` of them (a caller that needs no keys, headers or timestamps skips building them).

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
        # A start below the log start is found by the fetch itself (OFFSET_OUT_OF_RANGE, handled below), so
        # no offset lookup delays the common case.
        positions = {key: r.start for key, r in by_partition.items()}
        pending = set(positions)
        consumer.assign([KafkaTP(t, p, positions[(t, p)]) for t, p in sorted(pending)])

        schema = kafka_arrow_schema(options.include_headers, columns)
        kept: list = []  # messages of the next batch
        deadline = time.monotonic() + timeout_s
        while pending:
            # consume() waits until it has num_messages records (or the timeout): ask for no more than the
            # ranges still hold, so the last records of a batch are returned as soon as they arrive.
            remaining = sum(by_partition[key].end - positions[key] for key in pending)
            messages = consumer.consume(num_messages=max(1, min(options.max_arrow_batch_rows, 10_000, remaining)),
                                        timeout=0.5)
            kept_before = len(kept)
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
                kept.append(message)
                positions[key] = offset + 1
                if offset + 1 >= r.end:
                    _finish(consumer, pending, key)
            if len(kept) > kept_before:  # progress: the wait for the next record starts again
                deadline = time.monotonic() + timeout_s
            if len(kept) >= options.max_arrow_batch_rows:
                yield _to_batch(kept, schema)
                kept = []
            if pending and time.monotonic() > deadline:
                raise KafkaSourceError(
                    f"no record arrived in {options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs) for "
                    + ", ".join(f"{t}-{p} at {positions[(t, p)]} (end {by_partition[(t, p)].end})"
                                for t, p in sorted(pending)))
        if kept:
            yield _to_batch(kept, schema)
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
