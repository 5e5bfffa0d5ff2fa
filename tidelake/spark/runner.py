"""The pipeline runner: Kafka topic -> PySpark -> tidelake table, a DStream-like driver loop (SPEC P2).

Every batch interval the driver

1. asks the broker for each partition's earliest/latest offsets (the paper's M and N),
2. plans one offset range [start, end) per partition, end = min(latest, start + max_rate_per_partition x
   batch_interval) (and, with ``once``, the latest offsets seen at start: Spark's AvailableNow),
3. reads the table's log once (the batch's schema) and runs one Spark job of one Python task per group of
   ranges (kafka_batch_tasks.py): each reads exactly its ranges (kafka_reader.py, the Kafka source's reader),
   parses the values into changes (changes.py) and stages the table's delta files, and returns them as typed
   Arrow values. Upserts read by several tasks also return their keys' hashes: a key staged by two tasks (its
   records in two Kafka partitions) would be two changes of one key in one version, so such a batch is staged
   again with a shuffle by primary key (every change of a key in one task), and so is the rest of the run,
4. commits every task's files in ONE table commit on the driver (table_source.publish),
5. records its progress where its offset mode (offset_modes.py) keeps it.

Records stay in Arrow from the reader to the staged file, in one Python worker. Configuration:
pipeline_config.py (``tidelake pipeline example``).
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NoReturn

import pyarrow as pa

from tidelake.observability.pipeline_stats import PipelineStats
from tidelake.observability.server import parse_listen
from tidelake.spark.changes import changes_schema
from tidelake.spark.ddl_schema import parse_ddl_schema
from tidelake.spark.dead_letter import BadRecord, DeadLetterQueue
from tidelake.spark.decode_errors import BadChangeEvent, RegistryUnavailable
from tidelake.spark.kafka_batch_tasks import (LIBRDKAFKA_LOG, TIMESTAMP_COLUMN, StagedBatch, batch_task, parse_task,
                                              read_and_parse_task, stage_task, staged_row_schema)
from tidelake.spark.kafka_options import KafkaSourceOptions
from tidelake.spark.offset_modes import (AutoCommit, Batch, CommitAfterWrite, Correction, ExactlyOnce,
                                         OffsetMode, SimilarExactlyOnce, correct_offsets)
from tidelake.spark.offset_range import OffsetRange, cap_end_offsets, group_ranges, plan_ranges
from tidelake.spark.offset_stores import BrokerOffsets, ClientOffsetFile, Offsets
from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError
from tidelake.spark.pipeline_yaml import load_pipeline_yaml
from tidelake.spark.registered_table_schema import RegisteredTableSchema
from tidelake.spark.session import spark_session
from tidelake.spark.task_failures import PoisonRecord, TaskFailed, task_error, worker_exception
from tidelake.spark.sink_table import SinkTable
from tidelake.spark.table_source import StagedFiles, publish
from tidelake.table import DataFile, Table
from tidelake.table.table import with_columns

log = logging.getLogger("tidelake.pipeline")

__all__ = ["Pipeline", "PipelineConfig", "PipelineConfigError", "BatchResult", "RunSummary", "PoisonRecord",
           "TaskFailed", "abort"]

ONE_TASK_MAX_RECORDS = 20_000  # a batch this small is read, parsed and staged by one task


@dataclass
class BatchResult:
    batch_id: int
    ranges: list[OffsetRange]
    records: int  # Kafka records read
    upserts: int
    deletes: int
    version: int | None  # table version that holds the batch
    seconds: float
    commit_seconds: float  # the table commit (with any automatic table maintenance it runs)
    skipped: int = 0  # records that are not change events, left out (on_error: skip | dead-letter)
    dead_lettered: int = 0  # of those, copied to the dead-letter queue by this batch
    oldest_record_ms: int | None = None  # produce timestamps of the batch's records (metrics on only)
    newest_record_ms: int | None = None
    committed_at_ms: int = 0  # wall clock when the table commit returned


@dataclass
class RunSummary:
    mode: str
    start_offsets: Offsets
    end_offsets: Offsets
    corrections: list[Correction]
    batches: list[BatchResult] = field(default_factory=list)
    stopped_by: str = ""  # once-complete | max-batches | signal

    @property
    def records(self) -> int:
        return sum(b.records for b in self.batches)

    @property
    def skipped(self) -> int:
        return sum(b.skipped for b in self.batches)

    @property
    def dead_lettered(self) -> int:
        return sum(b.dead_lettered for b in self.batches)


class _ListAccumulator:
    """Spark's AccumulatorParam interface for lists, concatenated: the bad records the tasks left out, as
    (partition, offset, reason)."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):
        a.extend(b)
        return a


# ---------------------------------------------------------------------------------------------------- driver

class Pipeline:
    """``Pipeline.from_yaml(path).run(once=True)``; see the module docstring for what a run does."""

    def __init__(self, config: PipelineConfig | Mapping[str, Any], spark=None, task_failure_logs: bool = False):
        self.config = config if isinstance(config, PipelineConfig) else PipelineConfig.from_dict(config)
        self._spark = spark
        # a session started here logs a failed task's stacks only when asked: its exception reaches run()'s caller
        self._task_failure_logs = task_failure_logs
        self._stop = threading.Event()
        self._skipped_accumulator = None
        self._truncates_accumulator = None
        self._times_accumulator = None
        self._schema_ids_accumulator = None
        #: keys were found in several Kafka partitions: batches are shuffled by key before staging
        self._shuffle_keys = False
        self.format = self.config.value_format()
        #: the sink table's schema from the schema registry (registry-backed formats only)
        self.registered = RegisteredTableSchema(self.format, self.config.source.topic) \
            if self.format.registry_decoder is not None else None
        self.sink_table = SinkTable(self.config, self.registered, self.arrow_schema)
        metrics = self.config.metrics
        #: what the driver loop counts (None unless metrics.listen is set); served by ``observer`` during run()
        self.stats = PipelineStats(self.config.source.batch_interval, metrics.ready_intervals) \
            if metrics.listen else None
        self.observer = None

    @classmethod
    def from_yaml(cls, path: str | os.PathLike, spark=None) -> "Pipeline":
        return cls(load_pipeline_yaml(path), spark=spark)

    @property
    def _skipped(self):
        """The accumulator of records left out (on_error: skip | dead-letter), or None: a bad record fails
        the batch."""
        if self.config.on_error == "fail":
            return None
        if self._skipped_accumulator is None:
            self._skipped_accumulator = self.spark().sparkContext.accumulator([], _ListAccumulator())
        return self._skipped_accumulator

    @property
    def _truncates(self):
        """The accumulator of Debezium truncate events' (partition, offset)."""
        if self._truncates_accumulator is None:
            self._truncates_accumulator = self.spark().sparkContext.accumulator([], _ListAccumulator())
        return self._truncates_accumulator

    @property
    def _times(self):
        """With metrics on, the accumulator of (oldest, newest) produce timestamps of the records parsed."""
        if self.stats is None:
            return None
        if self._times_accumulator is None:
            self._times_accumulator = self.spark().sparkContext.accumulator([], _ListAccumulator())
        return self._times_accumulator

    @property
    def _schema_ids(self):
        """With a registry-backed format, the accumulator of the writer schema ids the tasks decoded."""
        if self.registered is None:
            return None
        if self._schema_ids_accumulator is None:
            self._schema_ids_accumulator = self.spark().sparkContext.accumulator([], _ListAccumulator())
        return self._schema_ids_accumulator

    @property
    def metrics_url(self) -> str | None:
        """``http://HOST:PORT`` of the metrics listener while run() runs (None otherwise)."""
        return self.observer.url if self.observer is not None else None

    def _dead_letter_queue(self) -> DeadLetterQueue | None:
        cfg = self.config
        if cfg.on_error != "dead-letter":
            return None
        return DeadLetterQueue(cfg.source.bootstrap_servers, cfg.dead_letter_topic, cfg.source.topic,
                               dict(cfg.source.kafka))

    def stop(self) -> None:
        """Graceful stop (ssc.stop(true, true)): finish the current batch, then return from run()."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- spark / table set-up
    def spark(self):
        if self._spark is None:
            self._spark = spark_session(self.config.spark, f"tidelake-pipeline-{self.config.source.topic}",
                                        task_failure_logs=self._task_failure_logs)
        return self._spark

    def arrow_schema(self) -> pa.Schema:
        """``sink.schema``'s columns (checked when the config was loaded: ddl_schema.py, Spark's DDL)."""
        return parse_ddl_schema(self.config.sink.schema)

    def open_table(self) -> Table:
        """Open the sink table, creating it if absent (sink_table.py)."""
        return self.sink_table.open()

    def offset_mode(self, table: Table, broker: BrokerOffsets) -> OffsetMode:
        cfg, src = self.config, self.config.source
        if cfg.offsets == "auto":
            return AutoCommit(broker)
        if cfg.offsets == "commit-after":
            return CommitAfterWrite(broker, sync=cfg.commit == "sync")
        if cfg.offsets == "seo":
            return SimilarExactlyOnce(ClientOffsetFile(cfg.seo_dir, src.group_id, src.topic), broker)
        return ExactlyOnce(table, cfg.app_id, src.topic, broker)

    # -- one batch
    def _accumulators(self) -> list:
        return [a for a in (self._skipped, self._truncates, self._times, self._schema_ids) if a is not None]

    def _fused(self, writer, options: KafkaSourceOptions, ranges: list[OffsetRange], schema: pa.Schema):
        """The batch as one Python task per group of ranges (read, parse, stage): a DataFrame of their
        staged_row_schema rows; upserts read by several tasks send their key hashes."""
        from pyspark.sql.pandas.types import from_arrow_schema

        small = sum(r.size for r in ranges) <= ONE_TASK_MAX_RECORDS
        groups = group_ranges(ranges, num_groups=1 if small else options.num_input_partitions, min_partitions=None)
        send_key_hashes = self.config.sink.mode == "upsert" and len(groups) > 1
        task = batch_task(options, groups, writer, schema, self.format, self._skipped, self._truncates, self._times,
                          self._schema_ids, send_key_hashes)
        out = from_arrow_schema(staged_row_schema([schema.field(k) for k in writer.primary_key]))
        return self.spark().range(0, len(groups), 1, len(groups)).mapInArrow(task, out)

    def _shuffled(self, writer, options: KafkaSourceOptions, ranges: list[OffsetRange], schema: pa.Schema):
        """The batch read and parsed by one set of tasks, shuffled by key, staged by another: a DataFrame of
        staged_row_schema rows (every change of a key staged by one task)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        spark, src, fmt = self.spark(), self.config.source, self.format
        primary_key = list(writer.primary_key)
        parsed = from_arrow_schema(changes_schema(schema))
        if src.reader == "datasource":
            topic = src.topic
            reader = (spark.read.format("tidelake-kafka")
                      .option("kafka.bootstrap.servers", src.bootstrap_servers)
                      .option("assign", json.dumps({topic: [r.partition for r in ranges]}))
                      .option("startingOffsets", json.dumps({topic: {str(r.partition): r.start for r in ranges}}))
                      .option("endingOffsets", json.dumps({topic: {str(r.partition): r.end for r in ranges}}))
                      .option("failOnDataLoss", "true"))
            for k, v in src.kafka.items():
                reader = reader.option(f"kafka.{k}", v)
            rows = reader.load().select(*fmt.kafka_columns, *(() if self._times is None else (TIMESTAMP_COLUMN,)))
            changes = rows.mapInArrow(parse_task(schema, fmt, primary_key, self._skipped, self._truncates,
                                                 self._times, self._schema_ids), parsed)
        else:
            groups = group_ranges(ranges, num_groups=options.num_input_partitions, min_partitions=None)
            task = read_and_parse_task(options, groups, schema, fmt, primary_key, self._skipped, self._truncates,
                                       self._times, self._schema_ids)
            changes = spark.range(0, len(groups), 1, len(groups)).mapInArrow(task, parsed)
        if self.config.sink.mode == "upsert":
            # Every change of one key in one task, so the table's last-change-per-key rule sees all of them.
            changes = changes.repartition(spark.sparkContext.defaultParallelism, *primary_key)
        out = from_arrow_schema(staged_row_schema([schema.field(k) for k in primary_key]))
        return changes.mapInArrow(stage_task(writer, schema), out)

    def _stage(self, table: Table, options: KafkaSourceOptions, ranges: list[OffsetRange],
               schema: pa.Schema) -> list[DataFile]:
        """Read, parse and stage one batch in ``schema`` (the table's, with the columns its commit may add);
        the staged files."""
        writer = table.writer
        try:
            if self.config.source.reader != "datasource" and not self._shuffle_keys:
                marks = [(a, len(a.value)) for a in self._accumulators()]
                staged = StagedBatch.from_arrow(self._fused(writer, options, ranges, schema).toArrow())
                if not staged.keys_shared:
                    return staged.files
                # Not published, never visible: only the space is reclaimed; what the tasks reported is
                # reported again by the shuffled staging.
                for f in staged.files:
                    table.storage.delete(f.path)
                for accumulator, seen in marks:
                    del accumulator.value[seen:]
                self._shuffle_keys = True
                log.info("%s: records of one key are in several partitions; this batch and the next are "
                         "shuffled by key before staging", self.config.source.topic)
            return StagedBatch.from_arrow(self._shuffled(writer, options, ranges, schema).toArrow()).files
        except Exception as e:   # a task's exception reaches the driver as Spark's PythonException
            bad = task_error(e, BadChangeEvent)
            if bad is not None:
                raise PoisonRecord(f"{self.config.source.topic} {bad} (on_error: fail stops here; "
                                   f"on_error: skip leaves such records out)") from e
            unavailable = task_error(e, RegistryUnavailable)
            if unavailable is not None:
                raise RegistryUnavailable(f"{unavailable} (nothing of the batch was committed)") from e
            reason = worker_exception(e)
            if reason is None:
                raise
            read = ", ".join(f"{r.partition}:{r.start}-{r.end}" for r in ranges)
            raise TaskFailed(f"a Spark task failed on {self.config.source.topic} (partition:offsets {read}), "
                             f"nothing of the batch committed: {reason}") from e

    def _run_batch(self, table: Table, options: KafkaSourceOptions, mode: OffsetMode, batch: Batch) -> BatchResult:
        began = time.monotonic()
        seen = len(self._skipped.value) if self._skipped is not None else 0
        truncates_seen = len(self._truncates.value)
        times_seen = len(self._times.value) if self._times is not None else 0
        schema_ids_seen = len(self._schema_ids.value) if self._schema_ids is not None else 0
        # the batch's one read of the table's log (the commit reads it again, as every commit does)
        current = table.schema_at(table.refresh())
        candidates = self.sink_table.batch_columns(current)
        schema = with_columns(current, candidates)
        staged = self._stage(table, options, batch.ranges, schema)
        bad = [BadRecord(*b) for b in self._skipped.value[seen:]] if self._skipped is not None else []
        operation = "insert" if self.config.sink.mode == "append" else "upsert"
        truncates = self._truncates.value[truncates_seen:]
        if truncates:
            # A Debezium truncate empties the table: the batch commits as an overwrite holding only the
            # changes after it — in its partition those past its offset, in the others all of them (Kafka
            # orders nothing across partitions; a CDC topic that truncates is read in source order when it
            # has one partition). The first staging's files are left unpublished (orphans expire removes).
            last = {}
            for p, o in truncates:
                last[p] = max(last.get(p, -1), o)
            after = [OffsetRange(r.topic, r.partition, max(r.start, last[r.partition] + 1), r.end)
                     if r.partition in last else r for r in batch.ranges]
            log.info("batch %d: Debezium truncate of %s at %s: the table is emptied in this batch's commit",
                     batch.batch_id, self.config.source.topic,
                     ", ".join(f"partition {p} offset {o}" for p, o in sorted(last.items())))
            skipped_again = len(self._skipped.value) if self._skipped is not None else 0
            staged = self._stage(table, options, [r for r in after if r.end > r.start], schema)
            if self._skipped is not None:   # bad records were counted by the first staging
                del self._skipped.value[skipped_again:]
            operation = "overwrite"
        added = self.sink_table.columns_to_add(batch.batch_id, candidates,
                                               set(self._schema_ids.value[schema_ids_seen:]) if candidates else set())
        commit = mode.table_commit(batch)
        dead_lettered = self._dead_letter(bad, commit, mode)
        if bad:
            log.warning("batch %d: %d record(s) of %s are not change events: %s (on_error: %s)", batch.batch_id,
                        len(bad), self.config.source.topic,
                        f"{dead_lettered} dead-lettered" if self.config.on_error == "dead-letter" else "skipped",
                        self.config.on_error)
        committing = time.monotonic()
        version = publish(table, [StagedFiles(files=staged, rows=sum(f.rows for f in staged))], operation=operation,
                          add_columns=added, **commit)
        done = time.monotonic()
        committed_at_ms = int(time.time() * 1000)
        deletes = sum(f.deletes for f in staged)
        spans = self._times.value[times_seen:] if self._times is not None else []
        return BatchResult(batch.batch_id, batch.ranges, sum(r.size for r in batch.ranges),
                           sum(f.rows for f in staged) - deletes, deletes, version, done - began, done - committing,
                           len(bad), dead_lettered, min((a for a, _ in spans), default=None),
                           max((b for _, b in spans), default=None), committed_at_ms)

    def _dead_letter(self, bad: list[BadRecord], commit: dict[str, Any], mode: OffsetMode) -> int:
        """Copy this batch's bad records to the dead-letter queue (on_error: dead-letter) before the table
        commit; with exactly-once, skip what an uncommitted earlier attempt of the batch already wrote and
        record the queue's end and the running counts in the commit."""
        dlq = self._dead_letter_queue()
        extra = commit.get("app_extra")
        previous = (mode.last_extra() if isinstance(mode, ExactlyOnce) else None) or {}
        written = 0
        if dlq is not None and bad:
            dlq.ensure_topic()
            # exactly-once: what lies past the end the last commit recorded (all of it before a first
            # commit) was written by an attempt that never committed; other modes replay at least once
            recorded = previous.get("dead_letter_end", 0)
            already = dlq.already_written(recorded) if isinstance(mode, ExactlyOnce) else set()
            written = dlq.write(bad, already)
        if extra is not None:
            extra["skipped_total"] = previous.get("skipped_total", 0) + len(bad)
            extra["dead_lettered_total"] = previous.get("dead_lettered_total", 0) + (len(bad) if dlq else 0)
            if dlq is not None and bad:
                extra["dead_letter_end"] = dlq.end_offset()
            elif "dead_letter_end" in previous:
                extra["dead_letter_end"] = previous["dead_letter_end"]
        return len(bad) if dlq is not None else 0

    def _plan(self, start: Offsets, latest: Offsets, stop_at: Offsets | None) -> list[OffsetRange]:
        """This batch's ranges: towards the log end (or ``stop_at``), at most rate x interval per partition."""
        topic = self.config.source.topic
        target = {(topic, p): min(o, stop_at.get(p, o)) if stop_at is not None else o for p, o in latest.items()}
        begin = {(topic, p): o for p, o in start.items()}
        end = cap_end_offsets(begin, target, max_total=None,
                              max_per_partition=self.config.source.max_records_per_partition)
        return plan_ranges(begin, end)

    # -- the loop
    def run(self, once: bool = False, max_batches: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> RunSummary:
        """Run batches until stopped (``stop()``/SIGTERM between batches), ``max_batches`` batches were run,
        or, with ``once``, everything available at the start has been processed. With ``metrics.listen``, the
        metrics listener serves from the start to the end of the run. ``progress(done, total)`` (with
        ``once``): records processed of those available at the start, after each batch."""
        if self.stats is None:
            return self._run(once, max_batches, progress)
        from tidelake.observability.pipeline_observer import PipelineObserver
        host, port = parse_listen(self.config.metrics.listen, "metrics.listen")
        self.observer = PipelineObserver(host, port, self.stats, pipeline=self.config.app_id,
                                         topic=self.config.source.topic).start()
        log.info("pipeline %s: metrics and health on %s (/metrics, /health/live, /health/ready)",
                 self.config.app_id, self.observer.url)
        try:
            return self._run(once, max_batches, progress)
        finally:
            self.observer.stop()
            self.observer = None

    def _observe(self, result: BatchResult | None, latest: Offsets, position: Offsets) -> None:
        """One pass of the loop done (``result``: its committed batch, if any): count it."""
        stats = self.stats
        if stats is None:
            return
        if result is not None:
            stats.batch(records=result.records, upserts=result.upserts, deletes=result.deletes,
                        skipped=result.skipped, dead_lettered=result.dead_lettered, seconds=result.seconds,
                        commit_seconds=result.commit_seconds, version=result.version,
                        committed_at_ms=result.committed_at_ms, oldest_record_ms=result.oldest_record_ms,
                        newest_record_ms=result.newest_record_ms)
        stats.pass_done({p: max(0, latest[p] - position.get(p, latest[p])) for p in latest})

    def _run(self, once: bool, max_batches: int | None,
             progress: Callable[[int, int], None] | None = None) -> RunSummary:
        cfg, src = self.config, self.config.source
        table = self.open_table()
        self.format = self.sink_table.with_record_key(self.format, table)
        if self.observer is not None:
            self.observer.watch_table(table)
        if src.reader == "datasource":
            import tidelake.spark

            tidelake.spark.register(self.spark())
        with BrokerOffsets(src.bootstrap_servers, src.topic, src.group_id,
                           {"logger": LIBRDKAFKA_LOG, **src.kafka}) as broker:
            mode = self.offset_mode(table, broker)
            partitions = broker.partitions()
            earliest, latest = broker.watermarks(partitions)
            stored = mode.stored()
            start, corrections = correct_offsets(stored, earliest, latest)
            for c in corrections:
                if c.kind != "none-stored" or stored is not None:
                    log.warning("partition %d: stored offset %s out of range, corrected (%s) to %d",
                                c.partition, c.stored, c.kind, c.corrected)
            summary = RunSummary(cfg.offsets, dict(start), dict(start), corrections)
            stop_at = dict(latest) if once else None
            backlog = sum(max(0, stop_at[p] - start[p]) for p in stop_at) if once else 0
            if once and progress is not None:
                progress(0, backlog)
            batch_id = mode.next_batch_id()
            log.info("pipeline %s (%s): start %s%s", cfg.app_id, cfg.offsets, start,
                     f", until {stop_at}" if once else "")
            first = True
            while True:
                if self.stopping:
                    summary.stopped_by = "signal"
                    break
                if max_batches is not None and len(summary.batches) >= max_batches:
                    summary.stopped_by = "max-batches"
                    break
                tick = time.monotonic()
                if not first:
                    earliest, latest = broker.watermarks(partitions)
                    for p in partitions:  # retention overtook us mid-run: Kafka's earliest reset
                        if start[p] < earliest[p]:
                            log.warning("partition %d: offset %d below log start %d, skipping ahead",
                                        p, start[p], earliest[p])
                            start[p] = earliest[p]
                first = False
                ranges = self._plan(start, latest, stop_at)
                if once and not ranges:
                    summary.stopped_by = "once-complete"
                    break
                mode.before_read(latest)
                if not ranges:
                    self._observe(None, latest, start)
                if ranges:
                    batch = Batch.after(batch_id, start, ranges)
                    result = self._run_batch(table, broker.source_options, mode, batch)
                    mode.after_write(batch)
                    start = dict(batch.end)
                    summary.batches.append(result)
                    summary.end_offsets = dict(start)
                    self._observe(result, latest, start)
                    if once and progress is not None:
                        progress(summary.records, backlog)
                    log.info("batch %d: %d records (%d upserts, %d deletes) -> version %s in %.2fs; next %s",
                             batch_id, result.records, result.upserts, result.deletes, result.version,
                             result.seconds, start)
                    batch_id += 1
                if not once:
                    self._stop.wait(max(0.0, src.batch_interval - (time.monotonic() - tick)))
            if once:
                mode.finish()
        return summary


def abort(spark) -> NoReturn:
    """A second SIGTERM/SIGINT (cli/signals.py): the pipeline stops at once, exit 130.

    ``os._exit``: an exception raised inside a Py4J call makes Py4J log its traces, and nothing needs
    unwinding: the batch in progress is not committed (table commits are atomic) and the next run reads it
    again; the JVM, whose stdin is our pipe, exits with us. Its logging is switched off first: its shutdown
    races the tasks still reporting and would print their rejected status updates as Java stack traces, and its
    error stream is closed for threads that die uncaught as their Python peer goes."""
    def silence_jvm() -> None:
        try:
            spark.sparkContext.setLogLevel("OFF")
            # a JVM thread that dies uncaught (e.g. the one serving a result to the Python side now gone) prints
            # its stack to System.err directly, not through the logging just switched off
            jvm = spark.sparkContext._jvm
            jvm.java.lang.System.setErr(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))
        except Exception:  # the JVM may already be gone; the abort goes on regardless
            pass

    # bounded: a wedged JVM must not hold up the abort the user asked for
    quiet = threading.Thread(target=silence_jvm, daemon=True)
    quiet.start()
    quiet.join(2.0)
    sys.stdout.flush()
    sys.stderr.write("tidelake: pipeline aborted; the batch in progress was not committed and a "
                     "restart reads it again\n")
    sys.stderr.flush()
    os._exit(130)
