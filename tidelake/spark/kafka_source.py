"""``format("tidelake-kafka")``: a Spark Python Data Source for Kafka-protocol topics, batch and streaming.

Options are those of Spark's own Kafka source:

===========================  ==================================================================
``kafka.bootstrap.servers``  required; every other ``kafka.*`` option goes to the client
                             (librdkafka names, which are Kafka's for the common ones, e.g.
                             ``kafka.isolation.level=read_committed``, ``kafka.security.protocol``)
``subscribe``                comma-separated topics (exactly one of subscribe / subscribePattern / assign)
``subscribePattern``         regex over topic names (matched in full; ``__internal`` topics never match)
``assign``                   JSON ``{"topicA":[0,1]}``
``startingOffsets``          ``earliest`` | ``latest`` | JSON ``{"t":{"0":23,"1":-2}}`` (-2 earliest,
                             -1 latest); default latest for streams, earliest for batch
``endingOffsets``            batch only: ``latest`` | JSON (-1 latest); default latest
``startingTimestamp``        epoch ms for every partition, or ``startingOffsetsByTimestamp`` JSON per
                             partition (``endingTimestamp`` / ``endingOffsetsByTimestamp`` likewise):
                             the first offset at or after that time, the latest offset if there is none;
                             these win over startingOffsets / endingOffsets, as in Spark
``failOnDataLoss``           default true: a range starting below the log start is an error; false:
                             continue at the log start
``includeHeaders``           default false; adds ``headers array<struct<key string, value binary>>``
``maxOffsetsPerTrigger``     stream: at most N records per micro-batch, shared by backlog
``maxRatePerPartition``      stream (the paper's DStream cap): at most rate x interval records per
                             partition per micro-batch; the interval is ``batchIntervalMs`` (ms) or
                             ``batchInterval`` ("2s", "500ms"), default 1 s — Structured Streaming does
                             not tell a source its trigger interval, so give the same value as the trigger
``minPartitions``            split ranges so there are at least N input partitions
``numInputPartitions``       how many groups Kafka partitions are packed into (default: driver cores)
``kafkaConsumer.pollTimeoutMs``  bounded wait for a record the range must contain (default 120000)
===========================  ==================================================================

Input partitions: one per core-sized group of Kafka partitions — ranges are packed largest-first onto
the least-loaded of ``numInputPartitions`` groups (default ``os.cpu_count()``), and each group is read
by one consumer that fetches all its partitions at once (see ``offset_range.group_ranges``).

The stream's offsets are Spark's JSON ``{"topic":{"0":23}}`` (next offset to read per partition).
Admission control: ``getDefaultReadLimit`` is ``ReadMaxRows`` when either cap is set, and
``latestOffset`` applies both caps unless Spark passes ``ReadAllAvailable`` (Trigger.Once), as the
API requires. ``Trigger.AvailableNow`` is supported: the target is fixed when the query starts and the
caps still split it into several batches.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from tidelake.spark.kafka_offset_reader import KafkaOffsetReader
from tidelake.spark.kafka_options import KafkaSourceOptions, include_headers_option
from tidelake.spark.kafka_reader import KAFKA_SCHEMA_DDL, KAFKA_SCHEMA_WITH_HEADERS_DDL, read_ranges
from tidelake.spark.offset_range import (
    OffsetMap, OffsetRange, cap_end_offsets, group_ranges, offsets_from_json, offsets_to_json, plan_ranges,
)

# Java's Long.MAX_VALUE: "no total cap" while still asking Spark for admission control.
_NO_ROW_LIMIT = 2**63 - 1


class KafkaInputPartition(InputPartition):
    """The offset ranges one Spark task reads (picklable)."""

    def __init__(self, ranges: list[OffsetRange]):
        super().__init__([(r.topic, r.partition, r.start, r.end) for r in ranges])
        self.ranges = ranges


class KafkaDataSource(DataSource):
    """Spark's Kafka source, in Python, on confluent-kafka. See the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return "tidelake-kafka"

    def schema(self) -> str:
        # the columns only: the options are checked when Spark asks for the reader
        include_headers = include_headers_option(self.options)
        return KAFKA_SCHEMA_WITH_HEADERS_DDL if include_headers else KAFKA_SCHEMA_DDL

    def reader(self, schema: StructType) -> "KafkaBatchReader":
        return KafkaBatchReader(KafkaSourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> "KafkaStreamReader":
        return KafkaStreamReader(KafkaSourceOptions.parse(self.options, streaming=True))


def _input_partitions(options: KafkaSourceOptions, ranges: list[OffsetRange]) -> list[KafkaInputPartition]:
    groups = group_ranges(ranges, num_groups=options.num_input_partitions, min_partitions=options.min_partitions)
    return [KafkaInputPartition(g) for g in groups]


class KafkaBatchReader(DataSourceReader):
    """Batch read of [startingOffsets, endingOffsets), resolved once on the driver."""

    def __init__(self, options: KafkaSourceOptions):
        self.options = options
        offsets = KafkaOffsetReader(options)
        try:
            partitions = offsets.partitions()
            start = offsets.resolve(options.starting_offsets, partitions, default="earliest",
                                    timestamps=options.starting_timestamps)
            end = offsets.resolve(options.ending_offsets, partitions, default="latest",
                                  timestamps=options.ending_timestamps)
        finally:
            offsets.close()
        bad = [tp for tp in partitions if end[tp] < start[tp]]
        if bad:
            raise ValueError(f"endingOffsets before startingOffsets for {bad}")
        self.ranges = plan_ranges(start, end)

    def partitions(self) -> Sequence[InputPartition]:
        return _input_partitions(self.options, self.ranges)

    def read(self, partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_ranges(self.options, partition.ranges)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Lives in one long-running Python process on the driver; ``read`` runs on
    executors from a pickled copy (which holds no client)."""

    def __init__(self, options: KafkaSourceOptions):
        self.options = options
        self.offsets = KafkaOffsetReader(options)
        self.available_now_target: OffsetMap | None = None
        self.last_seen_latest: OffsetMap | None = None  # from the last latestOffset(), for progress reports

    def initialOffset(self) -> dict:
        partitions = self.offsets.partitions()
        return offsets_to_json(self.offsets.resolve(self.options.starting_offsets, partitions, default="latest",
                                                    timestamps=self.options.starting_timestamps))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger or self.options.max_rate_per_partition:
            return ReadMaxRows(self.options.max_offsets_per_trigger or _NO_ROW_LIMIT)
        return ReadAllAvailable()

    def _latest(self) -> OffsetMap:
        partitions = self.offsets.partitions()
        self.last_seen_latest = self.offsets.list_offsets(partitions, "latest")
        return dict(self.last_seen_latest)

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now_target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        latest = dict(self.available_now_target) if self.available_now_target is not None else self._latest()
        # Partitions the stream already tracks but metadata no longer lists keep their position.
        for tp, offset in begin.items():
            latest.setdefault(tp, offset)
        if isinstance(limit, ReadMaxRows):
            per_partition = None
            if self.options.max_rate_per_partition:
                per_partition = max(1, self.options.max_rate_per_partition * self.options.batch_interval_ms // 1000)
            max_total = limit.max_rows if limit.max_rows < _NO_ROW_LIMIT else None
            end = cap_end_offsets(begin, latest, max_total=max_total, max_per_partition=per_partition)
        else:
            end = {tp: max(o, begin.get(tp, 0)) for tp, o in latest.items()}
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        # Spark asks right after latestOffset(); reuse that answer instead of asking the broker again.
        return offsets_to_json(self.last_seen_latest if self.last_seen_latest is not None else self._latest())

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return _input_partitions(self.options, plan_ranges(offsets_from_json(start), offsets_from_json(end)))

    def read(self, partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_ranges(self.options, partition.ranges)

    def commit(self, end: dict) -> None:
        # Like Spark's Kafka source, progress lives in the checkpoint; nothing is committed to Kafka.
        pass

    def stop(self) -> None:
        self.offsets.close()
