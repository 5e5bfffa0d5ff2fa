"""The change feed with before-images (SPEC T13): every change of (start, end] as the rows it removed and
the rows it made, as Delta's change data feed names them.

``_op`` of a row:

- ``insert``: an upsert of a key that did not exist — the new row;
- ``update_preimage`` then ``update_postimage``: an upsert of a key that existed — the row as it was, then
  as it is (both carry the upsert's ``_commit_version`` / ``_commit_time``);
- ``delete``: a delete of a key that existed — the row it removed.

A delete of a key that did not exist yields nothing (as in Delta, whose change data feed records only rows
a command removed). Versions written by clustering and compaction carry no changes (their files are not
read, as for ``Table.changes``).

Where the before-image comes from: for a key's first change in the range, the table's own state at the
range start, looked up by key (:class:`KeyLookup`: only the buckets the changed keys hash to, and in each
only the rows of those keys); for a later change of the same key, its previous change in the range. No
full scan: the lookup reads a file's key column first and gathers only the matching rows.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.storage import Storage

from .errors import CorruptDataFile, VersionExpired
from .files import COMMIT_TIME, COMMIT_TIME_TYPE, COMMIT_VERSION, OP, OP_DELETE, conform, read_parquet
from .key_lookup import KeyLookup
from .key_order import int_key, sort_indices_by_key, stable_argsort
from .metadata import FileEntry, TableMetadata
from .reader import MergeOnReadReader, dictionary_strings
from .scan import ScanFilter, ScanPlanner
from .versions import VersionResolver

INSERT = "insert"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"
DELETE = "delete"
#: every ``_op`` of a change feed with before-images, in the order of their codes
CHANGE_TYPES = (INSERT, UPDATE_PREIMAGE, UPDATE_POSTIMAGE, DELETE)
_INSERT, _PREIMAGE, _POSTIMAGE, _DELETE = range(4)
_LABELS = pa.array(CHANGE_TYPES, pa.string())


def change_schema(schema: pa.Schema, columns: Sequence[str]) -> pa.Schema:
    """The schema of a change feed: ``columns`` of the table, then ``_op``, ``_commit_version``, ``_commit_time``."""
    return pa.schema([schema.field(c) for c in columns] + [
        pa.field(OP, pa.string()), pa.field(COMMIT_VERSION, pa.int64()), pa.field(COMMIT_TIME, COMMIT_TIME_TYPE)])


class ChangeFeed:
    """Reads the changes of one metadata snapshot with their before-images."""

    def __init__(self, storage: Storage, metadata: TableMetadata, reader: MergeOnReadReader, now_ms: int):
        self.storage = storage
        self.md = metadata
        self.reader = reader
        self.resolver = VersionResolver(metadata, now_ms)
        self.primary_key = list(metadata.primary_key)

    def _check_start_readable(self, start: int, end: int) -> None:
        """The before-images of (start, end] are looked up in the table as of ``start``: that version must
        still be readable (version 0, the creation, is the empty table)."""
        if start <= 0 or end <= start:
            return
        horizon = self.resolver.horizon()
        if start < horizon:
            raise VersionExpired(
                f"before-images of the increment ({start}, {end}] need the table as of version {start}, which is "
                f"older than the retention horizon: the oldest readable version is {horizon} "
                f"(acid.data.retain.hours={self.resolver.retain_hours})")

    def read(self, start: int, end: int, filter: ScanFilter, columns: Sequence[str],
             buckets: set[int] | None = None) -> pa.Table:
        """Every change of (start, end] with before-images, as ``columns`` + ``_op`` (``CHANGE_TYPES``),
        ``_commit_version``, ``_commit_time``; ordered by commit, then key, a preimage before its
        postimage. ``filter``'s key tuples prune files; its expression applies to the images. ``buckets``:
        only the changes of those buckets (a key's changes and images are all in its bucket)."""
        self._check_start_readable(start, end)
        pk = self.primary_key
        schema = self.md.schema_at(end)
        wanted = list(columns)
        needed = set(pk) | set(wanted) | filter.columns(schema)
        read_cols = [c for c in schema.names if c in needed]
        files = ScanPlanner(self.md).incremental(start, end, filter, buckets)
        key_filter = filter.on_key(pk)
        parts = []
        run_start = start
        for stored, run in _runs(files):
            if stored:
                parts.append(self._stored(run, schema, read_cols, key_filter))
            else:
                raw = self.reader.read_changes(run, schema, read_cols, key_filter, self.md.timestamps, op_codes=True)
                parts.append(self._with_images(raw, run_start, schema, read_cols))
            run_start = run[-1].file.min_version
        out_schema = change_schema(schema, read_cols)
        out = (pa.concat_tables([p.cast(out_schema) for p in parts]) if len(parts) > 1 else
               parts[0] if parts else out_schema.empty_table())
        if filter.expression is not None and out.num_rows:
            out = out.filter(filter.expression)
        return out.select(wanted + [OP, COMMIT_VERSION, COMMIT_TIME]).cast(change_schema(schema, wanted))

    def _stored(self, files: list[FileEntry], schema: pa.Schema, columns: list[str],
                key_filter: pc.Expression | None) -> pa.Table:
        """The image rows the change files of ``files`` (L0 deltas, commit order) hold, ordered by commit,
        then key (the sorts are stable: a preimage stays before its postimage)."""
        stored = dictionary_strings(schema, self.primary_key)
        target = pa.schema([stored.field(c) for c in columns])
        strings = [c for c in columns if pa.types.is_dictionary(target.field(c).type)]

        def one(fe: FileEntry) -> pa.Table:
            try:
                t = read_parquet(self.storage, replace(fe.file, path=fe.file.changes), columns + [OP], key_filter,
                                 strings=strings)
            except FileNotFoundError:
                raise VersionExpired(f"change file {fe.file.changes} of version {fe.file.min_version} is missing: "
                                     f"removed by retention cleanup, or lost (`tidelake table check`)") from None
            except (pa.ArrowInvalid, OSError) as e:
                raise CorruptDataFile(str(fe.file.changes), str(e)) from e
            return conform(t, target, extra=[pa.field(OP, pa.int8())])
        parts = self.reader.map_files(one, files, sum(fe.file.rows for fe in files))
        t = (pa.concat_tables(parts) if len(parts) > 1 else parts[0]).unify_dictionaries()
        one_version = files[0].file.min_version == files[-1].file.min_version
        versions = (np.full(t.num_rows, files[0].file.min_version, dtype=np.int64) if one_version else
                    np.repeat(np.array([fe.file.min_version for fe in files], dtype=np.int64),
                              [p.num_rows for p in parts]))
        keys = int_key(t, self.primary_key)
        if one_version and keys is not None:
            # one sorted run per file: numpy's stable sort merges runs (several times faster here
            # than the packed sort, which does not look for them)
            order = np.argsort(keys, kind="stable")
        elif one_version:
            order = sort_indices_by_key(t, self.primary_key)
        else:
            order = pc.sort_indices(t.append_column(COMMIT_VERSION, pa.array(versions)),
                                    sort_keys=[(COMMIT_VERSION, "ascending")] +
                                    [(k, "ascending") for k in self.primary_key]).to_numpy()
            versions = versions[order]
        t = pc.take(t, order, boundscheck=False)
        return pa.table([*t.select(columns).columns, pc.take(_LABELS, t.column(OP)), pa.array(versions),
                         pa.array(_times(self.md.timestamps, versions)).view(COMMIT_TIME_TYPE)],
                        schema=pa.schema(list(target) + [pa.field(OP, pa.string()), pa.field(COMMIT_VERSION, pa.int64()),
                                                         pa.field(COMMIT_TIME, COMMIT_TIME_TYPE)]))

    def _with_images(self, raw: pa.Table, start: int, schema: pa.Schema, columns: list[str]) -> pa.Table:
        """``raw`` (changes ordered by commit, then key; ``_op`` int8 as stored) as image rows."""
        if raw.num_rows == 0:
            return change_schema(schema, columns).empty_table()
        lookup = KeyLookup(self.storage, self.md, self.reader)
        images = build_images(raw, lambda keys: lookup.rows(start, keys, columns, schema), self.primary_key, columns)
        out = images.rows.append_column(pa.field(OP, pa.string()), _LABELS.take(pa.array(images.codes)))
        for name in (COMMIT_VERSION, COMMIT_TIME):
            out = out.append_column(raw.schema.field(name), raw.column(name).take(pa.array(images.changes)))
        return out


@dataclass(frozen=True)
class Images:
    """Changes as image rows: ``rows`` (the image columns), ``codes`` (int8 index into ``CHANGE_TYPES``)
    and ``changes`` (for each image row, the index of the change it belongs to)."""
    rows: pa.Table
    codes: np.ndarray
    changes: np.ndarray


def build_images(raw: pa.Table, before_of: Callable[[pa.Table], pa.Table], primary_key: list[str],
                 columns: list[str], distinct_keys: bool = False) -> Images:
    """The images of ``raw`` (changes ordered by commit, then key; ``_op`` int8 as stored), in raw order:
    a key's first change replaces its row in ``before_of(keys)`` (the live rows of those distinct keys
    before the first change, as ``columns``), a later change the key's previous change.
    ``distinct_keys``: no key changes twice in ``raw`` (one commit's delta files of distinct buckets)."""
    pk = primary_key
    n = raw.num_rows
    deletes = raw.column(OP).to_numpy() == OP_DELETE
    if distinct_keys:
        by_key = np.arange(n, dtype=np.int64)
        first = np.ones(n, dtype=bool)
    else:
        # by key, each key's changes in the order they happened (raw's order within a key)
        by_key = _key_order(raw, pk)
        first = np.ones(n, dtype=bool)
        first[1:] = ~_same_key_as_previous(raw.select(pk).take(by_key), pk)
    first_rows = by_key[first]
    first_keys = raw.select(pk).take(first_rows)
    before = before_of(first_keys)   # only the keys that were live come back
    found = _positions(first_keys, before, pk)   # index into ``before`` or -1
    # the image each change replaced: index into concat([before, raw]), or -1 for none
    replaced_sorted = np.full(n, -1, dtype=np.int64)
    replaced_sorted[first] = found
    later = np.flatnonzero(~first)
    previous = by_key[later - 1]
    replaced_sorted[later] = np.where(deletes[previous], -1, before.num_rows + previous)
    replaced = np.empty(n, dtype=np.int64)
    replaced[by_key] = replaced_sorted
    # each change as 0 (delete of nothing), 1 (insert, delete) or 2 (preimage, postimage) rows, in raw order
    had = replaced >= 0
    counts = np.where(deletes, had.astype(np.int64), np.where(had, 2, 1))
    change = np.repeat(np.arange(n, dtype=np.int64), counts)
    second = np.zeros(len(change), dtype=bool)
    starts = np.cumsum(counts) - counts
    second[starts[counts == 2] + 1] = True
    d, h = deletes[change], had[change]
    code = np.where(d, _DELETE, np.where(~h, _INSERT, np.where(second, _POSTIMAGE, _PREIMAGE))).astype(np.int8)
    own = (code == _INSERT) | (code == _POSTIMAGE)
    source = np.where(own, before.num_rows + change, replaced[change])
    images = pa.concat_tables([before.select(columns), raw.select(columns)])
    return Images(images.take(pa.array(source)), code, change)


def _runs(files: list[FileEntry]) -> list[tuple[bool, list[FileEntry]]]:
    """``files`` (L0 deltas, commit order) as runs of consecutive versions that all have change files
    (True) or not (False)."""
    runs: list[tuple[bool, list[FileEntry]]] = []
    by_version: dict[int, list[FileEntry]] = {}
    for fe in files:
        by_version.setdefault(fe.file.min_version, []).append(fe)
    for fes in by_version.values():
        stored = all(fe.file.changes for fe in fes)
        if runs and runs[-1][0] == stored:
            runs[-1][1].extend(fes)
        else:
            runs.append((stored, list(fes)))
    return runs


def _times(timestamps: Mapping[int, int], versions: np.ndarray) -> np.ndarray:
    """The commit time (ms) of each of ``versions`` (ascending)."""
    if not len(versions) or versions[0] == versions[-1]:
        return np.full(len(versions), timestamps[int(versions[0])] if len(versions) else 0, dtype=np.int64)
    starts = np.flatnonzero(np.diff(versions)) + 1   # (where each version's rows begin, after the first)
    counts = np.diff(np.concatenate([[0], starts, [len(versions)]]))
    distinct = versions[np.concatenate([[0], starts])]
    return np.repeat(np.array([timestamps[int(v)] for v in distinct], dtype=np.int64), counts)


def _key_order(t: pa.Table, primary_key: list[str]) -> np.ndarray:
    """Row indices ordered by key, rows of one key in their order in ``t`` (a stable sort)."""
    keys = int_key(t, primary_key)
    if keys is not None:
        if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()):   # (one commit's changes are in key order)
            return np.arange(len(keys), dtype=np.int64)
        # sorted runs (a commit's files, or several commits): numpy's stable sort merges them
        return np.argsort(keys, kind="stable")
    row = "__row"
    with_row = t.select(primary_key).append_column(row, pa.array(np.arange(t.num_rows, dtype=np.int64)))
    return pc.sort_indices(with_row, sort_keys=[(k, "ascending") for k in primary_key] + [(row, "ascending")]
                           ).to_numpy()


def _same_key_as_previous(keys_sorted: pa.Table, primary_key: list[str]) -> np.ndarray:
    """For rows 1..n-1 of key-sorted keys: True where the key equals the row before's."""
    same = np.ones(keys_sorted.num_rows - 1, dtype=bool)
    for k in primary_key:
        col = keys_sorted.column(k).combine_chunks()
        same &= pc.equal(col.slice(1), col.slice(0, len(col) - 1)).to_numpy(zero_copy_only=False)
    return same


def _positions(keys: pa.Table, rows: pa.Table, primary_key: list[str]) -> np.ndarray:
    """For each key of ``keys`` (distinct), the index of its row in ``rows`` (distinct keys), or -1."""
    out = np.full(keys.num_rows, -1, dtype=np.int64)
    if rows.num_rows == 0:
        return out
    mine, theirs = int_key(keys, primary_key), int_key(rows, primary_key)
    if mine is not None and theirs is not None:
        order = stable_argsort(theirs)   # (distinct keys: any order would do; this sort is the fastest)
        pos = np.minimum(np.searchsorted(theirs, mine, sorter=order), len(theirs) - 1)
        hit = theirs[order[pos]] == mine
        out[hit] = order[pos[hit]]
        return out
    left, right = "__left", "__right"
    a = keys.select(primary_key).append_column(left, pa.array(np.arange(keys.num_rows, dtype=np.int64)))
    b = rows.select(primary_key).append_column(right, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    joined = a.join(b, keys=primary_key, join_type="inner")
    out[joined.column(left).to_numpy()] = joined.column(right).to_numpy()
    return out

