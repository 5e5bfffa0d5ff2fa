"""An increment's state merged into the sink's, column-wise in Arrow (aggregate_state.py's merge; issue 34).

The sink's state of the touched groups, the retracted rows' and the added rows' are state tables
(aggregate_state.py); one hash grouping of their keys (arrow_groups.py) lines them up by group, so the counts
and sums are vector arithmetic over the groups and the min/max lists a hash join and one sort over their
entries (arrow_kept.py): the cost is per changed row and group, as before, but not a Python object each.

A kept list, per group (``had``: the group's non-null count before the increment, ``left``: after its
retractions): complete when its counts add up to ``had``; its boundary is its last (least extreme) value. A
retracted value counts out when the list is complete or the value is not beyond the boundary; values whose count
falls to 0 leave. Emptied while ``left`` > 0, or nothing kept of a group with values: the group is listed for
recompute. Then complete again when the counts add up to ``left``, and an added value counts in when it is or
the value is not beyond the old boundary; the list is cut back to ``kept`` values, the extreme first.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.aggregate_state import group_names
from tidelake.spark.arrow_groups import Groups, group_ids
from tidelake.spark.arrow_kept import COUNT, GROUP, VALUE, count_by_group, counted, entries, kept_lists, last_values
from tidelake.spark.transform_plan import ROWS_COLUMN, TransformPlan, count_column, extremes_column, sum_column

_AT = "__at"


@dataclass(frozen=True)
class MergedStates:
    states: pa.Table  # state table of the groups to upsert
    deleted: pa.Table  # the group keys (``__g<j>``) of groups left without rows
    recompute: pa.Table  # the group keys of groups whose truncated min/max list emptied: refill from the snapshot


def _counts(table: pa.Table, column: str, at: np.ndarray) -> np.ndarray:
    """``column`` (a count) of the row ``at`` each group, 0 where the table has none."""
    out = np.zeros(len(at), dtype=np.int64)
    present = at >= 0
    if present.any():
        out[present] = pc.fill_null(table.column(column), 0).to_numpy()[at[present]]
    return out


def _aligned(table: pa.Table, column: str, at: np.ndarray, type: pa.DataType) -> pa.Array:
    """``column`` of the row ``at`` each group, NULL where the table has none."""
    values = table.column(column).cast(type)
    return _aligned_array(values.combine_chunks() if values.num_chunks else pa.array([], type), at)


def _aligned_array(values: pa.Array, at: np.ndarray) -> pa.Array:
    if len(values) == 0:
        return pa.nulls(len(at), values.type)
    return values.take(pa.array(at, mask=at < 0))


def _lists(table: pa.Table, column: str) -> pa.Array:
    lists = table.column(column)
    return lists.combine_chunks() if lists.num_chunks else pa.array([], lists.type)


def _add(a: pa.Array, b: pa.Array, sign: int) -> pa.Array:
    """``a + sign * b`` where both are there, else whichever is (``-b`` for a retraction), else NULL."""
    both = (pc.add_checked(a, b) if sign > 0 else pc.subtract_checked(a, b)).cast(a.type)
    return pc.coalesce(both, a, b if sign > 0 else pc.negate_checked(b))


def _sum_type(sink: pa.DataType) -> pa.DataType:
    # (decimal(38, s) operands' sum may need a digit more on the way, and Arrow widens each result by one: the
    # result is cast back to this type, checked, and the sink's type checks the end)
    return pa.decimal256(75, sink.scale) if pa.types.is_decimal(sink) else sink


def _inside(rows: pa.Table, boundary: pa.Array, complete: np.ndarray, function: str) -> pa.Array:
    """Which entries the list tracks: all where it is complete, else those not beyond its boundary."""
    if rows.num_rows == 0:
        return pa.array([], pa.bool_())
    ids = rows.column(GROUP).to_numpy()
    edge = boundary.take(pa.array(ids))
    compare = pc.less_equal if function == "min" else pc.greater_equal
    within = pc.fill_null(compare(rows.column(VALUE), edge), False).to_numpy(zero_copy_only=False)
    return pa.array(complete[ids] | within)


def _counted_out(was: pa.Table, minus: pa.Table) -> pa.Table:
    """``was`` (one entry per group and value) with the counts of ``minus``'s equal entries taken off, those at 0
    left out (a value the list does not hold has nothing to take off). A hash join on (group, value), so the
    lists' many entries keep their order and are not sorted for the few retracted."""
    if minus.num_rows == 0 or was.num_rows == 0:
        return was
    numbered = was.select([GROUP, VALUE]).append_column(_AT, pa.array(np.arange(was.num_rows, dtype=np.int64)))
    hit = numbered.join(minus, keys=[GROUP, VALUE], join_type="inner", use_threads=False)
    counts = was.column(COUNT).to_numpy().copy()
    counts[hit.column(_AT).to_numpy()] -= hit.column(COUNT).to_numpy()   # (each (group, value) once in both)
    return was.set_column(2, COUNT, pa.array(counts)).filter(pa.array(counts > 0))


def _merge_kept(old: pa.Table, retract: pa.Table, add: pa.Table, groups: Groups, column: str, function: str,
                had: np.ndarray, left: np.ndarray, kept: int, value_type: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """One min/max's lists after the increment, and which groups it cannot answer (lost: recompute)."""
    m = groups.count
    was, minus, plus = (entries(t.column(column), ids, value_type)
                        for t, ids in zip((old, retract, add), groups.ids))
    complete = count_by_group(was, m) == had
    kept_any = np.bincount(was.column(GROUP).to_numpy(), minlength=m) > 0
    lost = ~complete & ~kept_any
    # (the sink's lists are extreme first: a list's boundary is its last value)
    boundary = _aligned_array(last_values(_lists(old, column)).cast(value_type), groups.rows_of(0))
    remaining = _counted_out(was, minus.filter(_inside(minus, boundary, complete, function)))
    lost |= (np.bincount(remaining.column(GROUP).to_numpy(), minlength=m) == 0) & (left > 0)
    complete = count_by_group(remaining, m) == left
    after = counted(pa.concat_tables([remaining, plus.filter(_inside(plus, boundary, complete, function))]), function)
    if lost.any():   # (the state cannot answer these: an empty list until they are refilled)
        after = after.filter(pa.array(~lost[after.column(GROUP).to_numpy()]))
    return kept_lists(after, m, kept, value_type), lost


def merge(old: pa.Table, retract: pa.Table, add: pa.Table, plan: TransformPlan, kept: int) -> MergedStates:
    """The touched groups' states after the increment: ``old`` the sink's state of them (``sink_state``; its lists
    extreme first, as the sink keeps them), ``retract``/``add`` the before-/after-images' (state tables, lists in
    any order); ``kept``: how many distinct values a min/max list keeps (``state.extremes.kept``)."""
    keys = group_names(plan)
    groups = group_ids([old, retract, add], keys)
    at_old, at_minus, at_plus = (groups.rows_of(n) for n in range(3))
    rows = _counts(old, ROWS_COLUMN, at_old) - _counts(retract, ROWS_COLUMN, at_minus) + _counts(add, ROWS_COLUMN,
                                                                                                   at_plus)
    columns = {ROWS_COLUMN: pa.array(rows)}
    lost = np.zeros(groups.count, dtype=bool)
    for i, a in enumerate(plan.aggregates):
        if a.argument is None:
            continue
        n = count_column(i)
        had, gone = _counts(old, n, at_old), _counts(retract, n, at_minus)
        count = had - gone + _counts(add, n, at_plus)
        columns[n] = pa.array(count)
        if a.function in ("sum", "avg"):
            s = sum_column(i)
            sink_type = old.schema.field(s).type
            work = _sum_type(sink_type)
            total = _add(_add(_aligned(old, s, at_old, work), _aligned(retract, s, at_minus, work), -1),
                         _aligned(add, s, at_plus, work), +1)
            # (no value left: NULL, as Spark's sum of none, not the 0 the arithmetic leaves)
            columns[s] = pc.if_else(pa.array(count > 0), total, pa.scalar(None, work)).cast(sink_type)
        elif a.function in ("min", "max"):
            m = extremes_column(i)
            value_type = old.schema.field(m).type.value_type.field(VALUE).type
            columns[m], lost_here = _merge_kept(old, retract, add, groups, m, a.function, had, had - gone, kept,
                                                value_type)
            lost |= lost_here
    merged = pa.table({**{k: groups.keys.column(k) for k in keys}, **columns})
    alive = rows > 0
    key_table = groups.keys
    return MergedStates(merged.filter(pa.array(alive)), key_table.filter(pa.array(~alive)),
                        key_table.filter(pa.array(alive & lost)))


def replaced(states: pa.Table, by: pa.Table, plan: TransformPlan) -> pa.Table:
    """``states`` with the groups ``by`` holds (a recompute's state tables) taken from ``by``."""
    if by.num_rows == 0:
        return states
    by = by.select(states.column_names).cast(states.schema)
    groups = group_ids([by, states], group_names(plan))
    mine = np.isin(groups.ids[1], groups.ids[0], invert=True)
    return pa.concat_tables([states.filter(pa.array(mine)), by])
