"""Merge-on-read: turning planned files into rows.

A snapshot of one bucket is its base file plus the deltas newer than it, the newest change of every
key winning and deletes dropped. The deltas are concatenated newest first (rows of a clustered file
reversed, so a key's newest row of that file comes first) and one hash aggregation keeps each key's
first row; no sort. A base and L0 deltas on one integer key of a dense enough range merge by a bitmap
over the key range instead (``_merge_dense``). Only when delta files overlap in versions (a clustered file spanning a file it
did not absorb) are rows ordered by their commit version first. Base rows survive unless a delta
names their key. A bucket planned with deletion vectors (deletion_vectors.py) is not merged: each file's
rows but the superseded ones and the deletes, concatenated.

An incremental read concatenates the L0 delta files of the range, ordered by commit, then key.
"""
from __future__ import annotations

import functools
from typing import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.storage import Storage, StorageError

from .deletion_vectors import kept_positions, positions, read_vectors
from .errors import CorruptDataFile, VersionExpired
from .files import (COMMIT_TIME, COMMIT_TIME_TYPE, COMMIT_VERSION, IO_THREADS, OP, OP_DELETE, OP_NAMES, OP_UPSERT,
                    DataFile, conform, is_string, local_threads, map_in_groups, parallel_map, read_parquet,
                    shared_pool)
from .key_order import first_indices, first_of_each_key, int_key, sort_indices_by_key
from .metadata import FileEntry
from .scan import BucketPlan

DENSE_SPAN_PER_ROW = 64          # merge by a bitmap over the key range (_merge_dense) up to this range per row read
DENSE_MAX_SPAN = 1 << 28         # and never a bitmap of more than 256 MiB
PARALLEL_MIN_ROWS = 200_000   # below this a local read runs in one thread (see MergeOnReadReader.map_files)
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


def needs_version_order(plan: BucketPlan) -> bool:
    """True if a bucket's deltas must be merged by each row's commit version, not file by file: they
    overlap in versions, or a clustered file straddles the base."""
    return bool(plan.deltas) and (any(fe.file.min_version <= plan.base_version for fe in plan.deltas)
                                  or not _ordered(plan.deltas))


def dictionary_strings(schema: pa.Schema, except_columns: Sequence[str] = ()) -> pa.Schema:
    """``schema`` with its string columns dictionary-encoded (as they are stored), but ``except_columns``."""
    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), f.type), f.nullable)
                      if is_string(f.type) and f.name not in except_columns else f for f in schema])


@functools.lru_cache(maxsize=256)
def _layout(schema: pa.Schema, columns: tuple[str, ...]) -> tuple[pa.Schema, list[str]]:
    """The schema of ``columns`` and the string columns among them: worked out once per read rather
    than once per file (a table of many small files spends a tenth of its read on such per-file work)."""
    return pa.schema([schema.field(c) for c in columns]), [c for c in columns if _stringish(schema.field(c).type)]


def _is_sorted(a: np.ndarray) -> bool:
    return len(a) < 2 or bool((a[1:] >= a[:-1]).all())


def _stringish(t: pa.DataType) -> bool:
    """A string column, plain or dictionary-encoded."""
    return is_string(t.value_type if pa.types.is_dictionary(t) else t)


def _reversed(n: int) -> pa.Array:
    return pa.array(np.arange(n - 1, -1, -1, dtype=np.int64))


def without_keys(t: pa.Table, keys: pa.Table, primary_key: Sequence[str]) -> pa.Table:
    """Rows of ``t`` whose key is not in ``keys``."""
    mine = int_key(t, primary_key)
    if mine is not None and len(mine):
        theirs = keys.column(primary_key[0]).to_numpy()
        if not len(theirs):
            return t
        theirs_sorted = _is_sorted(theirs)   # (the merge's keys are: checking costs less than a sort)
        if _is_sorted(mine):       # (a file read whole is): look their keys up in it
            if theirs_sorted:      # only those within its range can be in it (new keys often are not)
                theirs = theirs[np.searchsorted(theirs, mine[0]):np.searchsorted(theirs, mine[-1], "right")]
            pos = np.minimum(np.searchsorted(mine, theirs), len(mine) - 1)
            keep = np.ones(len(mine), dtype=bool)
            keep[pos[mine[pos] == theirs]] = False
        else:
            theirs = theirs if theirs_sorted else np.sort(theirs)
            pos = np.minimum(np.searchsorted(theirs, mine), len(theirs) - 1)
            keep = theirs[pos] != mine
        return _rows_where(t, keep)
    if len(primary_key) == 1:
        k = primary_key[0]
        drop = pc.is_in(_decoded(t.column(k)), value_set=_decoded(keys.column(k)).combine_chunks())
        return t.filter(pc.invert(drop)) if pc.any(drop).as_py() else t
    kept = t.join(keys.select(list(primary_key)), keys=list(primary_key), join_type="left anti")
    return kept.select(t.column_names).cast(t.schema)   # the join drops "not null" from the key fields


def _decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A string key read dictionary-encoded, as plain values: files' dictionaries differ, and Arrow's
    is_in / group_by take one type."""
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


def _rows_where(t: pa.Table, keep: np.ndarray) -> pa.Table:
    """The rows of ``t`` where ``keep``. A table of one chunk per column is gathered by index
    (Arrow's filter by a mask that keeps most rows costs ~1.7x as much); a concatenation is filtered
    (gathering from it would first join its chunks)."""
    if keep.all():
        return t
    if not keep.any():
        return t.slice(0, 0)
    if all(c.num_chunks == 1 for c in t.columns):
        return pc.take(t, np.flatnonzero(keep), boundscheck=False)   # (the indices are the mask's own)
    return t.filter(pa.array(keep))


def _rows_at(t: pa.Table, indices: np.ndarray) -> pa.Table:
    """The rows of ``t`` at ``indices`` (ascending, each < ``t.num_rows``: the complement of a vector)."""
    return t if len(indices) == t.num_rows else pc.take(t, indices, boundscheck=False)


def _upserts(t: pa.Table, columns: list[str], has_deletes: bool) -> pa.Table:
    """The upsert rows of a table with one row per key (deletes dropped), as ``columns``."""
    if not has_deletes:
        return t.select(columns)
    return t.filter(pc.equal(t.column(OP), OP_UPSERT)).select(columns)


class MergeOnReadReader:
    """Reads the data files of one table (on its storage)."""

    def __init__(self, storage: Storage, primary_key: Sequence[str]):
        self.storage = storage
        self.primary_key = list(primary_key)

    def map_files(self, fn, items: list, rows: int) -> list:
        """``fn`` over ``items``, in order. On an object store in the I/O threads; on a local disk in
        one group of items per core, or in the calling thread for fewer than PARALLEL_MIN_ROWS rows
        (handing small pieces of work between threads costs more CPU than it saves: ~30 % of a
        124,000-row snapshot read)."""
        if self.storage.local_path("") is None:   # an object store: one GET per task, as many as can wait
            return parallel_map(fn, items, pool=shared_pool(IO_THREADS))
        if rows < PARALLEL_MIN_ROWS:
            return [fn(x) for x in items]
        threads = local_threads()
        return map_in_groups(fn, items, shared_pool(threads), threads)

    # ------------------------------------------------------------ one file
    def read_file(self, f: DataFile, columns: list[str], schema: pa.Schema, key_filter: pc.Expression | None = None,
                  *, ops: bool = True, versions: bool = False, timestamps: Mapping[int, int] | None = None) -> pa.Table:
        """A file's rows: ``columns`` conformed to ``schema``, then (with ``ops``) ``_op`` (base rows
        are upserts), with ``versions`` ``_commit_version`` and with ``timestamps`` also
        ``_commit_time`` (an L0 file's rows carry its commit's version and time)."""
        wanted = columns + ([OP] if ops and f.kind == "delta" else [])
        if f.kind == "delta" and (versions or timestamps is not None):
            wanted += [COMMIT_VERSION, COMMIT_TIME]
        target, strings = _layout(schema, tuple(columns))
        try:
            t = read_parquet(self.storage, f, wanted, key_filter, strings=strings)
        except FileNotFoundError:
            raise VersionExpired(f"data file {f.path} is missing: removed by retention cleanup (read a newer "
                                 f"version) or lost (`tidelake table check` tells which)") from None
        except StorageError:   # the store failed (network, credentials): not the file's fault
            raise
        except (pa.ArrowInvalid, OSError) as e:   # a truncated or overwritten file
            raise CorruptDataFile(f.path, str(e)) from e
        n = t.num_rows
        extra = [pa.field(OP, pa.int8())] if ops else []
        if ops and f.kind == "base":
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
        return conform(t, target, extra=extra)

    # ------------------------------------------------------------ snapshot
    def merge_bucket(self, plan: BucketPlan, columns: list[str], schema: pa.Schema,
                     key_filter: pc.Expression | None = None, *, dictionaries: bool = False) -> pa.Table:
        """The live rows of one bucket (``columns``; every key once, in no particular order).
        ``dictionaries``: string columns may come back dictionary-encoded (cheaper to filter and
        gather; the caller casts the result)."""
        pk = self.primary_key
        by_version = needs_version_order(plan)
        if dictionaries and not by_version:   # (rows of several files are gathered together there)
            schema = dictionary_strings(schema)
        if plan.vectors is not None and plan.deltas and key_filter is None:
            return self._filter_by_vectors(plan, columns, dictionary_strings(schema) if dictionaries else schema)
        base = self.read_file(plan.base.file, columns, schema, key_filter, ops=False) if plan.base else None
        if not plan.deltas:
            return base if base is not None else pa.schema([schema.field(c) for c in columns]).empty_table()
        if not by_version and all(fe.file.level == 0 for fe in plan.deltas):
            dense = self._merge_dense(base, plan.deltas, columns, schema, key_filter)
            if dense is not None:
                return dense
        if by_version:
            changed, upserts = self._merge_by_version(plan, columns, schema, key_filter)
        else:
            changed, upserts = self._merge_ordered(plan.deltas, columns, schema, key_filter)
        if base is None or base.num_rows == 0:
            return upserts
        return pa.concat_tables([without_keys(base, changed, pk), upserts])

    def _filter_by_vectors(self, plan: BucketPlan, columns: list[str], schema: pa.Schema) -> pa.Table:
        """Every file's rows but those its deletion vector marks and the deletes, concatenated. (Only for a
        whole file: a key filter read with the file would shift the positions; such reads merge by key.) A file
        without deletes is gathered at the vector's complement, with no mask built."""
        vectors = read_vectors(self.storage, plan.vectors)
        out = []
        for fe in plan.files:
            f = fe.file
            deletes = f.kind == "delta" and f.deletes > 0
            t = self.read_file(f, columns, schema, ops=deletes)
            superseded = vectors.get(f.path)
            if superseded and superseded.max() >= t.num_rows:   # (a damaged vectors file: never gather past a file)
                raise CorruptDataFile(plan.vectors.path, f"it marks row {superseded.max()} of {f.path}, which has "
                                                         f"{t.num_rows} rows")
            if deletes:
                keep = t.column(OP).to_numpy() == OP_UPSERT
                if superseded is not None:
                    keep[positions(superseded)] = False
                out.append(_rows_where(t.select(columns), keep))
            elif superseded is not None:
                out.append(_rows_at(t, kept_positions(superseded, t.num_rows)))
            else:
                out.append(t)
        return pa.concat_tables(out)

    def _merge_dense(self, base: pa.Table | None, deltas: Sequence[FileEntry], columns: list[str], schema: pa.Schema,
                     key_filter: pc.Expression | None) -> pa.Table | None:
        """A base and L0 deltas in version order (one row per key in each file), merged by one bitmap over the
        key range instead of a sort and a search: files newest first, each keeps the rows whose key no newer
        file had, then marks its keys. Only for one integer key column whose range is at most
        DENSE_SPAN_PER_ROW times the rows read (and DENSE_MAX_SPAN): the bitmap is one byte per value of the
        range. None: the keys are not such (the caller merges by key)."""
        if len(self.primary_key) != 1:
            return None
        newest_first = [self.read_file(fe.file, columns, schema, key_filter, ops=fe.file.deletes > 0)
                        for fe in reversed(deltas)] + ([base] if base is not None else [])
        keys = [int_key(t, self.primary_key) for t in newest_first]
        if any(k is None for k in keys):
            return None
        present = [k for k in keys if len(k)]
        if not present:
            return pa.schema([schema.field(c) for c in columns]).empty_table()
        lo, hi = min(int(k.min()) for k in present), max(int(k.max()) for k in present)
        span = hi - lo + 1
        if span > min(DENSE_MAX_SPAN, DENSE_SPAN_PER_ROW * sum(len(k) for k in keys)):
            return None
        seen = np.zeros(span, dtype=bool)
        out = []
        for t, k in zip(newest_first, keys):
            at = k - lo
            keep = ~seen[at]
            seen[at] = True
            if OP in t.column_names:   # (a delete hides older rows of its key, and is no row itself)
                keep &= t.column(OP).to_numpy() == OP_UPSERT
            out.append(_rows_where(t.select(columns), keep))
        return pa.concat_tables(out)

    def _merge_ordered(self, deltas: Sequence[FileEntry], columns: list[str], schema: pa.Schema,
                       key_filter: pc.Expression | None) -> tuple[pa.Table, pa.Table]:
        """Deltas whose files are in version order: (the keys they change, their live rows). The
        oldest delta (usually the biggest) is merged like a base: its rows survive unless a newer
        delta names their key; only the newer ones are deduplicated among themselves. ``_op`` is
        read only from files that hold deletes."""
        pk = self.primary_key
        parts = []
        for fe in reversed(deltas):                           # newest file first
            t = self.read_file(fe.file, columns, schema, key_filter, ops=fe.file.deletes > 0)
            if fe.file.level > 0:                              # a clustered file: its newest row per key
                newest_first = t.take(_reversed(t.num_rows))
                t = newest_first.take(first_indices(newest_first, pk))
            parts.append((fe.file.deletes > 0, t))
        has_deletes, oldest = parts[-1]
        newer = parts[:-1]
        if not newer:
            return oldest.select(pk), _upserts(oldest, columns, has_deletes)
        newer_keys = pa.concat_tables([t.select(pk) for _, t in newer])
        if len(newer) == 1:
            # one file's keys: sorted (an L0 file, or a clustered one deduplicated by first_indices)
            live = [_upserts(without_keys(oldest, newer_keys, pk), columns, has_deletes),
                    _upserts(newer[0][1], columns, newer[0][0])]
        else:   # the first row of every key in newest-first order: one mask over all newer parts
            ints = int_key(newer_keys, pk)   # (a copy of the concatenation's keys: made once)
            if ints is not None:
                firsts = first_of_each_key(ints)
                changed = pa.table({pk[0]: np.take(ints, firsts)})   # (in key order)
            else:
                plain_keys = pa.table({k: _decoded(newer_keys.column(k)) for k in pk})
                firsts = np.asarray(first_indices(plain_keys, pk))
                changed = plain_keys.take(firsts)
            live = [_upserts(without_keys(oldest, changed, pk), columns, has_deletes)]
            keep = np.zeros(newer_keys.num_rows, dtype=bool)
            keep[firsts] = True
            if any(deletes for deletes, _ in newer):
                ops = np.concatenate([t.column(OP).to_numpy() if deletes else np.zeros(t.num_rows, np.int8)
                                      for deletes, t in newer])
                keep &= ops == OP_UPSERT
            start = 0
            for _, t in newer:   # part by part: most keep every row (reused as read) or none (a delete file)
                live.append(_rows_where(t.select(columns), keep[start:start + t.num_rows]))
                start += t.num_rows
        return pa.concat_tables([oldest.select(pk), newer_keys]), pa.concat_tables(live)

    def _merge_by_version(self, plan: BucketPlan, columns: list[str], schema: pa.Schema,
                          key_filter: pc.Expression | None) -> tuple[pa.Table, pa.Table]:
        """Deltas overlapping in versions, or a clustered file straddling the base: every row with
        its commit version, newest first, then the first row per key."""
        parts = []
        for fe in reversed(plan.deltas):
            t = self.read_file(fe.file, columns, schema, key_filter, versions=True)
            parts.append(t.take(_reversed(t.num_rows)) if fe.file.level > 0 else t)
        d = pa.concat_tables(parts)
        d = d.filter(pc.greater(d.column(COMMIT_VERSION), plan.base_version))   # rows the base already has
        d = d.take(np.argsort(-d.column(COMMIT_VERSION).to_numpy(), kind="stable"))
        d = d.take(first_indices(d, self.primary_key))
        return d.select(self.primary_key), _upserts(d, columns, True)

    def read_snapshot(self, plans: Sequence[BucketPlan], schema: pa.Schema, columns: Sequence[str],
                      expression: pc.Expression | None, key_filter: pc.Expression | None) -> pa.Table:
        """Merge every planned bucket (in parallel), then apply the row filter, keep ``columns``."""
        read_cols = [c for c in schema.names if c in set(self.primary_key) | set(columns) |
                     (set(schema.names) if expression is not None else set())]
        out_schema = pa.schema([schema.field(c) for c in read_cols])
        parts = self.map_files(lambda p: self.merge_bucket(p, read_cols, schema, key_filter, dictionaries=True)
                          .cast(out_schema), list(plans), sum(fe.file.rows for p in plans for fe in p.files))
        out = pa.concat_tables(parts) if parts else out_schema.empty_table()
        if expression is not None and out.num_rows:
            out = out.filter(expression)
        return out.select(list(columns))

    # ------------------------------------------------------------ increments
    def read_changes(self, files: Iterable[FileEntry], schema: pa.Schema, columns: Sequence[str],
                     expression: pc.Expression | None, timestamps: Mapping[int, int], *,
                     op_codes: bool = False) -> pa.Table:
        """Every change in ``files`` (L0 deltas, commit order) as ``columns`` + ``_op``
        ('upsert'/'delete'), ``_commit_version``, ``_commit_time``, ordered by commit, then key.
        ``op_codes``: ``_op`` as stored, int8 0 upsert / 1 delete (for the change feed)."""
        files = list(files)
        out_schema = pa.schema([schema.field(c) for c in columns] + [
            pa.field(OP, pa.string()), pa.field(COMMIT_VERSION, pa.int64()), pa.field(COMMIT_TIME, COMMIT_TIME_TYPE)])
        if op_codes:
            out_schema = out_schema.set(len(columns), pa.field(OP, pa.int8()))
        if not files:
            return out_schema.empty_table()
        needed = set(self.primary_key) | set(columns) | (set(schema.names) if expression is not None else set())
        read_cols = [c for c in schema.names if c in needed]
        # L0 files: every row's version and time is its file's commit's, so they are not read but
        # built once for the whole result; strings stay dictionary-encoded until the end
        # (the key stays plain: it is sorted, and Arrow does not sort dictionaries)
        stored = dictionary_strings(schema, self.primary_key)
        parts = self.map_files(lambda fe: self.read_file(fe.file, read_cols, stored), files,
                          sum(fe.file.rows for fe in files))
        t = (pa.concat_tables(parts) if len(parts) > 1 else parts[0]).unify_dictionaries()
        n = t.num_rows
        one_commit = files[0].file.min_version == files[-1].file.max_version
        if one_commit and expression is None:
            # every row of one commit: ordered by key alone; its version and time are constant
            # columns, added after the gather. (Indices from the table's own sort need no bounds check.)
            t = pc.take(t, sort_indices_by_key(t, self.primary_key), boundscheck=False)
            v = files[0].file.min_version
            t = t.append_column(pa.field(COMMIT_VERSION, pa.int64()), pa.array(np.full(n, v, np.int64)))
            t = t.append_column(pa.field(COMMIT_TIME, COMMIT_TIME_TYPE),
                                pa.array(np.full(n, timestamps[v], np.int64)).view(COMMIT_TIME_TYPE))
        else:
            counts = [p.num_rows for p in parts]
            versions = np.repeat(np.array([fe.file.min_version for fe in files], dtype=np.int64), counts)
            times = np.repeat(np.array([timestamps[fe.file.min_version] for fe in files], dtype=np.int64), counts)
            t = t.append_column(pa.field(COMMIT_VERSION, pa.int64()), pa.array(versions))
            t = t.append_column(pa.field(COMMIT_TIME, COMMIT_TIME_TYPE), pa.array(times).view(COMMIT_TIME_TYPE))
            if expression is not None:
                t = t.filter(expression)
            if one_commit:
                order = sort_indices_by_key(t, self.primary_key)
            else:
                order = pc.sort_indices(t, sort_keys=[(COMMIT_VERSION, "ascending")] +
                                        [(k, "ascending") for k in self.primary_key])
            t = pc.take(t, order, boundscheck=False)
        if not op_codes:
            t = t.set_column(t.schema.get_field_index(OP), pa.field(OP, pa.string()),
                             pc.take(_OP_LABELS, t.column(OP)))
        return t.select(list(columns) + [OP, COMMIT_VERSION, COMMIT_TIME]).cast(out_schema)
