"""Merge-on-read: turning planned files into rows.

A snapshot of one bucket is its base file plus the deltas newer than it, the newest change of every
key winning and deletes dropped. The deltas are concatenated newest first (rows of a clustered file
reversed, so a key's newest row of that file comes first) and one hash aggregation keeps each key's
first row; no sort. Only when delta files overlap in versions (a clustered file spanning a file it
did not absorb) are rows ordered by their commit version first. Base rows survive unless a delta
names their key.

An incremental read concatenates the L0 delta files of the range, ordered by commit, then key.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import VersionExpired
from .files import (COMMIT_TIME, COMMIT_TIME_TYPE, COMMIT_VERSION, OP, OP_DELETE, OP_NAMES, OP_UPSERT, DataFile,
                    conform, parallel_map, read_parquet)
from .metadata import FileEntry
from .scan import BucketPlan

_OP_LABELS = pa.array([OP_NAMES[OP_UPSERT], OP_NAMES[OP_DELETE]], pa.string())


def _ordered(deltas: Sequence[FileEntry]) -> bool:
    """True if every delta's versions are newer than the previous one's (files of one single commit
    count as ordered by their position in it), so file order is version order."""
    for a, b in zip(deltas, deltas[1:]):
        fa, fb = a.file, b.file
        same_commit = fa.min_version == fa.max_version == fb.min_version == fb.max_version
        if fb.min_version <= fa.max_version and not same_commit:
            return False
    return True


def first_per_key(t: pa.Table, primary_key: Sequence[str]) -> pa.Table:
    """The first row of every key (hash aggregation; output in no particular order)."""
    idx = "__row"
    keys = t.select(list(primary_key)).append_column(idx, pa.array(np.arange(t.num_rows, dtype=np.int64)))
    first = keys.group_by(list(primary_key), use_threads=False).aggregate([(idx, "min")]).column(f"{idx}_min")
    return t.take(first)


def without_keys(t: pa.Table, keys: pa.Table, primary_key: Sequence[str]) -> pa.Table:
    """Rows of ``t`` whose key is not in ``keys``."""
    if len(primary_key) == 1:
        k = primary_key[0]
        return t.filter(pc.invert(pc.is_in(t.column(k), value_set=keys.column(k).combine_chunks())))
    return t.join(keys.select(list(primary_key)), keys=list(primary_key), join_type="left anti").select(t.column_names)


def sort_indices_by_key(t: pa.Table, primary_key: Sequence[str]) -> np.ndarray | pa.Array:
    """Stable ascending sort by the primary key. A single integer key sorts in numpy, whose stable
    sort (timsort) is near-linear on the concatenation of already sorted files."""
    if len(primary_key) == 1 and pa.types.is_integer(t.schema.field(primary_key[0]).type):
        return np.argsort(t.column(primary_key[0]).to_numpy(), kind="stable")
    return pc.sort_indices(t, sort_keys=[(k, "ascending") for k in primary_key])


class MergeOnReadReader:
    """Reads the data files of one table directory."""

    def __init__(self, path: str, primary_key: Sequence[str]):
        self.path = path
        self.primary_key = list(primary_key)

    # ------------------------------------------------------------ one file
    def read_file(self, f: DataFile, columns: list[str], schema: pa.Schema, key_filter: pc.Expression | None = None,
                  *, versions: bool = False, timestamps: Mapping[int, int] | None = None) -> pa.Table:
        """A file's rows: ``columns`` conformed to ``schema``, then ``_op`` (base rows are upserts),
        with ``versions`` ``_commit_version`` and with ``timestamps`` also ``_commit_time`` (an L0
        file's rows carry its commit's version and time)."""
        wanted = columns + ([OP, COMMIT_VERSION, COMMIT_TIME] if f.kind == "delta" else [])
        try:
            t = read_parquet(self.path, f, wanted, key_filter)
        except FileNotFoundError:
            raise VersionExpired(f"data file {f.path} was removed by retention cleanup; "
                                 f"read a newer version") from None
        n = t.num_rows
        extra = [pa.field(OP, pa.int8())]
        if f.kind == "base":
            t = t.append_column(OP, pa.array(np.zeros(n, np.int8)))
        if versions or timestamps is not None:
            if COMMIT_VERSION not in t.column_names:   # base or L0 file: one version for all rows
                t = t.append_column(COMMIT_VERSION, pa.array(np.full(n, f.min_version, np.int64)))
            extra.append(pa.field(COMMIT_VERSION, pa.int64()))
        if timestamps is not None:
            if COMMIT_TIME not in t.column_names:
                ts = np.full(n, timestamps[f.min_version], dtype="datetime64[ms]")
                t = t.append_column(COMMIT_TIME, pa.array(ts).cast(COMMIT_TIME_TYPE))
            extra.append(pa.field(COMMIT_TIME, COMMIT_TIME_TYPE))
        return conform(t, pa.schema([schema.field(c) for c in columns]), extra=extra)

    # ------------------------------------------------------------ snapshot
    def merge_bucket(self, plan: BucketPlan, columns: list[str], schema: pa.Schema,
                     key_filter: pc.Expression | None = None) -> pa.Table:
        """The live rows of one bucket (``columns``; every key once, in no particular order)."""
        pk = self.primary_key
        base = self.read_file(plan.base.file, columns, schema, key_filter).select(columns) if plan.base else None
        if not plan.deltas:
            return base if base is not None else pa.schema([schema.field(c) for c in columns]).empty_table()
        straddles = any(fe.file.min_version <= plan.base_version for fe in plan.deltas)
        ordered = _ordered(plan.deltas)
        parts = []
        for fe in reversed(plan.deltas):                      # newest file first
            t = self.read_file(fe.file, columns, schema, key_filter, versions=straddles or not ordered)
            if fe.file.level > 0:                              # a key's newest row of the file first
                t = t.take(pa.array(np.arange(t.num_rows - 1, -1, -1, dtype=np.int64)))
            parts.append(t)
        d = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if straddles:   # a clustered file also holds rows the base already merged
            d = d.filter(pc.greater(d.column(COMMIT_VERSION), plan.base_version))
        if not ordered:
            d = d.take(np.argsort(-d.column(COMMIT_VERSION).to_numpy(), kind="stable"))
        if len(parts) > 1 or plan.deltas[0].file.level > 0:
            d = first_per_key(d, pk)
        upserts = d.filter(pc.equal(d.column(OP), OP_UPSERT)).select(columns)
        if base is None or base.num_rows == 0:
            return upserts
        return pa.concat_tables([without_keys(base, d, pk), upserts])

    def read_snapshot(self, plans: Sequence[BucketPlan], schema: pa.Schema, columns: Sequence[str],
                      expression: pc.Expression | None, key_filter: pc.Expression | None) -> pa.Table:
        """Merge every planned bucket (in parallel), then apply the row filter, keep ``columns``."""
        read_cols = [c for c in schema.names if c in set(self.primary_key) | set(columns) |
                     (set(schema.names) if expression is not None else set())]
        parts = parallel_map(lambda p: self.merge_bucket(p, read_cols, schema, key_filter), list(plans))
        out = pa.concat_tables(parts) if parts else pa.schema([schema.field(c) for c in read_cols]).empty_table()
        if expression is not None and out.num_rows:
            out = out.filter(expression)
        return out.select(list(columns))

    # ------------------------------------------------------------ increments
    def read_changes(self, files: Iterable[FileEntry], schema: pa.Schema, columns: Sequence[str],
                     expression: pc.Expression | None, timestamps: Mapping[int, int]) -> pa.Table:
        """Every change in ``files`` (L0 deltas, commit order) as ``columns`` + ``_op``
        ('upsert'/'delete'), ``_commit_version``, ``_commit_time``, ordered by commit, then key."""
        files = list(files)
        out_schema = pa.schema([schema.field(c) for c in columns] + [
            pa.field(OP, pa.string()), pa.field(COMMIT_VERSION, pa.int64()), pa.field(COMMIT_TIME, COMMIT_TIME_TYPE)])
        if not files:
            return out_schema.empty_table()
        needed = set(self.primary_key) | set(columns) | (set(schema.names) if expression is not None else set())
        read_cols = [c for c in schema.names if c in needed]
        parts = parallel_map(lambda fe: self.read_file(fe.file, read_cols, schema, timestamps=timestamps), files)
        t = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if expression is not None:
            t = t.filter(expression)
        if files[0].file.min_version == files[-1].file.max_version:    # one commit: order by key
            order = sort_indices_by_key(t, self.primary_key)
        else:
            order = pc.sort_indices(t, sort_keys=[(COMMIT_VERSION, "ascending")] +
                                    [(k, "ascending") for k in self.primary_key])
        t = t.take(order)
        ops = pc.take(_OP_LABELS, t.column(OP))
        t = t.set_column(t.schema.get_field_index(OP), pa.field(OP, pa.string()), ops)
        return t.select(list(columns) + [OP, COMMIT_VERSION, COMMIT_TIME]).cast(out_schema)
