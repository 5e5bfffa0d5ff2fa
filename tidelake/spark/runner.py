"""The pipeline runner: Kafka topic -> PySpark -> tidelake table, with the offset modes of seed 001 (SPEC P2).

A DStream-like driver loop. Every batch interval the driver

1. asks the broker for each partition's earliest/latest offsets (the paper's M and N),
2. plans one offset range [from, until) per partition, until = min(latest, from + max_rate_per_partition x
   batch_interval) (and, with ``once``, the latest offsets seen at start: Spark's AvailableNow),
3. reads exactly those ranges with Spark (the ``tidelake-kafka`` data source in batch mode with explicit
   startingOffsets/endingOffsets JSON when it is available, else a direct confluent-kafka read inside the
   executors), parses the values (Debezium envelope or plain JSON) and folds them to the last change per key,
4. has the executors stage the table's delta files and the driver commit them in ONE table commit,
5. records its progress where its offset mode keeps it.

Offset modes (``offsets:`` in the YAML), modelled on what the real systems do:

* ``auto`` - the paper's experiment 1 (``enable.auto.commit=true``): the driver's consumer seeks to the log
  end to learn the latest offsets, and auto-commit commits that position; so each batch commits the *latest*
  offsets before the batch is processed. At-most-once: an interruption loses everything between the last
  processed record and the log end (CURRENT-OFFSET = LOG-END-OFFSET while data is unprocessed).
* ``commit-after`` - experiment 2 (``CanCommitOffsets.commitAsync(offsetRanges)`` after processing): the
  batch's ranges are queued after the write and sent with the next batch, as Spark's commitAsync does; a
  stop between batches drops the queue, so a restart re-reads one batch: duplicates = partitions x interval x
  rate (Table 1). ``commit: sync`` commits right after the write instead (duplicates only on a crash between
  the write and the commit). A ``once`` run flushes the queue when it finishes.
* ``seo`` - experiment 3: offsets in ``<seo_dir>/<group>/<topic>/gtoffset``: none -> earliest; else corrected
  into [M, N] (low/high out-of-range); the file is rewritten atomically after each batch is written.
  No loss or duplicate on a graceful stop; a crash between the write and the file update duplicates a batch.
* ``exactly-once`` - the next offsets and the batch id are committed inside the table commit that holds the
  batch (``commit_staged(app_id=, batch_id=, app_extra={"offsets": ...})``); a restart resumes from
  ``table.app_state(app_id)``. No loss, no duplicate, whatever the moment of a kill -9.

Every mode also commits the group's offsets to the broker (after the batch) so lag is visible.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import pyarrow as pa
import yaml

from tidelake.spark.debezium import (OP_COLUMN, PARSERS, changes_to_arrow, fold_last_per_key)
from tidelake.spark.offsets import (BrokerOffsets, GtoffsetFile, OffsetRange, Offsets, advance,
                                    correct_offsets, offsets_from_app_state, offsets_json, parse_duration,
                                    plan_ranges)

log = logging.getLogger("tidelake.pipeline")

MODES = ("auto", "commit-after", "seo", "exactly-once")
KAFKA_ROW_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
                    "timestamp timestamp, timestampType int")


class PipelineConfigError(ValueError):
    pass


class PipelineFencedError(RuntimeError):
    """Another instance of the same exactly-once pipeline committed the batch this one was writing."""


@dataclass
class SourceConfig:
    bootstrap_servers: str
    topic: str
    group_id: str
    max_rate_per_partition: int | None = None  # records per second per partition (the paper's maxRatePerPartition)
    batch_interval: float = 2.0  # seconds
    reader: str = "auto"  # auto | datasource | direct
    kafka: dict[str, str] = field(default_factory=dict)  # extra client settings (kafka.* in Spark's source)

    @property
    def max_records_per_partition(self) -> int | None:
        """Per-batch cap: max rate x batch interval (at least one record, as Spark's DStream does)."""
        if self.max_rate_per_partition is None:
            return None
        return max(1, int(self.max_rate_per_partition * self.batch_interval))


@dataclass
class SinkConfig:
    table: str
    format: str = "debezium-json"  # debezium-json | json
    primary_key: list[str] = field(default_factory=list)
    schema: str = ""  # Spark DDL: "id long, amount long"
    buckets: int = 4
    mode: str = "upsert"  # upsert | append (json only: every value inserted)
    properties: dict[str, str] = field(default_factory=dict)
    app_id: str | None = None  # exactly-once: the name the table keeps this pipeline's offsets under


@dataclass
class PipelineConfig:
    source: SourceConfig
    sink: SinkConfig
    offsets: str = "exactly-once"
    seo_dir: str | None = None
    commit: str = "async"  # commit-after only: async (Spark's commitAsync, the paper) | sync
    spark: dict[str, Any] = field(default_factory=dict)  # {master: local[2], conf: {...}}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], base_dir: str | os.PathLike | None = None) -> "PipelineConfig":
        """Validate a parsed YAML document; relative paths are taken relative to ``base_dir``."""
        try:
            src, snk = dict(raw["source"]), dict(raw["sink"])
        except (KeyError, TypeError) as e:
            raise PipelineConfigError("a pipeline needs 'source' and 'sink' sections") from e
        for key in ("bootstrap_servers", "topic", "group_id"):
            if not src.get(key):
                raise PipelineConfigError(f"source.{key} is required")
        if "batch_interval" in src:
            src["batch_interval"] = parse_duration(src["batch_interval"])
        if "kafka" in src:
            src["kafka"] = {str(k): str(v) for k, v in (src["kafka"] or {}).items()}
        try:
            source = SourceConfig(**src)
        except TypeError as e:
            raise PipelineConfigError(f"source: {e}") from e
        if source.reader not in ("auto", "datasource", "direct"):
            raise PipelineConfigError("source.reader must be auto, datasource or direct")
        if isinstance(snk.get("primary_key"), str):
            snk["primary_key"] = [snk["primary_key"]]
        if "properties" in snk:
            snk["properties"] = {str(k): str(v) for k, v in (snk["properties"] or {}).items()}
        try:
            sink = SinkConfig(**snk)
        except TypeError as e:
            raise PipelineConfigError(f"sink: {e}") from e
        if sink.format not in PARSERS:
            raise PipelineConfigError(f"sink.format must be one of {sorted(PARSERS)}")
        if sink.mode not in ("upsert", "append"):
            raise PipelineConfigError("sink.mode must be upsert or append")
        if sink.mode == "upsert" and not sink.primary_key:
            raise PipelineConfigError("sink.primary_key is required")
        if sink.format == "debezium-json" and sink.mode != "upsert":
            raise PipelineConfigError("debezium-json needs sink.mode upsert")
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        sink.table = str((base / sink.table).resolve())
        mode = raw.get("offsets", "exactly-once")
        if mode not in MODES:
            raise PipelineConfigError(f"offsets must be one of {', '.join(MODES)}")
        seo_dir = raw.get("seo_dir")
        if mode == "seo":
            if not seo_dir:
                raise PipelineConfigError("offsets: seo needs seo_dir")
        if seo_dir:
            seo_dir = str((base / seo_dir).resolve())
        commit = raw.get("commit", "async")
        if commit not in ("async", "sync"):
            raise PipelineConfigError("commit must be async or sync")
        return cls(source=source, sink=sink, offsets=mode, seo_dir=seo_dir, commit=commit,
                   spark=dict(raw.get("spark") or {}))

    @property
    def app_id(self) -> str:
        return self.sink.app_id or f"pipeline:{self.source.group_id}:{self.source.topic}"


@dataclass
class BatchResult:
    batch_id: int
    ranges: list[OffsetRange]
    records: int  # Kafka records read
    upserts: int
    deletes: int
    version: int | None  # table version that holds the batch
    seconds: float


@dataclass
class RunSummary:
    mode: str
    start_offsets: Offsets
    end_offsets: Offsets
    corrections: list
    batches: list[BatchResult] = field(default_factory=list)
    stopped_by: str = ""  # once-complete | max-batches | signal

    @property
    def records(self) -> int:
        return sum(b.records for b in self.batches)


# ----------------------------------------------------------------------------------------------- executors
# Functions below run inside Spark's Python workers (mapInArrow); they must be module-level (picklable).

def _read_ranges_direct(bootstrap: str, client_conf: dict[str, str], idle_timeout: float):
    """mapInArrow function: each input row is one offset range; yields Spark's Kafka rows for it."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        for batch in batches:
            for r in batch.to_pylist():
                yield from _read_one_range(Consumer, KafkaError, TopicPartition, bootstrap, client_conf,
                                           idle_timeout, r["topic"], r["partition"], r["from_offset"],
                                           r["until_offset"])
    return read


def _read_one_range(Consumer, KafkaError, TopicPartition, bootstrap, client_conf, idle_timeout,
                    topic, partition, begin, until) -> Iterator[pa.RecordBatch]:
    conf = {"bootstrap.servers": bootstrap, "group.id": f"tidelake-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "error"}
    conf.update(client_conf)
    consumer = Consumer(conf)
    cols: dict[str, list] = {k: [] for k in ("key", "value", "offset", "timestamp", "timestampType")}

    def flush() -> pa.RecordBatch:
        n = len(cols["offset"])
        out = pa.RecordBatch.from_arrays(
            [pa.array(cols["key"], pa.binary()), pa.array(cols["value"], pa.binary()),
             pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()),
             pa.array(cols["offset"], pa.int64()), pa.array(cols["timestamp"], pa.timestamp("us", "UTC")),
             pa.array(cols["timestampType"], pa.int32())],
            names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"])
        for v in cols.values():
            v.clear()
        return out

    try:
        consumer.assign([TopicPartition(topic, partition, begin)])
        position, last_progress = begin, time.monotonic()
        while position < until:
            messages = consumer.consume(num_messages=5000, timeout=0.5)
            if not messages and time.monotonic() - last_progress > idle_timeout:
                raise TimeoutError(f"no records from {topic}[{partition}] at {position} "
                                   f"(want until {until}) for {idle_timeout}s")
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # At the log end: offsets below until that never came are gaps (compaction,
                        # transaction markers) - the range is complete.
                        if m.offset() >= until:
                            position = until
                        continue
                    raise RuntimeError(f"reading {topic}[{partition}]: {err}")
                offset = m.offset()
                if offset >= until:
                    position = until
                    break
                ts_type, ts = m.timestamp()
                cols["key"].append(m.key())
                cols["value"].append(m.value())
                cols["offset"].append(offset)
                cols["timestamp"].append(ts * 1000 if ts >= 0 else None)
                cols["timestampType"].append(max(ts_type - 1, 0))  # librdkafka 1/2 -> Kafka 0/1
                position, last_progress = offset + 1, time.monotonic()
            if len(cols["offset"]) >= 20000:
                yield flush()
        if cols["offset"]:
            yield flush()
    finally:
        consumer.close()


def _parse_values(fmt: str, schema: pa.Schema):
    """mapInArrow function: Kafka rows (value, partition, offset) -> typed rows + op + ordering columns."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            table = changes_to_arrow(batch.column("value").to_pylist(), batch.column("partition").to_pylist(),
                                     batch.column("offset").to_pylist(), schema, fmt)
            yield from table.to_batches()
    return parse


def _fold_and_stage(table_path: str, primary_key: list[str], mode: str):
    """mapInArrow function: one Spark partition holds every change of its keys; keep the last per key and
    stage the table's delta files. Yields one row per staged file (its DataFile as JSON) for the driver."""

    def stage(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from tidelake.table import Table

        received = list(batches)
        files: list[str] = []
        counts = {"upsert": 0, "delete": 0}
        if received and sum(b.num_rows for b in received):
            changes = pa.Table.from_batches(received)
            table = Table.open(table_path)
            if mode == "append":
                rows = changes.drop_columns([c for c in changes.column_names if c.startswith("_")])
                parts = [("insert", rows)]
            else:
                upserts, deletes = fold_last_per_key(changes, primary_key)
                parts = [("upsert", upserts), ("delete", deletes)]
            for op, data in parts:
                if data.num_rows:
                    counts["delete" if op == "delete" else "upsert"] += data.num_rows
                    files += [json.dumps(f.to_dict()) for f in table.stage_files(data, op=op)]
        # One row per staged file, plus one row (file null) carrying this partition's counts.
        yield pa.RecordBatch.from_pydict({
            "file": pa.array(files + [None], pa.string()),
            "upserts": pa.array([0] * len(files) + [counts["upsert"]], pa.int64()),
            "deletes": pa.array([0] * len(files) + [counts["delete"]], pa.int64())})
    return stage


# ---------------------------------------------------------------------------------------------------- driver

class Pipeline:
    """``Pipeline.from_yaml(path).run(once=True)``; see the module docstring for what a run does."""

    def __init__(self, config: PipelineConfig | Mapping[str, Any], spark=None):
        self.config = config if isinstance(config, PipelineConfig) else PipelineConfig.from_dict(config)
        self._spark = spark
        self._stop = threading.Event()
        self._pending_commit: Offsets | None = None  # commit-after (async): the last batch's offsets, queued
        self._datasource_registered: bool | None = None

    @classmethod
    def from_yaml(cls, path: str | os.PathLike, spark=None) -> "Pipeline":
        path = Path(path)
        raw = yaml.safe_load(path.read_text())
        return cls(PipelineConfig.from_dict(raw, base_dir=path.parent), spark=spark)

    def stop(self) -> None:
        """Graceful stop (ssc.stop(true, true)): finish the current batch, then return from run()."""
        self._stop.set()

    # -- spark / table set-up
    def spark(self):
        if self._spark is None:
            from pyspark.sql import SparkSession

            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            master = self.config.spark.get("master", "local[2]")
            if master.startswith("local"):
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no outward interface needed
            builder = (SparkSession.builder.appName(f"tidelake-pipeline-{self.config.source.topic}")
                       .master(master)
                       .config("spark.ui.enabled", "false")
                       .config("spark.ui.showConsoleProgress", "false")
                       .config("spark.sql.shuffle.partitions", "2"))
            for k, v in (self.config.spark.get("conf") or {}).items():
                builder = builder.config(k, str(v))
            self._spark = builder.getOrCreate()
            self._spark.sparkContext.setLogLevel("ERROR")
        return self._spark

    def arrow_schema(self) -> pa.Schema:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType, _parse_datatype_string

        self.spark()  # the DDL parser needs a running SparkContext
        struct = _parse_datatype_string(self.config.sink.schema)
        if not isinstance(struct, StructType):
            raise PipelineConfigError(f"sink.schema is not a list of columns: {self.config.sink.schema!r}")
        return to_arrow_schema(struct)

    def open_table(self):
        """Open the sink table, creating it (schema, primary key, buckets, properties) if absent."""
        from tidelake.table import Table

        try:
            from tidelake.table.errors import TableExists, TableNotFound
        except ImportError:  # pragma: no cover - older table module
            TableExists, TableNotFound = FileExistsError, FileNotFoundError
        sink = self.config.sink
        try:
            return Table.open(sink.table)
        except (TableNotFound, FileNotFoundError):
            pass
        properties = {"write.bucket.num": str(sink.buckets), **sink.properties}
        schema = self.arrow_schema()
        primary_key = sink.primary_key or [schema.names[0]]
        try:
            return Table.create(sink.table, schema, primary_key, properties)
        except (TableExists, FileExistsError):  # another process created it first
            return Table.open(sink.table)

    # -- reading a batch
    def _kafka_rows(self, ranges: list[OffsetRange]):
        """A DataFrame of Spark's Kafka rows holding exactly the records of ``ranges``."""
        spark, src = self.spark(), self.config.source
        if src.reader in ("auto", "datasource") and self._datasource_registered is None:
            try:
                import tidelake.spark as tls

                tls.register(spark)
                self._datasource_registered = True
            except (ImportError, AttributeError):
                if src.reader == "datasource":
                    raise
                log.warning("the tidelake-kafka data source is not available: reading with confluent-kafka "
                            "in the executors")
                self._datasource_registered = False
        if src.reader != "direct" and self._datasource_registered:
            starting = offsets_json(src.topic, {r.partition: r.from_offset for r in ranges})
            ending = offsets_json(src.topic, {r.partition: r.until_offset for r in ranges})
            reader = (spark.read.format("tidelake-kafka")
                      .option("kafka.bootstrap.servers", src.bootstrap_servers)
                      .option("assign", json.dumps({src.topic: [r.partition for r in ranges]}))
                      .option("startingOffsets", starting)
                      .option("endingOffsets", ending)
                      .option("failOnDataLoss", "true"))
            for k, v in src.kafka.items():
                reader = reader.option(f"kafka.{k}", v)
            return reader.load()
        plan = spark.createDataFrame(
            [(r.topic, r.partition, r.from_offset, r.until_offset) for r in ranges],
            "topic string, partition int, from_offset long, until_offset long").repartition(len(ranges))
        return plan.mapInArrow(_read_ranges_direct(src.bootstrap_servers, src.kafka, 60.0), KAFKA_ROW_SCHEMA)

    def _stage_batch(self, ranges: list[OffsetRange], schema: pa.Schema) -> tuple[list, int, int, int]:
        """Read, parse, fold and stage one batch; returns (DataFiles, records, upserts, deletes)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        from tidelake.table import DataFile

        sink = self.config.sink
        spark = self.spark()
        kafka = self._kafka_rows(ranges).select("value", "partition", "offset")
        # Nullable while parsing: a change event without its key is reported by the fold, not by Spark.
        schema = pa.schema([f.with_nullable(True) for f in schema])
        parsed_schema = pa.schema(list(schema) + [pa.field(OP_COLUMN, pa.string()),
                                                  pa.field("_kafka_partition", pa.int32()),
                                                  pa.field("_kafka_offset", pa.int64())])
        parsed = kafka.mapInArrow(_parse_values(sink.format, schema), from_arrow_schema(parsed_schema))
        if sink.mode == "upsert":
            # Every change of one key in one Spark partition, so the fold there sees all of them.
            parsed = parsed.repartition(spark.sparkContext.defaultParallelism, *sink.primary_key)
        staged = parsed.mapInArrow(_fold_and_stage(sink.table, sink.primary_key, sink.mode),
                                   "file string, upserts long, deletes long").collect()
        files = [DataFile.from_dict(json.loads(row.file)) for row in staged if row.file]
        upserts = sum(row.upserts for row in staged)
        deletes = sum(row.deletes for row in staged)
        return files, sum(r.count for r in ranges), upserts, deletes

    # -- the loop
    def run(self, once: bool = False, max_batches: int | None = None) -> RunSummary:
        """Run batches until stopped (``stop()``/SIGTERM between batches), ``max_batches`` batches were run,
        or, with ``once``, everything available at the start has been processed."""
        cfg, src = self.config, self.config.source
        self._pending_commit = None
        table = self.open_table()
        schema = table.schema
        gtoffset = GtoffsetFile(cfg.seo_dir, src.group_id, src.topic) if cfg.offsets == "seo" else None
        with BrokerOffsets(src.bootstrap_servers, src.topic, src.group_id, src.kafka) as broker:
            partitions = broker.partitions()
            earliest, latest = broker.watermarks(partitions)
            stored, batch_id = self._load_offsets(broker, table, gtoffset, partitions)
            start, corrections = correct_offsets(stored, earliest, latest)
            for c in corrections:
                if c.kind != "none-stored" or stored is not None:
                    log.warning("partition %d: stored offset %s out of range, corrected (%s) to %d",
                                c.partition, c.stored, c.kind, c.corrected)
            summary = RunSummary(cfg.offsets, dict(start), dict(start), corrections)
            stop_at = dict(latest) if once else None
            log.info("pipeline %s (%s): start %s%s", cfg.app_id, cfg.offsets, start,
                     f", until {stop_at}" if once else "")
            first = True
            while True:
                if self._stop.is_set():
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
                ranges = plan_ranges(src.topic, start, latest, src.max_records_per_partition, stop_at)
                if once and not ranges:
                    summary.stopped_by = "once-complete"
                    break
                self._before_batch(broker, latest)
                if ranges:
                    result = self._run_batch(table, schema, batch_id, start, ranges)
                    start = advance(start, ranges)
                    summary.batches.append(result)
                    summary.end_offsets = dict(start)
                    self._after_batch(broker, gtoffset, start)
                    log.info("batch %d: %d records (%d upserts, %d deletes) -> version %s in %.2fs; next %s",
                             batch_id, result.records, result.upserts, result.deletes, result.version,
                             result.seconds, start)
                    batch_id += 1
                if not once:
                    self._stop.wait(max(0.0, src.batch_interval - (time.monotonic() - tick)))
            if once and cfg.offsets == "commit-after" and self._pending_commit is not None:
                broker.commit(self._pending_commit)  # a finished AvailableNow run commits what it did
                self._pending_commit = None
        return summary

    def _load_offsets(self, broker: BrokerOffsets, table, gtoffset: GtoffsetFile | None,
                      partitions: list[int]) -> tuple[Offsets | None, int]:
        """Where this mode keeps its progress -> (stored next offsets or None, next batch id)."""
        mode = self.config.offsets
        if mode == "exactly-once":
            state = table.app_state(self.config.app_id)
            return offsets_from_app_state(state), (state["batch_id"] + 1 if state else 0)
        if mode == "seo":
            return gtoffset.read(), 0
        return broker.committed(partitions), 0

    def _before_batch(self, broker: BrokerOffsets, latest: Offsets) -> None:
        mode = self.config.offsets
        if mode == "auto":
            # enable.auto.commit=true: the driver consumer's position after seeking to the log end is what
            # auto-commit sends, before any of the batch is processed (the paper's experiment 1).
            broker.commit(latest)
        elif mode == "commit-after" and self.config.commit == "async" and self._pending_commit is not None:
            broker.commit(self._pending_commit)  # commitAsync's queue is sent with the next fetch
            self._pending_commit = None

    def _run_batch(self, table, schema: pa.Schema, batch_id: int, start: Offsets,
                   ranges: list[OffsetRange]) -> BatchResult:
        began = time.monotonic()
        files, records, upserts, deletes = self._stage_batch(ranges, schema)
        operation = "insert" if self.config.sink.mode == "append" else "upsert"
        if self.config.offsets == "exactly-once":
            offsets_after = advance(start, ranges)
            version = table.commit_staged(
                files, operation=operation, app_id=self.config.app_id, batch_id=batch_id,
                app_extra={"offsets": {str(p): o for p, o in sorted(offsets_after.items())},
                           "topic": self.config.source.topic,
                           "ranges": [[r.partition, r.from_offset, r.until_offset] for r in ranges]})
            # Fencing: if another instance of this pipeline committed this batch id first, commit_staged was a
            # no-op and its offsets may differ from ours; continuing would lose or duplicate records.
            state = table.app_state(self.config.app_id)
            stored = offsets_from_app_state(state)
            if state is None or state["batch_id"] != batch_id or any(
                    stored.get(p) != o for p, o in offsets_after.items()):
                raise PipelineFencedError(
                    f"batch {batch_id} of {self.config.app_id} was committed by another instance "
                    f"(table holds {state}); stopping this one")
        else:
            version = table.commit_staged(files, operation=operation) if files else None
        return BatchResult(batch_id, ranges, records, upserts, deletes, version, time.monotonic() - began)

    def _after_batch(self, broker: BrokerOffsets, gtoffset: GtoffsetFile | None, offsets: Offsets) -> None:
        mode = self.config.offsets
        if mode == "commit-after" and self.config.commit == "async":
            self._pending_commit = dict(offsets)
            return
        if mode == "seo":
            gtoffset.write(offsets)
        if mode == "commit-after":
            broker.commit(offsets)  # commit: sync - the group is where this mode keeps its progress
        elif mode in ("seo", "exactly-once"):
            # Only for lag visibility: the progress is already in the gtoffset file / the table, so a failed
            # group commit must not stop the pipeline (the next batch commits again).
            from confluent_kafka import KafkaException
            try:
                broker.commit(offsets)
            except KafkaException as e:
                log.warning("group offset commit (for lag display) failed: %s", e)


def install_signal_handlers(pipeline: Pipeline) -> None:
    """SIGTERM/SIGINT: graceful stop after the current batch; a second signal stops at once."""

    def handler(signum, _frame):
        if pipeline._stop.is_set():
            raise KeyboardInterrupt
        log.warning("signal %d: stopping after the current batch", signum)
        pipeline.stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
