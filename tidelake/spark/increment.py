"""The net change of a table over (start, end]: each changed key's row before (at ``start``) and after (at ``end``).

An incremental transform needs, per changed key, what to retract (its before-image) and what to add (its
after-image); intermediate versions inside the range cancel out. After-images come from the increment alone
(the last change of each key; a delete leaves none); before-images are the start snapshot's rows of those keys
(a keyed read: bucket pruning and key min/max skipping). pyarrow only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.table import Table

OP = "_op"


@dataclass(frozen=True)
class NetChange:
    start: int
    end: int
    before: pa.Table  # the table's columns at ``start``, for the changed keys that existed then
    after: pa.Table  # the table's columns at ``end``, for the changed keys that exist then
    keys: pa.Table  # every changed key (primary-key columns)
    changes: int  # change rows read (before netting)


def _last_per_key(changes: pa.Table, key: list[str]) -> pa.Table:
    """The last row of each key; ``changes`` is in commit order."""
    numbered = changes.select(key).append_column("__row", pa.array(np.arange(changes.num_rows, dtype=np.int64)))
    last = numbered.group_by(key, use_threads=False).aggregate([("__row", "max")])
    return changes.take(last.column("__row_max"))


def net_change(table: Table, start: int | None, end: int) -> NetChange:
    """Before/after images of every key changed in (start, end]; ``start`` None: everything at ``end`` is new."""
    schema = table.schema_at(end)
    columns = schema.names
    key = table.primary_key
    if start is None:
        after = table.scan(version=end)
        return NetChange(-1, end, schema.empty_table(), after, after.select(key), after.num_rows)
    changes = table.changes(start_version=start, end_version=end)
    if changes.num_rows == 0:
        empty = schema.empty_table()
        return NetChange(start, end, empty, empty, empty.select(key), 0)
    last = _last_per_key(changes, key)
    after = last.filter(pc.equal(last.column(OP), "upsert")).select(columns)
    keys = last.select(key)
    if len(key) == 1:
        before = table.scan(version=start, filter=[(key[0], "in", keys.column(0).to_pylist())])
    else:
        before = table.scan(version=start, filter=[(key[0], "in", pc.unique(keys.column(0)).to_pylist())])
        before = before.join(keys, keys=key, join_type="left semi")
    before = before.select([c for c in columns if c in before.schema.names])
    for name in columns:   # a column added after ``start``: null before
        if name not in before.schema.names:
            before = before.append_column(schema.field(name), pa.nulls(before.num_rows, schema.field(name).type))
    return NetChange(start, end, before.select(columns).cast(schema), after.cast(schema), keys, changes.num_rows)
