"""Table -> table pipelines (SPEC T13): ``source: {table: PATH}`` and a Spark SQL ``transform:``.

Each step reads the upstream's versions (consumed, latest], runs the transform as its plan says
(transform_plan.py) and writes the result into the sink in ONE table commit that also records, as the
pipeline's app state, the upstream version range it consumed (and the versions of the other tables read).
A restart resumes from that record, so a kill -9 at any point loses and duplicates nothing: a commit either
holds the step's result and its range or neither (and a second instance's commit of the same batch id is
dropped by the table).

- First step (no record yet): a refresh from the snapshots (``backfill``); then increments. A change of a table
  read by name is an increment too where the join is maintained (delta_join.py: the upstream rows with the
  changed join values rejoined); where it is not (``JoinShape.reason``), a refresh (``recompute``).
- ``changes``: the transform over the increment's rows; ``rows``: over the changed keys' after-images (and the
  rejoined rows); ``aggregate``: per-group state merged (aggregate_step.py); ``full``
  (``refresh: full``): over the snapshot, the sink overwritten.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.aggregate_state import hidden_fields, ordered, sink_rows
from tidelake.spark.aggregate_step import AggregateStep
from tidelake.spark.delta_join import JoinShape, join_delta, join_shape, rows_to_rejoin
from tidelake.spark.increment import net_change
from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError
from tidelake.spark.session import spark_session
from tidelake.spark.table_source import StagedFiles, publish, stage
from tidelake.spark.transform_plan import (CHANGES, SOURCE, TransformError, TransformPlan,
                                           plan_transform, sum_column)
from tidelake.table import Table, TableExists, TableNotFound
from tidelake.table.properties import BUCKET_NUM, HIDDEN_COLUMNS

log = logging.getLogger("tidelake.pipeline")

OP_COLUMN = "_op"
_VIEW_NUMBERS = itertools.count()


@dataclass(frozen=True)
class Position:
    """What the sink's last commit of this pipeline recorded."""
    batch_id: int  # -1: never committed
    version: int | None  # upstream version consumed up to
    lookups: dict[str, int]  # other tables' versions read
    sink_version: int | None
    upstream_committed_ms: int | None  # commit time of the upstream version consumed


@dataclass
class StepResult:
    batch_id: int
    kind: str  # backfill | recompute | incremental | full
    from_version: int | None
    to_version: int
    sink_version: int | None
    changes: int  # upstream change rows read (a refresh: rows of the snapshot's result)
    upserts: int
    deletes: int
    recomputed_groups: int
    seconds: float
    upstream_committed_ms: int
    committed_at_ms: int
    phases: dict[str, float] = field(default_factory=dict)  # seconds per part of the step (``TablePipeline.phase``)
    rejoined: int = 0  # upstream rows read again because their join value changed in a table read by name


@dataclass
class TableRunSummary:
    steps: list[StepResult] = field(default_factory=list)
    stopped_by: str = ""


def _stage_task(sink: Table, schema: pa.Schema):
    """In a Spark task: the transform's rows of this task -> staged files (upserts)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [b for b in batches if b.num_rows]
        data = pa.Table.from_batches(rows).select(schema.names).cast(schema).to_batches() if rows else []
        yield stage(sink, "upsert", iter(data)).to_arrow()
    return run


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])


class TablePipeline:
    """``TablePipeline(config).run(once=True)``; ``step()`` runs one step when the upstream has news."""

    def __init__(self, config: PipelineConfig, spark=None):
        if not config.is_table_source:
            raise PipelineConfigError("not a table pipeline (source: {table: PATH})", ("source",))
        self.config = config
        self._spark = spark
        self._stop = threading.Event()
        self._upstream: Table | None = None
        self._lookups: dict[str, Table] = {}
        self._sink: Table | None = None
        self._plan: TransformPlan | None = None
        self.shape: JoinShape | None = None
        self._aggregate = AggregateStep(self)
        self._phases: dict[str, float] = {}
        self._rejoined = 0
        self._prefix = f"__tl{next(_VIEW_NUMBERS)}"
        self.output: pa.Schema | None = None  # the transform's columns
        self.sink_schema: pa.Schema | None = None
        self.last_run = 0.0  # time.monotonic() of the last step that ran

    @property
    def name(self) -> str:
        return self.config.name

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def spark(self):
        if self._spark is None:
            self._spark = spark_session(self.config.spark, f"tidelake-pipeline-{self.name}")
        return self._spark

    # -- tables
    def upstream(self) -> Table:
        if self._upstream is None:
            try:
                self._upstream = Table.open(self.config.source.table)
            except TableNotFound:
                raise PipelineConfigError(f"source.table: no table at {self.config.source.table} (has its "
                                          f"pipeline run yet?)", ("source", "table")) from None
        return self._upstream

    def lookup(self, name: str) -> Table:
        if name not in self._lookups:
            path = self.config.source.tables.get(name)
            if path is None:
                raise PipelineConfigError(f"transform reads table {name!r}, which source.tables does not name",
                                          ("transform",))
            try:
                self._lookups[name] = Table.open(path)
            except TableNotFound:
                raise PipelineConfigError(f"source.tables.{name}: no table at {path}",
                                          ("source", "tables", name)) from None
        return self._lookups[name]

    def plan(self) -> TransformPlan:
        """The transform's plan; one that cannot be incremental is refused unless ``refresh: full``."""
        if self._plan is None:
            try:
                plan = plan_transform(self.config.transform, self.upstream().primary_key)
            except TransformError as e:
                raise PipelineConfigError(str(e), ("transform",)) from None
            if plan.kind in ("aggregate", "rows") and plan.tables:
                self.shape = join_shape(plan.sql, plan.tables)
                if self.shape.wrong:
                    plan = TransformPlan(plan.sql, "full", self.shape.wrong, plan.tables)
            if self.config.refresh == "full":
                plan = TransformPlan(plan.sql, "full", plan.reason or "refresh: full", plan.tables)
            elif not plan.incremental:
                raise PipelineConfigError(f"transform cannot be maintained incrementally: {plan.reason} (set "
                                          f"refresh: full to re-run it over the snapshot instead)", ("transform",))
            self._plan = plan
        return self._plan

    def position(self) -> Position:
        sink = self._open_sink_if_exists()
        state = sink.app_state(self.config.app_id) if sink is not None else None
        if state is None:
            return Position(-1, None, {}, None, None)
        extra = state["extra"]
        return Position(state["batch_id"], extra.get("to_version"), dict(extra.get("lookups") or {}),
                        state["version"], extra.get("upstream_committed_ms"))

    def upstream_exists(self) -> bool:
        """Whether the upstream table exists yet (in a chain, its own stage creates it on its first run)."""
        return self._upstream is not None or Table.exists(self.config.source.table)

    def pending(self, position: Position | None = None) -> int:
        """New upstream versions not yet consumed (a pipeline that never ran: 1 if the upstream exists)."""
        if not self.upstream_exists():
            return 0
        position = position if position is not None else self.position()
        latest = self.upstream().refresh()
        if position.version is None:
            return 1
        return max(0, latest - position.version)

    # -- spark views
    def view(self, role: str) -> str:
        return f"{self._prefix}_{role}"

    def snapshot_frame(self, path: str, version: int):
        return self.spark().read.format("tidelake").option("versionAsOf", str(version)).load(path)

    def arrow_frame(self, data: pa.Table):
        from pyspark.sql.pandas.types import from_arrow_schema
        # one chunk: pyspark 4.3's createDataFrame(pa.Table) stops at the first empty chunk (a filtered scan
        # has them), silently dropping the rows after it
        return self.spark().createDataFrame(data.combine_chunks(), schema=from_arrow_schema(data.schema))

    def lookup_views(self, versions: dict[str, int]) -> dict[str, str]:
        views = {}
        for name, version in versions.items():
            view = self.view(f"t_{name}_v{version}")
            self.snapshot_frame(self.config.source.tables[name], version).createOrReplaceTempView(view)
            views[name.lower()] = view
        return views

    def bind(self, role: str, frame) -> str:
        view = self.view(role)
        frame.createOrReplaceTempView(view)
        return view

    # -- the sink
    def _open_sink_if_exists(self) -> Table | None:
        if self._sink is None:
            try:
                self._sink = Table.open(self.config.sink.table)
            except TableNotFound:
                return None
        return self._sink

    def _describe(self, version: int, lookups: dict[str, int]) -> None:
        """The transform's output columns and the sink's schema (Spark's analysis only, no job)."""
        if self.sink_schema is not None:
            return
        plan, spark = self.plan(), self.spark()
        views = {**self.lookup_views(lookups), SOURCE: self.bind("snapshot", self.snapshot_frame(
            self.config.source.table, version))}
        if plan.kind == "changes":
            views[CHANGES] = self.bind("changes", self._changes_frame(pa.Table.from_pylist([], self._changes_schema())))
        from pyspark.sql.pandas.types import to_arrow_schema
        try:
            output = _nullable(to_arrow_schema(spark.sql(plan.bound(views)).schema))
        except Exception as e:   # Spark's AnalysisException: the user's SQL names something that is not there
            raise PipelineConfigError(f"transform: {str(e).splitlines()[0]}", ("transform",)) from None
        if len(set(output.names)) != len(output.names):
            raise PipelineConfigError("transform: output columns must have distinct names (use AS)", ("transform",))
        self.output = output
        schema = pa.schema([f for f in output if f.name != OP_COLUMN])   # _op says upsert or delete
        if plan.kind == "aggregate":
            state = to_arrow_schema(spark.sql(plan.state_sql(plan.input_sql(views))).schema)
            sums = {i: state.field(sum_column(i)).type for i, a in enumerate(plan.aggregates)
                    if a.function in ("sum", "avg") and a.argument is not None}
            schema = pa.schema(list(output) + hidden_fields(plan, output, sums))
        self.sink_schema = schema

    def _key(self) -> list[str]:
        plan, given = self.plan(), list(self.config.sink.primary_key)
        if plan.kind == "aggregate":
            key = [self.output.names[p] for p in plan.group_positions]
            if given and given != key:
                raise PipelineConfigError(f"sink.primary_key of an aggregate is its GROUP BY columns ({', '.join(key)})",
                                          ("sink", "primary_key"))
            return key
        if plan.kind == "rows":
            key = list(plan.key_columns)
            if given and given != key:
                raise PipelineConfigError(f"sink.primary_key of a row-wise transform is the upstream's key "
                                          f"({', '.join(key)})", ("sink", "primary_key"))
            return key
        if not given:
            raise PipelineConfigError("sink.primary_key is required (the transform's key columns)", ("sink",))
        missing = [k for k in given if k not in self.output.names]
        if missing:
            raise PipelineConfigError(f"sink.primary_key: the transform has no column {', '.join(missing)}",
                                      ("sink", "primary_key"))
        return given

    def sink(self, version: int, lookups: dict[str, int]) -> Table:
        """The sink, created from the transform's output (and an aggregate's hidden state) if absent."""
        self._describe(version, lookups)
        key = self._key()
        table = self._open_sink_if_exists()
        if table is None:
            properties = {BUCKET_NUM.name: str(self.config.sink.buckets), **self.config.sink.properties}
            hidden = self.sink_schema.names[len(self.output.names):]   # an aggregate's state: for this pipeline only
            if hidden:
                properties[HIDDEN_COLUMNS.name] = ",".join(hidden)
            try:
                table = Table.create(self.config.sink.table, self.sink_schema, key, properties)
            except TableExists:
                table = Table.open(self.config.sink.table)
            self._sink = table
        have = [(f.name, f.type) for f in table.schema]
        want = [(f.name, f.type) for f in self.sink_schema]
        if have != want or table.primary_key != key:
            raise PipelineConfigError(
                f"sink table {self.config.sink.table} does not match the transform: it has "
                f"{', '.join(f'{n} {t}' for n, t in have)} keyed by {', '.join(table.primary_key)}; the transform "
                f"makes {', '.join(f'{n} {t}' for n, t in want)} keyed by {', '.join(key)}", ("sink", "table"))
        return table

    # -- steps
    @contextmanager
    def phase(self, name: str):
        """Time a part of the step into ``StepResult.phases`` (where a step's time goes)."""
        began = time.monotonic()
        try:
            yield
        finally:
            self._phases[name] = self._phases.get(name, 0.0) + time.monotonic() - began

    def _maintains_lookup_changes(self, position: Position) -> bool:
        """Whether a change of the tables read by name is an increment (else a refresh from the snapshots)."""
        shape = self.shape
        return shape is not None and shape.maintained and all(n in position.lookups for n in self.plan().tables)

    def step(self) -> StepResult | None:
        """Run one step if the upstream (or a table read by name) has new versions."""
        began = time.monotonic()
        self._phases, self._rejoined = {}, 0
        with self.phase("open"):
            upstream = self.upstream()
            sink = self._open_sink_if_exists()
            if sink is not None:  # the step's one look at the sink's log (its position: what was committed last)
                sink.refresh()
            position = self.position()
            end = upstream.refresh()
            plan = self.plan()
            lookups = {name: self.lookup(name).refresh() for name in plan.tables}
        moved = lookups != position.lookups and plan.kind in ("aggregate", "rows", "full")   # (changes: reads no snapshot)
        if position.version is not None and end <= position.version and not moved:
            return None
        with self.phase("describe"):
            sink = self.sink(end, lookups)
        if plan.kind == "full":
            kind, written = "full", self._refresh(sink, end, lookups)
        elif position.version is None or (moved and not self._maintains_lookup_changes(position)):
            kind = "backfill" if position.version is None else "recompute"
            written = self._refresh(sink, end, lookups)
        else:
            old = {name: position.lookups[name] for name in plan.tables}
            kind, written = "incremental", self._incremental(sink, position.version, end, lookups, old)
        data, staged, changes, recomputed = written
        batch_id = position.batch_id + 1
        upstream_ms = upstream.metadata.timestamps.get(end, 0)
        extra = {"upstream": self.config.source.table, "from_version": position.version, "to_version": end,
                 "lookups": lookups, "kind": kind, "upstream_committed_ms": upstream_ms}
        if staged is None:
            with self.phase("stage"):
                staged = [StagedFiles(files=[f.to_dict() for f in sink.stage_files(data, op="changes")],
                                      rows=data.num_rows)] if data.num_rows else []
        operation = "overwrite" if kind != "incremental" else "upsert"
        with self.phase("commit"):
            version = publish(sink, staged, operation=operation, app_id=self.config.app_id, batch_id=batch_id,
                              app_extra=extra)
        upserts = deletes = 0
        if data is not None and data.num_rows:
            deletes = pc.sum(data.column(OP_COLUMN)).as_py() or 0
            upserts = data.num_rows - deletes
        elif staged:
            upserts = sum(m.rows for m in staged)
        self.last_run = time.monotonic()
        result = StepResult(batch_id, kind, position.version, end, version, changes, upserts, deletes, recomputed,
                            time.monotonic() - began, upstream_ms, int(time.time() * 1000), dict(self._phases),
                            self._rejoined)
        log.info("%s: %s (%s, %s] -> sink version %s: %d upserts, %d deletes%s in %.2fs", self.name, kind,
                 position.version, end, version, upserts, deletes,
                 f", {recomputed} groups recomputed" if recomputed else "", result.seconds)
        return result

    def with_ops(self, upserts: pa.Table, deletes: pa.Table | None = None) -> pa.Table:
        """Rows for ``stage_files(op="changes")``: upserts, then deletes (key columns, rest null)."""
        schema = self.sink_schema
        parts = [upserts.select(schema.names).cast(schema).append_column(OP_COLUMN,
                                                                         pa.array([0] * upserts.num_rows, pa.int8()))]
        if deletes is not None and deletes.num_rows:
            cols = {f.name: (deletes.column(f.name).cast(f.type) if f.name in deletes.column_names
                             else pa.nulls(deletes.num_rows, f.type)) for f in schema}
            cols[OP_COLUMN] = pa.array([1] * deletes.num_rows, pa.int8())
            parts.append(pa.table(cols))
        return pa.concat_tables(parts)

    def _refresh(self, sink: Table, end: int, lookups: dict[str, int]):
        """The transform over the snapshot at ``end``: (rows or None, staged files or None, rows, groups)."""
        plan, spark = self.plan(), self.spark()
        views = {**self.lookup_views(lookups), SOURCE: self.bind("snapshot", self.snapshot_frame(
            self.config.source.table, end))}
        if plan.kind == "aggregate":
            kept = self.config.state.extremes.kept
            states = ordered(spark.sql(plan.state_sql(plan.input_sql(views), kept=kept)).toArrow(), plan, kept)
            data = self.with_ops(sink_rows(states, plan, self.output.names, self.sink_schema))
            return data, None, states.num_rows, 0
        if plan.kind == "changes":
            snapshot = spark.table(views[SOURCE])
            from pyspark.sql import functions as F
            frame = (snapshot.withColumn("_op", F.lit("upsert")).withColumn("_commit_version", F.lit(end))
                     .withColumn("_commit_time", F.lit(self.upstream().metadata.timestamps.get(end, 0))
                                 .cast("long").cast("timestamp")))
            views = {**views, CHANGES: self.bind("changes", frame)}
        out = spark.sql(plan.bound(views))
        key = sink.primary_key
        out = out.repartition(spark.sparkContext.defaultParallelism, *key)
        staged = [StagedFiles.from_row(r) for r in
                  out.mapInArrow(_stage_task(sink, self.sink_schema), StagedFiles.DDL).collect()]
        return None, staged, sum(m.rows for m in staged), 0

    def _changes_schema(self) -> pa.Schema:
        return self.upstream().changes(start_version=self.upstream().version, end_version=self.upstream().version
                                       ).schema

    def _changes_frame(self, changes: pa.Table):
        return self.arrow_frame(changes)

    def _incremental(self, sink: Table, start: int, end: int, lookups: dict[str, int], old: dict[str, int]):
        """The step over (start, end] of the upstream and ``old`` -> ``lookups`` of the tables read by name."""
        plan, spark = self.plan(), self.spark()
        if plan.kind == "changes":
            views = self.lookup_views(lookups)
            changes = self.upstream().changes(start_version=start, end_version=end)
            views[CHANGES] = self.bind("changes", self._changes_frame(changes))
            out = spark.sql(plan.bound(views)).toArrow()
            if OP_COLUMN in out.column_names:   # each row keeps its place: the last change of a key wins
                ops = pc.if_else(pc.equal(out.column(OP_COLUMN), "delete"), 1, 0).cast(pa.int8())
                data = (out.select(self.sink_schema.names).cast(self.sink_schema)
                        .append_column(OP_COLUMN, pc.fill_null(ops, 0)))
            else:
                data = self.with_ops(out)
            return data, None, changes.num_rows, 0
        with self.phase("increment"):
            net = net_change(self.upstream(), start, end)
        tables = {name: self.lookup(name) for name in plan.tables}
        if plan.kind == "rows":
            with self.phase("dimension"):
                rows, changes = net.after, net.changes
                if self.shape is not None:
                    delta = rows_to_rejoin(self.shape, self.upstream(), net, tables, old, lookups)
                    rows, changes, self._rejoined = delta.inputs[0].rows, delta.changes, delta.rejoined
            key = list(plan.key_columns)
            with self.phase("spark_plan"):
                views = {**self.lookup_views(lookups), SOURCE: self.bind("after", self.arrow_frame(rows))}
                frame = spark.sql(plan.bound(views))
            with self.phase("spark_job"):
                out = frame.toArrow()
            keys = pa.concat_tables([net.keys, rows.select(key)]).group_by(key, use_threads=False).aggregate([])
            gone = keys.join(out.select(key), keys=key, join_type="left anti")
            return self.with_ops(out, gone), None, changes, 0
        with self.phase("dimension"):
            if self.shape is not None:
                delta = join_delta(self.shape, self.upstream(), net, tables, old, lookups)
                inputs, changes, self._rejoined = delta.inputs, delta.changes, delta.rejoined
            else:
                inputs, changes = [], net.changes
        data, recomputed = self._aggregate.increment(sink, net, inputs, end, tables, lookups)
        return data, None, changes, recomputed

    # -- full recompute (tests, the demo, benchmarks): the transform over the snapshot at ``version``
    def recompute(self, version: int) -> pa.Table:
        plan = self.plan()
        lookups = {name: self.lookup(name).refresh() for name in plan.tables}
        views = {**self.lookup_views(lookups),
                 SOURCE: self.bind("check", self.snapshot_frame(self.config.source.table, version))}
        if plan.kind == "changes":
            raise ValueError("a transform over changes has no full recompute")
        return self.spark().sql(plan.bound(views)).toArrow()

    def results(self, version: int | None = None) -> pa.Table:
        """The sink's rows without the hidden state columns."""
        return self._open_sink_if_exists().scan(version=version)

    # -- the loop
    def due(self, pending: int) -> bool:
        trigger = self.config.trigger
        return pending >= trigger.min_versions or (pending > 0 and time.monotonic() - self.last_run >= trigger.interval)

    def run(self, once: bool = False, max_batches: int | None = None, poll_seconds: float = 0.2) -> TableRunSummary:
        """Step whenever the trigger says so, until stopped, ``max_batches`` steps, or (``once``) caught up."""
        summary = TableRunSummary()
        while True:
            if self.stopping:
                summary.stopped_by = "signal"
                return summary
            if max_batches is not None and len(summary.steps) >= max_batches:
                summary.stopped_by = "max-batches"
                return summary
            pending = self.pending()
            if once and pending == 0:
                summary.stopped_by = "once-complete"
                return summary
            if once or self.due(pending):
                result = self.step()
                if result is not None:
                    summary.steps.append(result)
                    continue
            self._stop.wait(poll_seconds)
