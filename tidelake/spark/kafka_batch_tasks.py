"""The executor side of one pipeline batch: the functions Spark's Python workers run (mapInArrow; what they close
over is pickled), and the one row each staging task returns to the driver.

The batch is one Python task per group of offset ranges (:func:`batch_task`): it reads its ranges
(kafka_reader.read_ranges), parses the values into changes (changes.parse_changes_located) and stages them with the
table's ``DeltaWriter`` in the schema the driver read once for the batch (no table log I/O in a task). Its row
holds its staged files as typed Arrow values (writer.staged_file_type) and, when the driver must make sure no key
was staged by two tasks (upserts read by several tasks), the hashes of the keys it staged.

When keys do cross tasks (a producer that does not partition by the table's key), the batch is staged again the
shuffled way: tasks read and parse (:func:`read_and_parse_task`, or the ``tidelake-kafka`` data source and
:func:`parse_task`), Spark shuffles the changes by key, and :func:`stage_task` stages every change of a key in one
task, in (partition, offset) order.
"""
from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.changes import ORDER_COLUMNS, parse_changes_located
from tidelake.spark.kafka_options import KafkaSourceOptions
from tidelake.spark.kafka_reader import read_ranges
from tidelake.spark.offset_range import OffsetRange
from tidelake.spark.value_formats import ValueFormat
from tidelake.table import DataFile
from tidelake.table.writer import CHANGES, DeltaWriter, key_hashes, staged_file_type, staged_files_array, \
    staged_files_from_arrow

# The pipeline's own Kafka clients (offsets on the driver, readers in the tasks) log librdkafka's lines here, so
# that a broker going down mid-run is the pipeline's own one-line error rather than librdkafka's FAIL lines
# (the CLI shows them with --debug only).
LIBRDKAFKA_LOG = logging.getLogger("tidelake.pipeline.librdkafka")
TIMESTAMP_COLUMN = "timestamp"  # with metrics on, also read: produce times, for freshness


def staged_row_schema(key_fields: Sequence[pa.Field]) -> pa.Schema:
    """A staging task's one row: its staged files, and its keys' hashes (uint64 bytes; empty when not asked)."""
    return pa.schema([pa.field("files", pa.list_(staged_file_type(key_fields))),
                      pa.field("key_hashes", pa.binary())])


@dataclass(frozen=True)
class StagedBatch:
    """What the batch's tasks staged, read back on the driver."""
    files: list[DataFile]
    keys_shared: bool  # a key was staged by two tasks (only known for tasks that sent their key hashes)

    @classmethod
    def from_arrow(cls, rows: pa.Table) -> "StagedBatch":
        files = staged_files_from_arrow(rows.column("files").combine_chunks().flatten())
        hashes = [np.frombuffer(b, np.uint64) for b in rows.column("key_hashes").to_pylist() if b]
        every = np.concatenate(hashes) if len(hashes) > 1 else np.empty(0, np.uint64)
        return cls(files, len(np.unique(every)) < len(every))


def _ignore_interrupt() -> None:
    """Ctrl-C in a terminal sends SIGINT to the whole process group, Spark's Python workers included, and
    pyspark's worker restores Python's KeyboardInterrupt handler: the batch in progress would fail. The driver
    decides how to stop (after the current batch), so a task ignores SIGINT (pyspark's gateway launcher does
    the same for the JVM)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def parse_task(schema: pa.Schema, fmt: ValueFormat, primary_key: list[str], skipped, truncates, times=None,
               schema_ids=None):
    """Kafka rows -> changes. ``skipped``: a Spark accumulator collecting the records left out (on_error
    skip or dead-letter); None makes the first bad record fail the batch, naming it. ``truncates``: an
    accumulator collecting the (partition, offset) of Debezium truncate events, which the driver applies.
    ``times`` (metrics on): an accumulator of each Arrow batch's (oldest, newest) produce timestamp in ms.
    ``schema_ids`` (registry-backed formats): an accumulator of the writer schema ids decoded."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _ignore_interrupt()
        for batch in batches:
            yield from _parse(batch, schema, fmt, primary_key, skipped, truncates, times, schema_ids).to_batches()
    return parse


def _parse(batch: pa.RecordBatch, schema: pa.Schema, fmt: ValueFormat, primary_key: list[str], skipped, truncates,
           times, schema_ids) -> pa.Table:
    """One Arrow batch of Kafka rows -> its changes, reporting to the accumulators (see :func:`parse_task`)."""
    if times is not None and batch.num_rows:
        span = pc.min_max(batch.column(TIMESTAMP_COLUMN).cast(pa.int64()))
        if span["min"].is_valid:
            times.add([(span["min"].as_py() // 1000, span["max"].as_py() // 1000)])
    found: list[tuple[int, int]] = []
    ids: set[int] = set()
    changes, bad = parse_changes_located(batch, schema, fmt, primary_key, skip_bad=skipped is not None,
                                         truncates=found, schema_ids=ids)
    if bad:
        skipped.add(bad)
    if found:
        truncates.add(found)
    if ids and schema_ids is not None:
        schema_ids.add(sorted(ids))
    return changes


def _kafka_columns(fmt: ValueFormat, times) -> tuple[str, ...]:
    return fmt.kafka_columns + (() if times is None else (TIMESTAMP_COLUMN,))


def _staged_row(writer: DeltaWriter, schema: pa.Schema, changes: list[pa.Table], ordered: bool,
                send_key_hashes: bool) -> pa.RecordBatch:
    """Changes (the tasks's, in Kafka order within each partition; ``ordered``: in (partition, offset) order
    already) staged in ``schema`` -> the task's row."""
    key_fields = [schema.field(k) for k in writer.primary_key]
    rows = pa.concat_tables(changes) if changes else None
    files: list[DataFile] = []
    hashes = b""
    if rows is not None and rows.num_rows:
        if not ordered:  # the last change of a key wins: a key in two partitions goes by partition, then offset
            rows = rows.sort_by([(c, "ascending") for c in ORDER_COLUMNS])
        rows = rows.drop_columns(list(ORDER_COLUMNS))
        files = writer.stage_files(rows, CHANGES, schema)
        if send_key_hashes:
            hashes = np.unique(key_hashes(rows, writer.primary_key)).tobytes()
    staged = pa.ListArray.from_arrays(pa.array([0, len(files)], pa.int32()), staged_files_array(files, key_fields))
    return pa.RecordBatch.from_arrays([staged, pa.array([hashes], pa.binary())], schema=staged_row_schema(key_fields))


def batch_task(options: KafkaSourceOptions, groups: list[list[OffsetRange]], writer: DeltaWriter, schema: pa.Schema,
               fmt: ValueFormat, skipped, truncates, times=None, schema_ids=None, send_key_hashes: bool = False):
    """Input row ``id`` = i: read the offset ranges of group i, parse them and stage the changes in ``schema``
    (the accumulators as in :func:`parse_task`); one :func:`staged_row_schema` row per group."""
    columns = _kafka_columns(fmt, times)
    primary_key = list(writer.primary_key)
    librdkafka_level = LIBRDKAFKA_LOG.getEffectiveLevel()  # a logger is pickled by name, without its level

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _ignore_interrupt()
        LIBRDKAFKA_LOG.setLevel(librdkafka_level)
        for batch in batches:
            for i in batch.column("id").to_pylist():
                changes = [_parse(kafka_rows, schema, fmt, primary_key, skipped, truncates, times, schema_ids)
                           for kafka_rows in read_ranges(options, groups[i], columns=columns)]
                one_partition = len({r.partition for r in groups[i]}) == 1  # read in offset order
                yield _staged_row(writer, schema, changes, one_partition, send_key_hashes)
    return run


def read_and_parse_task(options: KafkaSourceOptions, groups: list[list[OffsetRange]], schema: pa.Schema,
                        fmt: ValueFormat, primary_key: list[str], skipped, truncates, times=None, schema_ids=None):
    """Input row ``id`` = i: read the offset ranges of group i and parse them into changes (to be shuffled)."""
    parse = parse_task(schema, fmt, primary_key, skipped, truncates, times, schema_ids)
    columns = _kafka_columns(fmt, times)
    librdkafka_level = LIBRDKAFKA_LOG.getEffectiveLevel()

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _ignore_interrupt()
        LIBRDKAFKA_LOG.setLevel(librdkafka_level)
        for batch in batches:
            for i in batch.column("id").to_pylist():
                yield from parse(read_ranges(options, groups[i], columns=columns))
    return read


def stage_task(writer: DeltaWriter, schema: pa.Schema):
    """Every change of this task's keys (shuffled here, in no order) -> staged files in ``schema``; one
    :func:`staged_row_schema` row."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _ignore_interrupt()
        received = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        yield _staged_row(writer, schema, received, False, False)
    return run
