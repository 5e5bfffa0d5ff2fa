"""An aggregate stage's incremental step: per-group state of the increment merged into the sink's (SPEC T13).

``AggregateStep.increment`` turns an increment's input rows into the sink's changed rows: the state of the retracted
and the added rows per group — with Arrow where that is exact (arrow_state.py; a join: arrow_join.py), else by one
Spark job (the state query) —, the sink's state of the touched groups (its hidden columns, looked up by key), the
merge (arrow_merge.py: state tables, column-wise) and, for the groups whose truncated min/max list the merge cannot
answer, their state from the upstream's snapshot (``_recompute``); the sink rows are built from the merged state
table (aggregate_state.py), with no Python object per group. The step's framing — reading the increment and the
dimensions' deltas, staging, the commit — is table_pipeline.py's, the host this reads its plan, Spark views and
phases from.
"""
from __future__ import annotations

import functools
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.aggregate_state import group_names, ordered, sink_rows, sink_state
from tidelake.spark.arrow_merge import merge, replaced
from tidelake.spark.arrow_join import ArrowJoin, DimensionCache, arrow_join, input_rows
from tidelake.spark.arrow_state import arrow_computable, arrow_states, input_states
from tidelake.spark.delta_join import JoinShape, SignedRows, signed
from tidelake.spark.increment import NetChange
from tidelake.spark.pipeline_config import PipelineConfig
from tidelake.spark.transform_plan import SIGN_COLUMN, SOURCE, TransformPlan
from tidelake.table import Table
from tidelake.table.key_lookup import DecodedFiles, KeyLookup

SINK_FILES_CACHE_BYTES = 256 << 20  # the sink's files decoded by its key lookups, kept between steps


class StepHost(Protocol):
    """What an aggregate step uses of its pipeline (``TablePipeline``)."""
    config: PipelineConfig
    shape: JoinShape | None
    output: pa.Schema | None
    sink_schema: pa.Schema | None

    def plan(self) -> TransformPlan: ...
    def spark(self) -> Any: ...
    def upstream(self) -> Table: ...
    def phase(self, name: str) -> Any: ...
    def view(self, role: str) -> str: ...
    def bind(self, role: str, frame) -> str: ...
    def lookup_views(self, versions: dict[str, int]) -> dict[str, str]: ...
    def snapshot_frame(self, path: str, version: int) -> Any: ...
    def arrow_frame(self, data: pa.Table) -> Any: ...
    def with_ops(self, upserts: pa.Table, deletes: pa.Table | None = None) -> pa.Table: ...


class AggregateStep:
    """One per aggregate pipeline: keeps the Arrow join's form (decided once) and the dimensions read by name."""

    def __init__(self, host: StepHost):
        self._host = host
        self._arrow_join: ArrowJoin | None | bool = False  # False: not decided yet
        self._dimensions = DimensionCache()
        self._sink_files = DecodedFiles(SINK_FILES_CACHE_BYTES)

    def increment(self, sink: Table, net: NetChange, inputs: list[SignedRows], end: int, tables: dict[str, Table],
                  lookups: dict[str, int]) -> tuple[pa.Table, int]:
        """The sink's changed rows (``_op``) for this increment and the number of groups recomputed; ``inputs``: a
        join's signed terms (delta_join.py), else empty."""
        plan = self._host.plan()
        join = self._arrow_join_of(net.after.schema, tables, lookups)
        if self._host.shape is None and arrow_computable(plan, net.after.schema):   # no Spark job (arrow_state.py)
            with self._host.phase("arrow_state"):
                retract, add = arrow_states(plan, net.before), arrow_states(plan, net.after)
        elif join is not None:   # no Spark job either: the join in Arrow (arrow_join.py)
            with self._host.phase("arrow_state"):
                retract, add = self._arrow_join_states(join, inputs, tables)
        else:
            if self._host.shape is None:
                inputs = [SignedRows(pa.concat_tables([signed(net.before, -1), signed(net.after, +1)]), {})]
            retract, add = self._spark_states(inputs, lookups)
        names = self._host.output.names
        with self._host.phase("sink_read"):
            old = sink_state(self._sink_rows(sink, retract, add), plan, names)
        with self._host.phase("merge"):
            merged = merge(old, retract, add, plan, self._host.config.state.extremes.kept)
        states = merged.states
        if merged.recompute.num_rows:
            with self._host.phase("recompute"):
                groups = [tuple(r.values()) for r in merged.recompute.to_pylist()]
                refilled = (self._arrow_join_recompute(join, groups, end, tables, lookups) if join is not None
                            else self._recompute(groups, end, self._host.lookup_views(lookups)))
                states = replaced(states, refilled, plan)
        with self._host.phase("sink_rows"):
            key = [names[p] for p in plan.group_positions]
            deleted = merged.deleted.rename_columns(key)
            data = self._host.with_ops(sink_rows(states, plan, names, self._host.sink_schema), deleted)
        return data, merged.recompute.num_rows

    def _arrow_join_of(self, source: pa.Schema, tables: dict[str, Table], versions: dict[str, int]
                       ) -> ArrowJoin | None:
        if self._arrow_join is False:
            self._arrow_join = None if self._host.shape is None else arrow_join(
                self._host.plan(), self._host.shape, source, {n: t.schema_at(versions[n]) for n, t in tables.items()})
        return self._arrow_join

    def _arrow_join_states(self, join: ArrowJoin, inputs: list[SignedRows], tables: dict[str, Table]):
        plan = self._host.plan()
        if not inputs:
            return self._no_states(), self._no_states()
        rows = input_rows(join, inputs, tables, self._dimensions)
        sign = rows.column(SIGN_COLUMN)
        return (input_states(plan, rows.filter(pc.less(sign, 0))), input_states(plan, rows.filter(pc.greater(sign, 0))))

    def _arrow_join_recompute(self, join: ArrowJoin, groups: list[tuple], end: int, tables: dict[str, Table],
                              versions: dict[str, int]):
        """``_recompute`` of a join the Arrow join computes: the upstream at ``end`` (the columns it needs; only
        the groups' rows where the first group key is an upstream column) joined in Arrow."""
        plan, shape = self._host.plan(), join.shape
        columns = list(dict.fromkeys([lk.source_column for lk in shape.lookups] + [
            c for a, c in join.columns.values() if a == shape.source_alias]))
        first = join.columns["__g0"]
        values = sorted({g[0] for g in groups if g[0] is not None}, key=repr)
        restrict = first[0] == shape.source_alias and len(values) == len(groups)
        rows = self._host.upstream().scan(version=end, columns=columns,
                                    filter=[(first[1], "in", values)] if restrict else None)
        inputs = input_rows(join, [SignedRows(signed(rows, +1), dict(versions))], tables, self._dimensions)
        names = group_names(plan)
        wanted = pa.Table.from_pylist([dict(zip(names, g)) for g in groups],
                                      schema=pa.schema([inputs.schema.field(n) for n in names]))
        return input_states(plan, inputs.join(wanted, keys=names, join_type="left semi", use_threads=False),
                            self._host.config.state.extremes.kept)

    def _spark_states(self, inputs: list[SignedRows], lookups: dict[str, int]):
        """The retracted and the added rows' states per group, by the state query over one relation of all the
        signed terms (one Spark job)."""
        plan = self._host.plan()
        if not inputs:
            return self._no_states(), self._no_states()
        with self._host.phase("spark_plan"):
            parts = []
            for n, term in enumerate(inputs):
                views = {**self._host.lookup_views({**lookups, **term.versions}),
                         SOURCE: self._host.bind(f"increment{n}", self._host.arrow_frame(term.rows))}
                parts.append(plan.input_sql(views, signed=True))
            union = " UNION ALL ".join(f"SELECT * FROM ({q})" for q in parts)
            frame = self._host.spark().sql(plan.state_sql(union, by_sign=True))
        with self._host.phase("spark_job"):
            rows = frame.toArrow()
        sign = rows.column("__sign")
        return (rows.filter(pc.less(sign, 0)).drop_columns(["__sign"]),
                rows.filter(pc.greater(sign, 0)).drop_columns(["__sign"]))

    def _no_states(self) -> pa.Table:
        """The state table of no rows (the sink's key and hidden types)."""
        return sink_state(self._host.sink_schema.empty_table(), self._host.plan(), self._host.output.names)

    def _sink_rows(self, sink: Table, retract: pa.Table, add: pa.Table) -> pa.Table:
        """The sink's rows (hidden state included) of the groups the increment touches, looked up by key: only the
        buckets they hash to, each file probed by its sorted key column (table/key_lookup.py), the files it
        decodes kept for the next steps (a sink's files are immutable)."""
        plan, names, schema = self._host.plan(), self._host.output.names, self._host.sink_schema
        key = [names[p] for p in plan.group_positions]
        touched = pa.concat_tables([t.select(group_names(plan)).cast(pa.schema(
            [pa.field(g, schema.field(k).type) for g, k in zip(group_names(plan), key)])) for t in (retract, add)])
        # (a sink's key, its group columns, holds no NULL: a NULL group is new)
        touched = touched.group_by(group_names(plan), use_threads=False).aggregate([]).rename_columns(key)
        touched = touched.filter(functools.reduce(pc.and_, [pc.is_valid(touched.column(k)) for k in key]))
        if touched.num_rows == 0 or sink.version <= 0:
            return schema.empty_table()
        lookup = KeyLookup(sink.storage, sink.metadata, sink.reader, self._sink_files)
        return lookup.rows(sink.version, touched, schema.names, schema)

    def _recompute(self, groups: list[tuple], end: int, views: dict[str, str]):
        """The state of these groups from the snapshot at ``end`` (a truncated min/max list emptied)."""
        plan, kept = self._host.plan(), self._host.config.state.extremes.kept
        if arrow_computable(plan, self._host.upstream().schema_at(end)):   # (no Spark job: as in the increment's state)
            return self._arrow_recompute(groups, end)
        names = group_names(plan)
        schema = self._host.spark().sql(plan.input_sql({**views, SOURCE: self._host.view("snapshot")})).schema
        self._host.bind("snapshot", self._host.snapshot_frame(self._host.config.source.table, end))
        keys = self._host.spark().createDataFrame([list(g) for g in groups],
                                            schema=", ".join(f"{n} {schema[n].dataType.simpleString()}"
                                                             for n in names))
        keys_view = self._host.bind("groups", keys)
        condition = " AND ".join(f"i.{n} <=> g.{n}" for n in names)
        subset = (f"SELECT i.* FROM ({plan.input_sql({**views, SOURCE: self._host.view('snapshot')})}) AS i "
                  f"LEFT SEMI JOIN {keys_view} AS g ON {condition}")
        return ordered(self._host.spark().sql(plan.state_sql(subset, kept=kept)).toArrow(), plan, kept)

    def _arrow_recompute(self, groups: list[tuple], end: int):
        plan = self._host.plan()
        columns = list(dict.fromkeys([*plan.group_columns, *(a.column for a in plan.aggregates if a.column)]))
        first = {g[0] for g in groups}
        rows = self._host.upstream().scan(version=end, columns=columns,
                                    filter=[(plan.group_columns[0], "in", list(first))] if None not in first else None)
        wanted = pa.Table.from_pylist([dict(zip(plan.group_columns, g)) for g in groups],
                                      schema=pa.schema([rows.schema.field(c) for c in plan.group_columns]))
        return arrow_states(plan, rows.join(wanted, keys=list(plan.group_columns), join_type="left semi"),
                            self._host.config.state.extremes.kept)
