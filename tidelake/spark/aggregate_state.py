"""Per-group aggregate state, merged with an increment's retractions and additions (SPEC T13).

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
``recompute``). A group whose count falls to 0 is deleted. Python values (ints, Decimals) keep the arithmetic
exact; the number of groups an increment touches is at most its size.
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tidelake.spark.transform_plan import (ROWS_COLUMN, TransformPlan, count_column, extremes_column, kept_type,
                                           sum_column)

Key = tuple
Kept = list[tuple[Any, int]]  # (value, count), the extreme first


@dataclass
class GroupState:
    rows: int = 0
    counts: dict[int, int] = field(default_factory=dict)  # aggregate index -> non-null count of its argument
    sums: dict[int, Any] = field(default_factory=dict)  # sum / avg
    kept: dict[int, Kept] = field(default_factory=dict)  # min / max: the kept extreme values with their counts


@dataclass(frozen=True)
class MergedStates:
    states: dict[Key, GroupState]  # groups to upsert
    deleted: list[Key]  # groups left without rows
    recompute: list[Key]  # groups whose truncated min/max list emptied: refill from the snapshot


def _add(a: Any, b: Any, sign: int) -> Any:
    if b is None:
        return a
    if a is None:
        return b if sign > 0 else -b
    return a + b if sign > 0 else a - b


def _ordered(values: list[dict] | None, function: str, kept: int | None) -> Kept:
    """``[{value, count}]`` (any order) -> the ``kept`` extreme values, the extreme first (None: all)."""
    pairs = sorted(((v["value"], v["count"]) for v in values or () if v["value"] is not None),
                   key=lambda p: p[0], reverse=function == "max")
    return pairs if kept is None else pairs[:kept]


def states_from_state_rows(rows: list[dict], plan: TransformPlan, kept: int | None = None) -> dict[Key, GroupState]:
    """The state query's rows (``__g<j>``, ``__rows``, ``__n<i>``, ``__s<i>``, ``__m<i>``) by group; ``kept``:
    trim each min/max list to this many values (None: an increment's, every value)."""
    return {tuple(r[f"__g{j}"] for j in range(len(plan.group_sql))): _state(r, plan, kept) for r in rows}


def states_from_sink_rows(rows: list[dict], plan: TransformPlan, names: list[str]) -> dict[Key, GroupState]:
    """The sink's rows (results plus hidden state) by group; ``names``: the output column names."""
    keys = [names[p] for p in plan.group_positions]
    return {tuple(r[k] for k in keys): _state(r, plan, None) for r in rows}


def _state(row: dict, plan: TransformPlan, kept: int | None) -> GroupState:
    state = GroupState(row[ROWS_COLUMN])
    for i, a in enumerate(plan.aggregates):
        if a.argument is None:
            continue
        state.counts[i] = row[count_column(i)]
        if a.function in ("sum", "avg"):
            state.sums[i] = row[sum_column(i)]
        elif a.function in ("min", "max"):
            state.kept[i] = _ordered(row[extremes_column(i)], a.function, kept)
    return state


def merge_kept(was: Kept, had: int, retract: Kept, left: int, add: Kept, function: str, kept: int) -> Kept | None:
    """The kept values after the increment; ``had``/``left``: the group's non-null count before / after the
    retractions. None: the state cannot answer (a truncated list emptied while values beyond it remain)."""
    beyond = (lambda v, b: v < b) if function == "max" else (lambda v, b: v > b)
    counts = dict(was)
    complete = sum(counts.values()) == had
    if not complete and not was:   # (nothing kept of a group with values: only a refill answers)
        return None
    boundary = was[-1][0] if was else None
    for value, n in retract:
        if complete or not beyond(value, boundary):
            counts[value] = counts.get(value, 0) - n
            if counts[value] <= 0:
                del counts[value]
    if not counts and left > 0:
        return None
    complete = sum(counts.values()) == left   # the retractions may have left only tracked values
    for value, n in add:
        if complete or not beyond(value, boundary):
            counts[value] = counts.get(value, 0) + n
    return sorted(counts.items(), key=lambda p: p[0], reverse=function == "max")[:kept]


def merge(old: dict[Key, GroupState], retract: dict[Key, GroupState], add: dict[Key, GroupState],
          plan: TransformPlan, kept: int) -> MergedStates:
    """``kept``: how many distinct values a min/max list keeps (``state.extremes.kept``)."""
    states, deleted, recompute = {}, [], []
    for key in set(retract) | set(add):
        was, minus, plus = old.get(key, GroupState()), retract.get(key, GroupState()), add.get(key, GroupState())
        state = GroupState(was.rows - minus.rows + plus.rows)
        lost = False
        for i, a in enumerate(plan.aggregates):
            if a.argument is None:
                continue
            had, gone = was.counts.get(i, 0), minus.counts.get(i, 0)
            state.counts[i] = had - gone + plus.counts.get(i, 0)
            if a.function in ("sum", "avg"):
                state.sums[i] = _add(_add(was.sums.get(i), minus.sums.get(i), -1), plus.sums.get(i), +1)
            elif a.function in ("min", "max"):
                values = merge_kept(was.kept.get(i, []), had, minus.kept.get(i, []), had - gone,
                                     plus.kept.get(i, []), a.function, kept)
                lost = lost or values is None
                state.kept[i] = values or []
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
                values = state.kept[i]
                row[extremes_column(i)] = [{"value": v, "count": c} for v, c in values]
                row[name] = values[0][0] if n and values else None
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)
