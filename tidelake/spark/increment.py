"""The net change of a table over (start, end]: each changed key's row before (at ``start``) and after (at ``end``).

An incremental transform needs, per changed key, what to retract (its before-image) and what to add (its
after-image); intermediate versions inside the range cancel out. Both come from ONE read of the change feed
with before-images (``Table.changes(before_images=True)``): a key's first image row in the range is its
preimage or the row a delete removed (the before-image) unless it is an insert, its last is its insert or
postimage (the after-image) unless it is a delete. The feed reads the change files a ``changelog.producer=lookup``
table's commits wrote (a cost that follows the change, not the table), else looks the images up by key in
the changed keys' buckets. pyarrow only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.table import Table
from tidelake.table.change_feed import DELETE, UPDATE_PREIMAGE

OP = "_op"
_ROW = "__row"


@dataclass(frozen=True)
class NetChange:
    start: int
    end: int
    before: pa.Table  # the table's columns at ``start``, for the changed keys that existed then
    after: pa.Table  # the table's columns at ``end``, for the changed keys that exist then
    keys: pa.Table  # every changed key (primary-key columns)
    changes: int  # change rows read (before netting)


def _first_and_last_per_key(feed: pa.Table, key: list[str]) -> tuple[pa.Array, pa.Array]:
    """The row numbers of each key's first and last row; ``feed`` is in commit order."""
    numbered = feed.select(key).append_column(_ROW, pa.array(np.arange(feed.num_rows, dtype=np.int64)))
    ends = numbered.group_by(key, use_threads=False).aggregate([(_ROW, "min"), (_ROW, "max")])
    return ends.column(f"{_ROW}_min"), ends.column(f"{_ROW}_max")


def net_change(table: Table, start: int | None, end: int) -> NetChange:
    """Before/after images of every key changed in (start, end]; ``start`` None: everything at ``end`` is new."""
    schema = table.visible_schema_at(end)   # (an upstream's hidden state columns are not its rows)
    columns = schema.names
    key = table.primary_key
    if start is None:
        after = table.scan(version=end)
        return NetChange(-1, end, schema.empty_table(), after, after.select(key), after.num_rows)
    feed = table.changes(start_version=start, end_version=end, before_images=True)
    if feed.num_rows == 0:
        empty = schema.empty_table()
        return NetChange(start, end, empty, empty, empty.select(key), 0)
    first, last = _first_and_last_per_key(feed, key)
    firsts, lasts = feed.take(first), feed.take(last)
    before = firsts.filter(pc.is_in(firsts.column(OP), pa.array([UPDATE_PREIMAGE, DELETE]))).select(columns)
    after = lasts.filter(pc.not_equal(lasts.column(OP), DELETE)).select(columns)
    # (a column added after ``start`` is null in the images the feed reads at ``start``)
    changes = int(pc.sum(pc.not_equal(feed.column(OP), UPDATE_PREIMAGE)).as_py() or 0)
    return NetChange(start, end, before.cast(schema), after.cast(schema), lasts.select(key), changes)

