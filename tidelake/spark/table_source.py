"""``format("tidelake")``: tidelake tables on Spark — batch reads (latest, time travel, incremental), a batch
writer in which executors stage the Parquet files and the driver commits once, and an idempotent streaming
sink.

Read options (``spark.read.format("tidelake").option(...).load(path)``):

====================================  =====================================================================
``versionAsOf``                       snapshot at that version
``timestampAsOf``                     snapshot current at that time: epoch milliseconds, or ISO-8601
                                      (a time without zone is UTC)
``startingVersion`` / ``endingVersion``  incremental read of the changes in (start, end] (end default
                                      latest; start ``latest``: none yet): the table's columns plus
                                      ``_op`` ('upsert'/'delete'), ``_commit_version``, ``_commit_time``
``startingTimestamp`` / ``endingTimestamp``  the same by commit time
``readChangeFeed``                    ``true``: with before-images, ``_op`` insert / update_preimage /
                                      update_postimage / delete (``Table.changes(before_images=True)``)
====================================  =====================================================================

``spark.readStream.format("tidelake")`` reads the change feed as a stream (table_stream.py: the same
starting options and ``readChangeFeed``, plus ``maxVersionsPerTrigger`` / ``maxRowsPerTrigger``).

Snapshot reads have one Spark partition per bucket that holds data (``table.plan``); filters Spark pushes
(=, <, <=, >, >=, IN on any column) go to the table, where equality on the whole primary key reads one
bucket and min/max statistics skip files. The table is opened once, on the driver, when the query is
planned; its ``Table`` object (with the version fixed then) is shipped to every task, so every task reads
the same snapshot without replaying the table's log.

Write options (``df.write.format("tidelake")`` or ``write_table``): ``operation`` = upsert (default) |
append | delete | overwrite (``mode("overwrite")`` implies overwrite), ``readVersion`` (conflict detection),
``primaryKey`` ("id" or "a,b") and ``tableProperties`` (JSON) to create a missing table from the written
schema. Reads and writes: the path may be a local directory or ``s3://bucket/prefix``; ``storageOptions``
(JSON: endpoint, region, access_key_id, secret_access_key, session_token, allow_http) configures S3 when
AWS's environment variables do not. Streaming sink options: ``operation`` = upsert (default) | append, ``primaryKey`` /
``tableProperties`` as above, ``appId`` (default: the streaming query's id, read from
``<checkpointLocation>/metadata``). Each micro-batch commits once with
``commit_staged(app_id=appId, batch_id=batchId)``: a batch id already in the table is a no-op, so a
batch replayed after a crash is never applied twice.

Writing is two functions: :func:`stage` runs in each task (write bucketed, PK-sorted delta files, invisible) and
returns a :class:`StagedFiles` message; :func:`publish` runs once on the driver and commits every task's files as
ONE table version (the pipeline runner publishes so too what its tasks staged, kafka_batch_tasks.py).
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter, EqualTo, Filter,
    GreaterThan, GreaterThanOrEqual, In, InputPartition, LessThan, LessThanOrEqual, WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from tidelake.clock import parse_timestamp_ms
from tidelake.spark.table_stream import StreamOptions, TableStreamReader, is_true
from tidelake.table import DataFile, Table, TableExists
from tidelake.table.change_feed import change_schema

log = logging.getLogger(__name__)

# Spark save "modes" of write_table -> (op given to stage(), operation given to commit_staged)
WRITE_OPERATIONS = {
    "upsert": ("upsert", "upsert"),
    "append": ("insert", "insert"),
    "delete": ("delete", "delete"),
    "overwrite": ("upsert", "overwrite"),
}
DEFAULT_OPERATION = "upsert"  # option ``operation`` left out (with mode("overwrite"): overwrite)

_PUSHABLE = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<=",
             In: "in"}


def _path(options) -> str:
    path = options.get("path")
    if not path:
        raise ValueError("give the table directory: load(path) / save(path) or option('path', ...)")
    return path


def _open(options, **kw) -> Table:
    return Table.open(_path(options), storage_options=storage_options(options), **kw)


def storage_options(options) -> dict[str, str] | None:
    """The ``storageOptions`` JSON object of the Spark options (S3 settings), if given."""
    raw = options.get("storageOptions")
    if not raw:
        return None
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"storageOptions must be a JSON object, not {raw!r}")
    return {str(k): str(v) for k, v in value.items()}


@dataclass
class ReadSpec:
    """What a read returns, resolved once on the driver (``table`` is shipped to the tasks)."""
    table: Table
    version: int | None = None                  # snapshot version
    start_version: int | None = None            # incremental (start, end]
    end_version: int | None = None
    schema: pa.Schema | None = None
    filters: list[tuple[str, str, Any]] = field(default_factory=list)
    before_images: bool = False                 # readChangeFeed: the change feed with before-images

    @property
    def incremental(self) -> bool:
        return self.start_version is not None


def resolve_read(options) -> ReadSpec:
    table = _open(options)
    given = {k for k in ("versionAsOf", "timestampAsOf", "startingVersion", "endingVersion",
                         "startingTimestamp", "endingTimestamp") if options.get(k) is not None}
    if {"versionAsOf", "timestampAsOf"} <= given:
        raise ValueError("give versionAsOf or timestampAsOf, not both")
    snapshot = given & {"versionAsOf", "timestampAsOf"}
    incremental = given - snapshot
    if snapshot and incremental:
        raise ValueError("time travel (versionAsOf/timestampAsOf) and incremental options cannot be combined")
    if incremental:
        if "startingVersion" in incremental or "endingVersion" in incremental:
            if incremental & {"startingTimestamp", "endingTimestamp"}:
                raise ValueError("give versions or timestamps for an incremental read, not both")
            if "startingVersion" not in incremental:
                raise ValueError("endingVersion needs startingVersion")
            latest = table.version
            start = latest if str(options["startingVersion"]).strip().lower() == "latest" \
                else int(options["startingVersion"])
            end = int(options["endingVersion"]) if "endingVersion" in incremental else latest
        else:
            if "startingTimestamp" not in incremental:
                raise ValueError("endingTimestamp needs startingTimestamp")
            # Resolve to versions now, so planning and every task agree on the range.
            start, end = table.resolve_range(
                start_timestamp=parse_timestamp_ms(options["startingTimestamp"]),
                end_timestamp=(parse_timestamp_ms(options["endingTimestamp"])
                               if "endingTimestamp" in incremental else None))
        table.plan(start_version=start, end_version=end)   # (validates the range: exists, not expired)
        return ReadSpec(table=table, start_version=start, end_version=end, schema=table_change_schema(table, end),
                        before_images=is_true(options, "readChangeFeed"))
    if options.get("readChangeFeed") is not None:
        raise ValueError("readChangeFeed reads changes: give startingVersion or startingTimestamp")
    if "timestampAsOf" in snapshot:
        version = table.version_at(parse_timestamp_ms(options["timestampAsOf"]))
    elif "versionAsOf" in snapshot:
        version = int(options["versionAsOf"])
    else:
        version = table.version
    # plan() validates the version (exists, not expired) before anything is planned.
    table.plan(version=version)
    return ReadSpec(table=table, version=version, schema=table.visible_schema_at(version))


def starts_open_ended(options) -> bool:
    """A read of the changes from a start up to the latest version (every stream is one)."""
    return ((options.get("startingVersion") is not None or options.get("startingTimestamp") is not None)
            and options.get("endingVersion") is None and options.get("endingTimestamp") is None)


def table_change_schema(table: Table, version: int | None = None) -> pa.Schema:
    """The schema of the table's changes as of ``version`` (default latest): its columns then ``_op``,
    ``_commit_version``, ``_commit_time`` (the ``columns.hidden`` columns left out, as every reader does)."""
    schema = table.visible_schema_at(version)
    return change_schema(schema, schema.names)


class BucketPartition(InputPartition):
    def __init__(self, bucket: int | None):
        super().__init__(bucket)
        self.bucket = bucket


class TableDataSource(DataSource):
    """The tidelake table as a Spark data source. See the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return "tidelake"

    def __init__(self, options):
        super().__init__(options)
        self._read_spec: ReadSpec | None = None

    def _spec(self) -> ReadSpec:
        if self._read_spec is None:
            self._read_spec = resolve_read(self.options)
        return self._read_spec

    def schema(self) -> StructType:
        if starts_open_ended(self.options):
            # (a stream's, or a batch increment up to the latest version): the table's change schema now,
            # without resolving the start, which a restarted stream does not use (it may have expired)
            return from_arrow_schema(table_change_schema(_open(self.options)))
        return from_arrow_schema(self._spec().schema)

    def reader(self, schema: StructType) -> "TableReader":
        return TableReader(self._spec(), schema)

    def streamReader(self, schema: StructType) -> TableStreamReader:
        options = StreamOptions.parse(self.options)
        return TableStreamReader(_open(self.options), options, schema)

    def _open_for_write(self, schema: StructType) -> Table:
        """The table written to, opened once for the whole job. With option ``primaryKey``
        (comma-separated) a missing table is created from the written schema (``tableProperties``: JSON of
        table properties)."""
        path, options = _path(self.options), storage_options(self.options)
        if Table.exists(path, storage_options=options) or not self.options.get("primaryKey"):
            return Table.open(path, storage_options=options)
        primary_key = [c.strip() for c in self.options["primaryKey"].split(",") if c.strip()]
        given = self.options.get("tableProperties")
        properties = json.loads(given) if given else {}
        try:
            return Table.create(path, to_arrow_schema(schema, timezone="UTC"), primary_key, properties,
                                storage_options=options)
        except TableExists:
            return Table.open(path, storage_options=options)  # another writer created it first

    def writer(self, schema: StructType, overwrite: bool) -> "TableWriter":
        operation = self.options.get("operation", "overwrite" if overwrite else DEFAULT_OPERATION).lower()
        if overwrite and operation != "overwrite":
            raise ValueError(f"mode('overwrite') with operation={operation}: use one or the other")
        if operation not in WRITE_OPERATIONS:
            raise ValueError(f"operation must be one of {sorted(WRITE_OPERATIONS)}, not {operation!r}")
        read_version = self.options.get("readVersion")
        return TableWriter(self._open_for_write(schema), operation,
                           int(read_version) if read_version is not None else None)

    def streamWriter(self, schema: StructType, overwrite: bool) -> "TableStreamWriter":
        operation = self.options.get("operation", DEFAULT_OPERATION).lower()
        if overwrite or operation not in ("upsert", "append"):
            raise ValueError("the streaming sink supports operation=upsert or append (outputMode append/update)")
        return TableStreamWriter(self._open_for_write(schema), operation, self.options.get("appId"),
                                 self.options.get("checkpointLocation"))


class TableReader(DataSourceReader):
    def __init__(self, spec: ReadSpec, schema: StructType):
        self.spec = spec
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        # only the table's own columns: an increment's _op / _commit_version / _commit_time are made
        # after the files are filtered (_op is stored as int8 there), so Spark filters those itself
        own = set(self.spec.table.schema_at(self.spec.end_version if self.spec.incremental
                                            else self.spec.version).names)
        for f in filters:
            op = _PUSHABLE.get(type(f))
            column = getattr(f, "attribute", None)
            value = getattr(f, "value", None)
            usable = (op is not None and column is not None and len(column) == 1
                      and column[0] in self.spec.schema.names and column[0] in own
                      and value is not None and not (op == "in" and any(v is None for v in value)))
            if usable:
                self.spec.filters.append((column[0], op, list(value) if op == "in" else value))
            else:
                yield f

    def partitions(self) -> Sequence[InputPartition]:
        if self.spec.incremental:
            return [BucketPartition(None)]
        plans = self.spec.table.plan(version=self.spec.version, filter=self.spec.filters or None)
        buckets = sorted({p.bucket for p in plans})
        return [BucketPartition(b) for b in buckets] or [BucketPartition(-1)]

    def read(self, partition: BucketPartition) -> Iterator[pa.RecordBatch]:
        spec = self.spec
        table = spec.table
        if spec.incremental:
            data = table.changes(start_version=spec.start_version, end_version=spec.end_version,
                                 filter=spec.filters or None, before_images=spec.before_images)
        elif partition.bucket == -1:
            return  # an empty snapshot
        else:
            data = table.scan(version=spec.version, filter=spec.filters or None, buckets={partition.bucket})
        data = data.select(self.arrow_schema.names).cast(self.arrow_schema)
        yield from data.to_batches(max_chunksize=65_536)


# ---------------------------------------------------------------- writing

@dataclass
class StagedFiles(WriterCommitMessage):
    """Files one task staged, to be published by the driver's single commit: JSON-safe dicts from a data source
    writer's task, DataFiles from the pipeline's tasks (which return them as typed Arrow values)."""
    files: list[dict] | list[DataFile]
    rows: int

    # As a row of a DataFrame (a task of the pipeline runner returns it through mapInArrow).
    DDL = "files string, rows long"

    def to_arrow(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict({"files": [json.dumps(self.files)], "rows": [self.rows]})

    @classmethod
    def from_row(cls, row) -> "StagedFiles":
        return cls(files=json.loads(row.files), rows=row.rows)


def stage(table: Table, op: str, batches: Iterator[pa.RecordBatch], add_columns: Sequence[pa.Field] = ()
          ) -> StagedFiles:
    """In a task: write its rows as staged (invisible) delta files. ``op``: upsert | insert | delete, or
    ``changes`` (each row's ``_op`` says upsert or delete; the last change per key, in row order, wins).
    ``add_columns``: columns the batch's commit may add (schema evolution), written with the rest."""
    batches = list(batches)
    if not batches or sum(b.num_rows for b in batches) == 0:
        return StagedFiles(files=[], rows=0)
    data = pa.Table.from_batches(batches)
    files = table.stage_files(data, op=op, add_columns=add_columns)
    return StagedFiles(files=[f.to_dict() for f in files], rows=data.num_rows)


def publish(table: Table, messages: list[StagedFiles | None], *, operation: str, read_version: int | None = None,
            app_id: str | None = None, batch_id: int | None = None, app_extra: dict | None = None,
            add_columns: Sequence[pa.Field] = ()) -> int | None:
    """On the driver: commit every task's staged files as ONE table version; returns it. Nothing to publish
    commits nothing (None) — unless the commit has meaning without files: an overwrite (it empties the
    table) or an application's batch (its id and ``app_extra`` are recorded). ``add_columns`` are added to
    the table's schema by that same commit."""
    files = [f for m in messages if m for f in m.files]
    if not files and operation != "overwrite" and app_id is None:
        return None
    return table.commit_staged(files, operation=operation, read_version=read_version, app_id=app_id,
                               batch_id=batch_id, app_extra=app_extra, add_columns=add_columns)


def remove_staged(table: Table, messages: list[StagedFiles | None]) -> None:
    """Delete files staged by a failed job: they were never visible; this only reclaims space."""
    for message in messages:
        for f in (message.files if message else []):
            table.storage.delete(f["path"])


class TableWriter(DataSourceArrowWriter):
    """Executors stage bucketed, PK-sorted delta files; the driver publishes them in ONE commit."""

    def __init__(self, table: Table, operation: str, read_version: int | None):
        self.table = table
        self.operation = operation
        self.read_version = read_version

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFiles:
        return stage(self.table, WRITE_OPERATIONS[self.operation][0], iterator)

    def commit(self, messages: list[StagedFiles | None]) -> None:
        publish(self.table, messages, operation=WRITE_OPERATIONS[self.operation][1], read_version=self.read_version)

    def abort(self, messages: list[StagedFiles | None]) -> None:
        remove_staged(self.table, messages)


def streaming_query_id(checkpoint_location: str | None) -> str:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (stable across restarts of the query)."""
    if not checkpoint_location:
        raise ValueError("the tidelake streaming sink needs option appId or a checkpointLocation")
    location = checkpoint_location[len("file:"):] if checkpoint_location.startswith("file:") else checkpoint_location
    with open(os.path.join(location, "metadata")) as f:
        return json.loads(f.readline())["id"]


class TableStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: one table commit per micro-batch, idempotent per (query id, batch id)."""

    def __init__(self, table: Table, operation: str, app_id: str | None, checkpoint_location: str | None):
        self.table = table
        self.operation = operation
        self.app_id = app_id
        self.checkpoint_location = checkpoint_location

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFiles:
        return stage(self.table, WRITE_OPERATIONS[self.operation][0], iterator)

    def commit(self, messages: list[StagedFiles | None], batchId: int) -> None:
        app_id = self.app_id or f"spark-query:{streaming_query_id(self.checkpoint_location)}"
        state = self.table.app_state(app_id)
        if state is not None and batchId <= state["batch_id"]:
            # Replay of a batch the table already holds (crash after the table commit, before Spark's
            # own commit log): commit nothing, drop the re-staged files.
            log.info("tidelake sink: batch %d of %s already committed in version %s", batchId, app_id,
                     state["version"])
            remove_staged(self.table, messages)
            return
        publish(self.table, messages, operation=WRITE_OPERATIONS[self.operation][1], app_id=app_id,
                batch_id=batchId, app_extra={"rows": sum(m.rows for m in messages if m)})

    def abort(self, messages: list[StagedFiles | None], batchId: int) -> None:
        remove_staged(self.table, messages)
