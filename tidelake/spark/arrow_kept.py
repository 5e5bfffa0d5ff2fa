"""The kept min/max values of many groups as Arrow columns (aggregate_state.py's multisets, column-wise).

A state's ``__m<i>`` column is ``list<struct<value, count>>``, one list per group. Here such lists become
*entries* — one row per (group id, value, count), the group ids those of arrow_groups.py — and entries become
lists again: equal values of a group counted together, the extreme first, at most ``kept`` values a group. So a
merge of thousands of groups' lists is a few sorts and group-bys, not Python objects per group.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.transform_plan import kept_type

GROUP, VALUE, COUNT = "__group", "value", "count"


def entries(lists: pa.Array | pa.ChunkedArray, ids: np.ndarray, value_type: pa.DataType) -> pa.Table:
    """The (group id, value, count) rows of ``lists`` (one list per row, ``ids`` its group), values cast to
    ``value_type``; NULL values and NULL lists hold none."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks() if lists.num_chunks else pa.array([], lists.type)
    flat = pc.list_flatten(lists)
    rows = pc.list_parent_indices(lists).to_numpy()
    values = flat.field(VALUE)
    table = pa.table({GROUP: pa.array(ids[rows] if len(rows) else np.zeros(0, np.int64), pa.int64()),
                      VALUE: values.cast(value_type), COUNT: flat.field(COUNT).cast(pa.int64())})
    return table.filter(pc.is_valid(values)) if values.null_count else table


def counted(table: pa.Table, function: str) -> pa.Table:
    """Entries in list order — by group, then the extreme first (lowest for min, highest for max) — with one row
    per (group, value): the counts of equal values added. (A sort and a pass over neighbours: cheaper than a hash
    grouping of (group, value).)"""
    if table.num_rows == 0:
        return table
    order = pc.sort_indices(table, sort_keys=[(GROUP, "ascending"),
                                              (VALUE, "descending" if function == "max" else "ascending")])
    table = table.take(order)
    if table.num_rows == 1:
        return table
    ids = table.column(GROUP).to_numpy()
    values = table.column(VALUE).combine_chunks()
    same = (ids[1:] == ids[:-1]) & pc.equal(values.slice(1), values.slice(0, len(values) - 1)).to_numpy(
        zero_copy_only=False)
    if not same.any():
        return table
    starts = np.flatnonzero(np.concatenate([[True], ~same]))
    counts = np.add.reduceat(table.column(COUNT).to_numpy(), starts)
    return pa.table({GROUP: pa.array(ids[starts]), VALUE: values.take(pa.array(starts)), COUNT: pa.array(counts)})


def count_by_group(table: pa.Table, groups: int) -> np.ndarray:
    """Each group's number of values (the counts added): int64, ``groups`` long."""
    out = np.zeros(groups, dtype=np.int64)
    if table.num_rows:
        np.add.at(out, table.column(GROUP).to_numpy(), table.column(COUNT).to_numpy())
    return out


def kept_lists(table: pa.Table, groups: int, kept: int | None, value_type: pa.DataType) -> pa.Array:
    """``groups`` lists (``kept_type(value_type)``): group ``g``'s entries of ``table`` (:func:`counted`: in list
    order, one per value), at most ``kept`` (None: all)."""
    if table.num_rows == 0:
        offsets = np.zeros(groups + 1, dtype=np.int32)
        items = pa.StructArray.from_arrays([pa.array([], value_type), pa.array([], pa.int64())], names=[VALUE, COUNT])
        return pa.ListArray.from_arrays(pa.array(offsets), items, type=kept_type(value_type))
    ids = table.column(GROUP).to_numpy()
    if kept is not None:
        rank = np.arange(len(ids)) - np.searchsorted(ids, ids, side="left")
        keep = rank < kept
        if not keep.all():
            table, ids = table.filter(pa.array(keep)), ids[keep]
    offsets = np.zeros(groups + 1, dtype=np.int64)
    np.cumsum(np.bincount(ids, minlength=groups), out=offsets[1:])
    items = pa.StructArray.from_arrays([table.column(VALUE).combine_chunks().cast(value_type),
                                        table.column(COUNT).combine_chunks()], names=[VALUE, COUNT])
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items, type=kept_type(value_type))


def last_values(lists: pa.Array) -> pa.Array:
    """Each list's last value (a kept list's boundary), NULL for an empty list."""
    return _value_at(lists, last=True)


def first_values(lists: pa.Array) -> pa.Array:
    """Each list's first value (its extreme), NULL for an empty list."""
    return _value_at(lists, last=False)


def _value_at(lists: pa.Array, last: bool) -> pa.Array:
    offsets = lists.offsets.to_numpy()
    offsets = offsets - offsets[0]   # (a slice's offsets start where it does; its flattened values at 0)
    lengths = np.diff(offsets)
    values = pc.list_flatten(lists).field(VALUE)
    if len(values) == 0:
        return pa.nulls(len(lengths), lists.type.value_type.field(VALUE).type)
    at = offsets[1:] - 1 if last else offsets[:-1]
    return values.take(pa.array(np.clip(at, 0, len(values) - 1), mask=lengths == 0))
