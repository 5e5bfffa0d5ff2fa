"""An aggregate's per-group state over an increment, computed with pyarrow instead of a Spark job (SPEC T13).

Only for a plan whose group keys and arguments are bare columns of ``source`` read with no WHERE and no join
(``TransformPlan.group_columns``), and only for column types where pyarrow's grouping and aggregation give
exactly what Spark's do: integers, strings, booleans and dates (sum/avg: integers only; a float's sum
depends on the order of addition, a decimal's result type differs). Anything else goes to the state query
on Spark (``TransformPlan.state_sql``), the reference. The increment is already in the driver's memory
(increment.py), so this only skips the Spark job's fixed cost; it computes the same rows the state query
would: per group the row count, and per aggregate the non-null count, the sum or, for min/max, the distinct
values with their counts (all of them, or the ``kept`` most extreme).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.aggregate_state import GroupState, Key, states_from_state_rows
from tidelake.spark.transform_plan import ROWS_COLUMN, TransformPlan, count_column, extremes_column, sum_column


def _comparable(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_boolean(t) or pa.types.is_date(t))


def exact_group_key(t: pa.DataType) -> bool:
    """Whether pyarrow groups values of ``t`` exactly as Spark does."""
    return _comparable(t)


def exact_argument(function: str, t: pa.DataType) -> bool:
    """Whether pyarrow's ``function`` (sum/avg/count/min/max) of values of ``t`` is Spark's. (A decimal's sum:
    the same exact value; Spark's decimal(p+10, s) is the sink's type.)"""
    if function in ("sum", "avg"):
        return pa.types.is_integer(t) or pa.types.is_decimal128(t)
    return _comparable(t) or pa.types.is_decimal128(t)


def arrow_computable(plan: TransformPlan, schema: pa.Schema) -> bool:
    """Whether :func:`arrow_states` computes this plan's state over rows of ``schema`` exactly as Spark would."""
    if plan.kind != "aggregate" or not plan.group_columns:
        return False
    if not all(c in schema.names and exact_group_key(schema.field(c).type) for c in plan.group_columns):
        return False
    for a in plan.aggregates:
        if a.argument is None:
            continue
        if a.column not in schema.names or not exact_argument(a.function, schema.field(a.column).type):
            return False
    return True


def arrow_states(plan: TransformPlan, rows: pa.Table, kept: int | None = None) -> dict[Key, GroupState]:
    """The state per group of ``rows`` (``arrow_computable`` must hold); ``kept``: how many values each min/max
    list keeps (None: all, an increment's)."""
    columns = {f"__g{j}": rows.column(c) for j, c in enumerate(plan.group_columns)}
    columns.update({f"__a{i}": rows.column(a.column) for i, a in enumerate(plan.aggregates) if a.argument is not None})
    return input_states(plan, pa.table(columns), kept)


def input_states(plan: TransformPlan, inputs: pa.Table, kept: int | None = None) -> dict[Key, GroupState]:
    """The state per group of the aggregation's input rows (``__g<j>``, ``__a<i>``, as ``TransformPlan.input_sql``
    names them), whose types :func:`exact_group_key` / :func:`exact_argument` accept; ``kept`` as in
    :func:`arrow_states`."""
    groups = [f"__g{j}" for j in range(len(plan.group_sql))]
    columns = {g: inputs.column(g) for g in groups}
    aggregations = [(groups[0], "count", pc.CountOptions(mode="all"))]
    renames = {f"{groups[0]}_count": ROWS_COLUMN}
    lists = []
    for i, a in enumerate(plan.aggregates):
        if a.argument is None:
            continue
        arg = f"__a{i}"
        columns[arg] = inputs.column(arg)
        aggregations.append((arg, "count", pc.CountOptions(mode="only_valid")))
        renames[f"{arg}_count"] = count_column(i)
        if a.function in ("sum", "avg"):
            aggregations.append((arg, "sum", pc.ScalarAggregateOptions(min_count=1)))
            renames[f"{arg}_sum"] = sum_column(i)
        elif a.function in ("min", "max"):
            lists.append(i)
    inputs = pa.table(columns)
    state = inputs.group_by(groups, use_threads=False).aggregate(aggregations)
    state = state.rename_columns([renames.get(n, n) for n in state.column_names]).to_pylist()
    by_group = {tuple(r[g] for g in groups): r for r in state}
    for r in state:
        r.update({extremes_column(i): [] for i in lists})
    for i in lists:   # per (group, value) the row count: the multiset of the group's values
        arg = f"__a{i}"
        valued = inputs.select([*groups, arg]).filter(pc.is_valid(inputs.column(arg)))
        counted = valued.group_by([*groups, arg], use_threads=False).aggregate([([], "count_all")])
        for r in counted.to_pylist():
            by_group[tuple(r[g] for g in groups)][extremes_column(i)].append(
                {"value": r[arg], "count": r["count_all"]})
    return states_from_state_rows(state, plan, kept)
