"""Folding one bucket's staged changes onto the live rows of their keys by a merge engine (merge_engine.py):
the resolved rows a commit writes (engine_commit.py).

Two ways to the same result. Without a sequence field or a ``listagg`` column the fold is columnar: the live
rows and the staged changes, sorted by key (a key's live row first, then its changes in written order), are cut
into one run per key; a key's last delete hides everything before it; of the rows after it, deduplicate keeps
the last, first-row the first, partial-update each column's last non-null value, aggregation each column's
function over the run (Arrow's grouped sum / min / max / all / any; count as the sum of the live count and one
per non-null value written; first/last values by position). Otherwise each key's changes are applied one by
one (``MergeEngine.apply``), in Python.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .files import OP, OP_DELETE, OP_UPSERT
from .key_order import sort_indices_by_key
from .merge_engine import MergeEngine

_GROUP = "__group"
_GROUPED = {"sum": "sum", "count": "sum", "min": "min", "max": "max", "bool_and": "all", "bool_or": "any"}


def fold(engine: MergeEngine, live: pa.Table, staged: pa.Table, primary_key: Sequence[str], schema: pa.Schema,
         keep_unchanged: bool) -> pa.Table:
    """The resolved rows (``schema``'s columns + ``_op``, in key order) of ``staged`` (``schema`` + ``_op``, sorted
    by key, each key's changes in written order) applied onto ``live`` (its keys' live rows, ``schema``). A key
    whose row is unchanged is left out unless ``keep_unchanged``; a key left without a row is a delete."""
    pk = list(primary_key)
    columnar = engine.sequence_field is None and all(fn != "listagg" for _, fn in engine.functions)
    if columnar:
        return _fold_columnar(engine, live, staged, pk, schema, keep_unchanged)
    folded = _fold_rows(engine, {tuple(r[k] for k in pk): r for r in live.to_pylist()}, staged.to_pylist(), pk,
                        keep_unchanged)
    return pa.Table.from_pylist(folded.rows, schema=schema).append_column(pa.field(OP, pa.int8()),
                                                                        pa.array(folded.ops, pa.int8()))


# ---------------------------------------------------------------- columnar
def _run_starts(t: pa.Table, pk: list[str]) -> np.ndarray:
    """Mask of the rows of a key-sorted table whose key differs from the previous row's."""
    n = t.num_rows
    starts = np.ones(n, dtype=bool)
    if n > 1:
        change = None
        for k in pk:
            col = t.column(k)
            ne = pc.fill_null(pc.not_equal(col.slice(1), col.slice(0, n - 1)), True)
            change = ne if change is None else pc.or_(change, ne)
        starts[1:] = change.to_numpy(zero_copy_only=False)
    return starts


def _take(column: pa.ChunkedArray | pa.Array, index: np.ndarray) -> pa.Array:
    """``column`` at ``index`` (-1: null)."""
    return pc.take(column, pa.array(index, mask=index < 0))


def _valid_at(valid: np.ndarray, group: np.ndarray, groups: int, *, last: bool = True) -> np.ndarray:
    """Per group (rows sorted by group), the position of its last (else first) row where ``valid`` (-1: none)."""
    out = np.full(groups, -1, dtype=np.int64)
    where = np.flatnonzero(valid)
    g = group[where]
    edge = np.ones(len(g), dtype=bool)
    if last:
        edge[:-1] = g[1:] != g[:-1]
    else:
        edge[1:] = g[1:] != g[:-1]
    out[g[edge]] = where[edge]
    return out


def _fold_columnar(engine: MergeEngine, live: pa.Table, staged: pa.Table, pk: list[str], schema: pa.Schema,
                   keep_unchanged: bool) -> pa.Table:
    ops = staged.column(OP).to_numpy(zero_copy_only=False)
    if engine.kind == "aggregation" and not engine.remove_record_on_delete and (ops == OP_DELETE).any():
        first = int(np.flatnonzero(ops == OP_DELETE)[0])
        engine.apply(None, OP_DELETE, staged.slice(first, 1).to_pylist()[0])   # (raises MergeRefused)
    src = np.concatenate([np.zeros(live.num_rows, np.int8), np.ones(staged.num_rows, np.int8)])
    rows = pa.concat_tables([live.cast(schema), staged.select(schema.names)])
    all_ops = np.concatenate([np.zeros(live.num_rows, np.int8), ops])
    # a stable sort by key: a key's live row (first in the concatenation) comes before its changes
    order = np.asarray(sort_indices_by_key(rows, pk))
    rows, src, all_ops = rows.take(order), src[order], all_ops[order]
    n = rows.num_rows
    starts = _run_starts(rows, pk)
    group = np.cumsum(starts) - 1
    groups = int(group[-1]) + 1 if n else 0
    first_row = np.flatnonzero(starts)
    pos = np.arange(n)
    # a key's rows after its last delete are the ones its new row is made of
    last_delete = _valid_at(all_ops == OP_DELETE, group, groups)
    active = (pos > last_delete[group]) & (all_ops == OP_UPSERT)
    has_row = np.zeros(groups, dtype=bool)
    has_row[group[active]] = True
    first_active = _valid_at(active, group, groups, last=False)
    last_active = _valid_at(active, group, groups)
    functions = dict(engine.functions)
    columns = []
    for f in schema:
        c = rows.column(f.name)
        if f.name in pk:
            columns.append(_take(c, first_row))
            continue
        if engine.kind == "deduplicate":
            columns.append(_take(c, last_active))
        elif engine.kind == "first-row":
            columns.append(_take(c, first_active))
        elif engine.kind == "partial-update" or functions[f.name] == "last_non_null_value":
            valid = active & c.is_valid().to_numpy(zero_copy_only=False)
            columns.append(_take(c, _valid_at(valid, group, groups)))
        elif functions[f.name] == "first_value":
            columns.append(_take(c, first_active))
        elif functions[f.name] == "last_value":
            columns.append(_take(c, last_active))
        else:
            columns.append(_grouped(functions[f.name], c, src, active, group, groups).cast(f.type))
    new = pa.Table.from_arrays(columns, schema=schema)
    had_row = src[first_row] == 0
    upsert = has_row & (keep_unchanged | ~had_row | ~_same_rows(new, rows.take(first_row), pk))
    delete = ~has_row & (had_row | keep_unchanged)
    emit = upsert | delete
    out = new.filter(pa.array(emit))
    blank = [pc.if_else(pa.array(delete[emit]), pa.scalar(None, f.type), out.column(f.name)) if f.name not in pk
             else out.column(f.name) for f in schema]
    out = pa.Table.from_arrays(blank, schema=schema)
    return out.append_column(pa.field(OP, pa.int8()), pa.array(np.where(delete[emit], OP_DELETE, OP_UPSERT).astype(np.int8)))


def _grouped(fn: str, column: pa.ChunkedArray, src: np.ndarray, active: np.ndarray, group: np.ndarray,
             groups: int) -> pa.Array:
    """One aggregated column per group over its active rows (null where a group has no value)."""
    values = column
    if fn == "count":   # the live row holds a count; each change written adds one per non-null value
        written = pc.cast(column.is_valid(), pa.int64())
        values = pc.if_else(pa.array(src == 0), pc.cast(column, pa.int64()), written)
    keep = pa.array(active)
    t = pa.table({_GROUP: pa.array(group), "v": values}).filter(keep)
    agg = t.group_by(_GROUP, use_threads=False).aggregate(
        [("v", _GROUPED[fn], pc.ScalarAggregateOptions(skip_nulls=True, min_count=1))])
    index = np.full(groups, -1, dtype=np.int64)
    index[agg.column(_GROUP).to_numpy()] = np.arange(agg.num_rows)
    return _take(agg.column(f"v_{_GROUPED[fn]}"), index)


def _same_rows(a: pa.Table, b: pa.Table, pk: list[str]) -> np.ndarray:
    """Per row, whether ``a`` and ``b`` hold the same values (null equal to null)."""
    same = np.ones(a.num_rows, dtype=bool)
    for name in a.column_names:
        if name in pk:
            continue
        x, y = a.column(name), b.column(name)
        eq = pc.fill_null(pc.equal(x, y), False).to_numpy(zero_copy_only=False)
        both_null = pc.and_(x.is_null(), y.is_null()).to_numpy(zero_copy_only=False)
        same &= eq | both_null
    return same


# ---------------------------------------------------------------- row by row
@dataclass
class Folded:
    """The resolved rows of one bucket, in key order: each row (a delete's holds only the key) and its ``_op``."""
    rows: list[dict] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)

    def add(self, op: int, row: dict) -> None:
        self.rows.append(row)
        self.ops.append(op)


def _fold_rows(engine: MergeEngine, live: dict[tuple, dict], staged: list[dict], pk: list[str],
               keep_unchanged: bool) -> Folded:
    """Each key of ``staged`` (rows sorted by key, each key's in written order, with ``_op``) after its changes
    are applied to its ``live`` row; keys whose row is unchanged are left out unless ``keep_unchanged``."""
    out = Folded()
    i, n = 0, len(staged)
    while i < n:
        key = tuple(staged[i][k] for k in pk)
        before = live.get(key)
        row = before
        while i < n and tuple(staged[i][k] for k in pk) == key:
            change = staged[i]
            op = change.pop(OP)
            row = engine.apply(row, op, change)
            i += 1
        if row is None:
            if before is not None or keep_unchanged:
                out.add(OP_DELETE, dict(zip(pk, key)))
        elif keep_unchanged or row != before:
            out.add(OP_UPSERT, row)
    return out
