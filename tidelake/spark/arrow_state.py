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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.aggregate_state import group_names
from tidelake.spark.arrow_groups import group_ids
from tidelake.spark.arrow_kept import COUNT, GROUP, VALUE, counted, kept_lists
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


def arrow_states(plan: TransformPlan, rows: pa.Table, kept: int | None = None) -> pa.Table:
    """The state table (aggregate_state.py) of ``rows`` (``arrow_computable`` must hold); ``kept``: how many values
    each min/max list keeps (None: all, an increment's)."""
    columns = {f"__g{j}": rows.column(c) for j, c in enumerate(plan.group_columns)}
    columns.update({f"__a{i}": rows.column(a.column) for i, a in enumerate(plan.aggregates) if a.argument is not None})
    return input_states(plan, pa.table(columns), kept)


def input_states(plan: TransformPlan, inputs: pa.Table, kept: int | None = None) -> pa.Table:
    """The state table of the aggregation's input rows (``__g<j>``, ``__a<i>``, as ``TransformPlan.input_sql``
    names them), whose types :func:`exact_group_key` / :func:`exact_argument` accept; ``kept`` as in
    :func:`arrow_states`. Grouped once (arrow_groups.py); every aggregate then by the rows' group ids."""
    groups = group_ids([inputs], group_names(plan))
    m, ids = groups.count, groups.ids[0]
    columns = {k: groups.keys.column(k) for k in group_names(plan)}
    columns[ROWS_COLUMN] = pa.array(np.bincount(ids, minlength=m).astype(np.int64))
    for i, a in enumerate(plan.aggregates):
        if a.argument is None:
            continue
        arg = inputs.column(f"__a{i}")
        valid = pc.is_valid(arg).to_numpy(zero_copy_only=False)
        columns[count_column(i)] = pa.array(np.bincount(ids[valid], minlength=m).astype(np.int64))
        if a.function in ("sum", "avg"):
            by_id = pa.table({GROUP: pa.array(ids), VALUE: arg}).group_by(GROUP, use_threads=False).aggregate(
                [(VALUE, "sum", pc.ScalarAggregateOptions(min_count=1))])
            at = np.full(m, -1, dtype=np.int64)
            at[by_id.column(GROUP).to_numpy()] = np.arange(by_id.num_rows, dtype=np.int64)
            sums = by_id.column(f"{VALUE}_sum").combine_chunks()
            columns[sum_column(i)] = sums.take(pa.array(at, mask=at < 0)) if len(sums) else pa.nulls(m, sums.type)
        elif a.function in ("min", "max"):   # per (group, value) the row count: the multiset of the group's values
            values = pa.table({GROUP: pa.array(ids), VALUE: arg, COUNT: pa.array(np.ones(len(ids), dtype=np.int64))})
            columns[extremes_column(i)] = kept_lists(counted(values.filter(pa.array(valid)), a.function), m, kept,
                                                     arg.type)
    return pa.table(columns)
