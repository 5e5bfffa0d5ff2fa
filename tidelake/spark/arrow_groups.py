"""Group ids across Arrow tables: which rows of several tables are one aggregate group (SPEC T13, issue 34).

The column-wise state merge (arrow_merge.py) lines up the sink's state of the touched groups, the retracted
rows' and the added rows' by group. Acero's join would do it for keys without NULL and carries no list column
(a min/max state); a hash grouping of all the tables' keys together does both: NULL is a group value like any
other (as Spark's GROUP BY has it), and each row gets the id of its group, so every column — lists included —
is gathered by position.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_POSITION = "__position"


@dataclass(frozen=True)
class Groups:
    """The distinct groups of some tables: ``keys`` (one row per group, in id order) and, per table, the group
    id of each of its rows."""
    keys: pa.Table
    ids: list[np.ndarray]

    @property
    def count(self) -> int:
        return self.keys.num_rows

    def rows_of(self, table: int) -> np.ndarray:
        """For each group, the row of table number ``table`` in it, -1 where none (rows of one table are
        distinct groups)."""
        at = np.full(self.count, -1, dtype=np.int64)
        at[self.ids[table]] = np.arange(len(self.ids[table]), dtype=np.int64)
        return at


def group_ids(tables: list[pa.Table], keys: list[str]) -> Groups:
    """The groups of ``keys`` over all ``tables`` (each holding the ``keys`` columns; the first table's types
    are the keys' types)."""
    types = [tables[0].schema.field(k).type for k in keys] if tables else []
    parts = [t.select(keys).cast(pa.schema([pa.field(k, ty) for k, ty in zip(keys, types)])) for t in tables]
    sizes = [t.num_rows for t in parts]
    every = pa.concat_tables(parts) if parts else pa.table({})
    total = every.num_rows
    if not keys or total == 0:
        empty = pa.schema([pa.field(k, ty) for k, ty in zip(keys, types)]).empty_table()
        return Groups(empty, [np.zeros(n, dtype=np.int64) for n in sizes])
    numbered = every.append_column(_POSITION, pa.array(np.arange(total, dtype=np.int64)))
    grouped = numbered.group_by(keys, use_threads=False).aggregate([(_POSITION, "list")])
    members = grouped.column(f"{_POSITION}_list").combine_chunks()
    ids = np.empty(total, dtype=np.int64)
    ids[pc.list_flatten(members).to_numpy()] = pc.list_parent_indices(members).to_numpy()
    bounds = np.cumsum([0, *sizes])
    return Groups(grouped.select(keys), [ids[bounds[n]:bounds[n + 1]] for n in range(len(parts))])
