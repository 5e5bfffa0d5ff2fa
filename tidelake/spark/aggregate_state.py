"""Per-group aggregate state, what it means and the sink rows it makes (SPEC T13).

A group's state is its row count plus, per aggregate, the non-null count of its argument, the sum (sum, avg) or,
for min and max, a bounded sorted multiset: the ``kept`` lowest (min) / highest (max) distinct values of the
group with their counts, the extreme first (Flink's ``MinWithRetractAggFunction`` keeps them all). An aggregate
sink stores it in hidden columns (``__rows``, ``__n<i>``, ``__s<i>``, ``__m<i>``) beside the results.

The multiset is complete when its counts add up to the group's non-null count; otherwise it is truncated and
holds exactly every value at or below (min; at or above, max) its last kept value, the boundary. Merging an
increment: counts and sums subtract the before-images' partial state and add the after-images'; a retracted value
inside the kept range is counted out (one beyond the boundary was never tracked), an added one inside the range
(any, when complete) counted in, and the list trimmed back to ``kept`` values. So a retraction costs the changed
rows, not the group. The one case the state cannot answer: a truncated list emptied by retractions while the
group still has non-null values beyond it: that group is recomputed (its list refilled from the snapshot,
``recompute``). A group whose count falls to 0 is deleted. Sums are exact (integers, decimals; a float's as
Spark adds it: the old sum minus the retracted plus the added).

The state of many groups is one Arrow table (a *state table*): the group keys ``__g<j>``, ``__rows`` and the
hidden columns, one row per group, each min/max list extreme first. arrow_state.py computes one over rows,
arrow_merge.py merges them column-wise, :func:`sink_rows` turns one into the sink's rows.
"""
from __future__ import annotations

import decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.arrow_kept import counted, entries, first_values, kept_lists
from tidelake.spark.transform_plan import (ROWS_COLUMN, TransformPlan, count_column, extremes_column, kept_type,
                                           sum_column)

_EXACT_IN_DOUBLE = 2 ** 53   # integers up to this are exact as float64, so their quotient rounds as Python's


def group_names(plan: TransformPlan) -> list[str]:
    """A state table's group key columns (``__g<j>``, as ``TransformPlan.input_sql`` names them)."""
    return [f"__g{j}" for j in range(len(plan.group_sql))]


def hidden_fields(plan: TransformPlan, output: pa.Schema, sum_types: dict[int, pa.DataType]) -> list[pa.Field]:
    """The aggregate sink's hidden state columns; ``sum_types``: each sum/avg's sum type (Spark's)."""
    hidden = [pa.field(ROWS_COLUMN, pa.int64())]
    for i, a in enumerate(plan.aggregates):
        if a.argument is None:
            continue
        hidden.append(pa.field(count_column(i), pa.int64()))
        if a.function in ("sum", "avg"):
            hidden.append(pa.field(sum_column(i), sum_types[i]))
        elif a.function in ("min", "max"):
            hidden.append(pa.field(extremes_column(i), kept_type(output.field(a.position).type)))
    return hidden


def ordered(state: pa.Table, plan: TransformPlan, kept: int | None = None) -> pa.Table:
    """A state table whose min/max lists may be in any order (the state query's) with each list extreme first,
    NULL values left out and, given ``kept``, at most that many values."""
    for i, a in enumerate(plan.aggregates):
        if a.argument is None or a.function not in ("min", "max"):
            continue
        column = state.column(extremes_column(i))
        value_type = column.type.value_type.field("value").type
        values = entries(column, np.arange(state.num_rows, dtype=np.int64), value_type)
        lists = kept_lists(counted(values, a.function), state.num_rows, kept, value_type)
        state = state.set_column(state.schema.get_field_index(extremes_column(i)), extremes_column(i), lists)
    return state


def sink_state(rows: pa.Table, plan: TransformPlan, names: list[str]) -> pa.Table:
    """The sink's rows (results plus hidden state) as a state table; ``names``: the output column names."""
    keys = {names[p]: g for p, g in zip(plan.group_positions, group_names(plan))}
    hidden = [ROWS_COLUMN]
    for i, a in enumerate(plan.aggregates):
        if a.argument is not None:
            hidden.append(count_column(i))
            if a.function in ("sum", "avg", "min", "max"):
                hidden.append(sum_column(i) if a.function in ("sum", "avg") else extremes_column(i))
    return rows.select([*keys, *hidden]).rename_columns([*keys.values(), *hidden])


def average(total: Any, count: int, target: pa.DataType) -> Any:
    """One group's average from its sum and non-null count, as Spark divides: a decimal's rounded half up to the
    target's scale, an integer's a double."""
    if isinstance(total, decimal.Decimal):
        scale = target.scale if pa.types.is_decimal(target) else 6
        with decimal.localcontext() as ctx:
            ctx.prec = 60
            ctx.rounding = decimal.ROUND_HALF_UP   # Spark's decimal division rounds half up
            return (total / count).quantize(decimal.Decimal(1).scaleb(-scale))
    return total / count


def _averages(total: pa.ChunkedArray | pa.Array, count: pa.ChunkedArray | pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_integer(total.type):   # a double's division, where it is Python's (exact operands); else Python's
        out = pc.divide(total.cast(pa.float64()), count.cast(pa.float64()))
        sums = pc.fill_null(total, 0).to_numpy()
        big = np.flatnonzero(np.abs(sums) > _EXACT_IN_DOUBLE)
        if not len(big):
            return out
        values = out.to_numpy(zero_copy_only=False)
        counts = count.to_numpy()
        values[big] = [int(sums[k]) / int(counts[k]) for k in big]
        return pa.array(values, pa.float64(), mask=pc.is_null(total).to_numpy(zero_copy_only=False))
    return pa.array([None if t is None or not n else average(t, n, target)
                     for t, n in zip(total.to_pylist(), count.to_pylist())])


def sink_rows(state: pa.Table, plan: TransformPlan, names: list[str], schema: pa.Schema) -> pa.Table:
    """The sink's rows (results and hidden state) of a state table's groups (lists extreme first), in
    ``schema``."""
    columns: dict[str, Any] = {names[p]: state.column(g) for p, g in zip(plan.group_positions, group_names(plan))}
    rows = state.column(ROWS_COLUMN)
    columns[ROWS_COLUMN] = rows
    for i, a in enumerate(plan.aggregates):
        name = names[a.position]
        if a.argument is None:
            columns[name] = rows
            continue
        n = state.column(count_column(i))
        columns[count_column(i)] = n
        valued = pc.greater(n, 0)
        if a.function == "count":
            columns[name] = n
        elif a.function in ("sum", "avg"):
            total = state.column(sum_column(i))
            total = pc.if_else(valued, total, pa.scalar(None, total.type))
            columns[sum_column(i)] = total
            columns[name] = total if a.function == "sum" else _averages(total, n, schema.field(name).type)
        else:
            lists = state.column(extremes_column(i)).combine_chunks()
            columns[extremes_column(i)] = lists
            first = first_values(lists)
            columns[name] = pc.if_else(valued, first, pa.scalar(None, first.type))
    return pa.table({f.name: columns[f.name] for f in schema}).cast(schema)
