"""Per-group aggregate state, merged with an increment's retractions and additions (SPEC T13).

A group's state is its row count plus, per aggregate, the non-null count of its argument, the sum (sum, avg) or
the extreme (min, max). An aggregate sink stores it in hidden columns (``__rows``, ``__n<i>``, ``__s<i>``; min
and max in their own output column) beside the results. Merging an increment: counts and sums subtract the
before-images' partial state and add the after-images'; a min/max whose before-images reach the stored extreme
may have lost it and is recomputed from the snapshot (``recompute``); a group whose count falls to 0 is deleted.
Python values (ints, Decimals) keep the arithmetic exact; the number of groups an increment touches is at most
its size.
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tidelake.spark.transform_plan import ROWS_COLUMN, TransformPlan, count_column, sum_column

Key = tuple


@dataclass
class GroupState:
    rows: int = 0
    counts: dict[int, int] = field(default_factory=dict)  # aggregate index -> non-null count of its argument
    sums: dict[int, Any] = field(default_factory=dict)  # sum / avg
    extremes: dict[int, Any] = field(default_factory=dict)  # min / max


@dataclass(frozen=True)
class MergedStates:
    states: dict[Key, GroupState]  # groups to upsert
    deleted: list[Key]  # groups left without rows
    recompute: list[Key]  # groups whose min/max lost its extreme: recompute from the snapshot


def _add(a: Any, b: Any, sign: int) -> Any:
    if b is None:
        return a
    if a is None:
        return b if sign > 0 else -b
    return a + b if sign > 0 else a - b


def states_from_state_rows(rows: list[dict], plan: TransformPlan) -> dict[Key, GroupState]:
    """The state query's rows (``__g<j>``, ``__rows``, ``__n<i>``, ``__s<i>``, ``__x<i>``) by group."""
    return {tuple(r[f"__g{j}"] for j in range(len(plan.group_sql))): _state(r, plan, lambda i, a: f"__x{i}")
            for r in rows}


def states_from_sink_rows(rows: list[dict], plan: TransformPlan, names: list[str]) -> dict[Key, GroupState]:
    """The sink's rows (results plus hidden state) by group; ``names``: the output column names."""
    keys = [names[p] for p in plan.group_positions]
    return {tuple(r[k] for k in keys): _state(r, plan, lambda i, a: names[a.position]) for r in rows}


def _state(row: dict, plan: TransformPlan, extreme_column) -> GroupState:
    """One group's state from a row holding it; ``extreme_column(i, aggregate)``: where min/max ``i`` stands."""
    state = GroupState(row[ROWS_COLUMN])
    for i, a in enumerate(plan.aggregates):
        if a.argument is None:
            continue
        state.counts[i] = row[count_column(i)]
        if a.function in ("sum", "avg"):
            state.sums[i] = row[sum_column(i)]
        elif a.function in ("min", "max"):
            state.extremes[i] = row[extreme_column(i, a)]
    return state


def merge(old: dict[Key, GroupState], retract: dict[Key, GroupState], add: dict[Key, GroupState],
          plan: TransformPlan) -> MergedStates:
    states, deleted, recompute = {}, [], []
    for key in set(retract) | set(add):
        was, minus, plus = old.get(key, GroupState()), retract.get(key, GroupState()), add.get(key, GroupState())
        state = GroupState(was.rows - minus.rows + plus.rows)
        lost = False
        for i, a in enumerate(plan.aggregates):
            if a.argument is None:
                continue
            state.counts[i] = was.counts.get(i, 0) - minus.counts.get(i, 0) + plus.counts.get(i, 0)
            if a.function in ("sum", "avg"):
                state.sums[i] = _add(_add(was.sums.get(i), minus.sums.get(i), -1), plus.sums.get(i), +1)
                continue
            if a.function == "count":
                continue
            pick = min if a.function == "min" else max
            stored, gone = was.extremes.get(i), minus.extremes.get(i)
            if gone is not None and stored is not None and pick(gone, stored) == gone:
                lost = True   # a retracted value reaches the stored extreme: it may be gone
            candidates = [v for v in (stored, plus.extremes.get(i)) if v is not None]
            state.extremes[i] = pick(candidates) if candidates else None
        if state.rows <= 0:
            deleted.append(key)
        else:
            states[key] = state
            if lost:
                recompute.append(key)
    return MergedStates(states, deleted, recompute)


def _average(total: Any, count: int, target: pa.DataType) -> Any:
    if isinstance(total, decimal.Decimal):
        scale = target.scale if pa.types.is_decimal(target) else 6
        with decimal.localcontext() as ctx:
            ctx.prec = 60
            ctx.rounding = decimal.ROUND_HALF_UP   # Spark's decimal division rounds half up
            return (total / count).quantize(decimal.Decimal(1).scaleb(-scale))
    return total / count


def sink_rows(states: dict[Key, GroupState], plan: TransformPlan, names: list[str],
              schema: pa.Schema) -> pa.Table:
    """The sink's rows (results and hidden state) of these groups, in ``schema``."""
    keys = [names[p] for p in plan.group_positions]
    rows = []
    for key, state in states.items():
        row: dict[str, Any] = dict(zip(keys, key))
        row[ROWS_COLUMN] = state.rows
        for i, a in enumerate(plan.aggregates):
            name = names[a.position]
            if a.argument is None:
                row[name] = state.rows
                continue
            n = state.counts[i]
            row[count_column(i)] = n
            if a.function == "count":
                row[name] = n
            elif a.function == "sum":
                row[sum_column(i)] = state.sums[i] if n else None
                row[name] = state.sums[i] if n else None
            elif a.function == "avg":
                row[sum_column(i)] = state.sums[i] if n else None
                row[name] = _average(state.sums[i], n, schema.field(name).type) if n else None
            else:
                row[name] = state.extremes[i] if n else None
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)
