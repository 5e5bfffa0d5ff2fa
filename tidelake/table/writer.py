"""Staging: turning user rows into L0 delta files, one per bucket, not yet visible.

``prepare`` checks and conforms rows to the table schema and tags them with ``_op``; ``stage`` keeps
the last change of every key (arrival order), buckets them by the stable hash of the key, sorts each
bucket by the key and writes one Parquet file per bucket. A commit (``commit.py``) makes them visible.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.storage import Storage

from .errors import SchemaError
from .files import (IO_THREADS, OP, OP_DELETE, OP_UPSERT, DataFile, bucket_ids, check_keys, conform, local_threads,
                    map_in_groups, parallel_map, shared_pool, to_arrow, write_parquet)
from .key_order import sort_indices_by_key, stable_argsort

_HASH_SLICE_ROWS = 256 * 1024   # below this a batch hashes in one go
STAGE_OPS = {"upsert": OP_UPSERT, "insert": OP_UPSERT, "delete": OP_DELETE}
# 'changes': the operation is per row, in the data's own ``_op`` column (int8: 0 upsert, 1 delete)
CHANGES = "changes"


def _last_of_each_key(sorted_keys: pa.Table | np.ndarray, primary_key: Sequence[str]) -> np.ndarray:
    """Mask of the rows of a key-sorted table whose key differs from the next row's (the last row
    of every run of equal keys)."""
    if isinstance(sorted_keys, np.ndarray):
        n = len(sorted_keys)
        mask = np.ones(n, dtype=bool)
        if n > 1:
            mask[:-1] = sorted_keys[1:] != sorted_keys[:-1]
        return mask
    n = sorted_keys.num_rows
    if n <= 1:
        return np.ones(n, dtype=bool)
    change = None
    for k in primary_key:
        col = sorted_keys.column(k)
        ne = pc.fill_null(pc.not_equal(col.slice(0, n - 1), col.slice(1)), True)
        change = ne if change is None else pc.or_(change, ne)
    return np.append(change.to_numpy(zero_copy_only=False), True)


class DeltaWriter:
    """Stages rows of one table as L0 delta files on its storage."""

    def __init__(self, storage: Storage, primary_key: Sequence[str], bucket_num: int, every_change: bool = False):
        self.storage = storage
        self.primary_key = list(primary_key)
        self.bucket_num = bucket_num
        #: stage every change of a key (in arrival order), not only its last: the table's merge engine
        #: combines them when the commit is published (engine_commit.py)
        self.every_change = every_change

    def prepare(self, data: Any, op: int, schema: pa.Schema) -> pa.Table:
        """Rows (pa.Table / RecordBatch / pandas / list of dicts) checked and conformed to ``schema``,
        plus ``_op``. A delete keeps only the key columns."""
        t = to_arrow(data, schema)
        check_keys(t, self.primary_key)
        if op == OP_DELETE:
            t = t.select(self.primary_key)
        unknown = [c for c in t.column_names if c not in schema.names and c != OP]
        if unknown:
            raise SchemaError(f"columns {unknown} are not in the table schema {schema.names}")
        t = conform(t, schema)
        return t.append_column(OP, pa.array(np.full(t.num_rows, op, np.int8)))

    def keys(self, keys: Any, schema: pa.Schema) -> pa.Table:
        """Key columns from a pa.Table / list of dicts, or a list of values (one-column key) or of
        tuples (composite key)."""
        pk = self.primary_key
        key_schema = pa.schema([schema.field(k) for k in pk])
        if isinstance(keys, list) and keys and not isinstance(keys[0], dict):
            if len(pk) != 1:
                keys = [dict(zip(pk, k)) for k in keys]
            else:
                return pa.table({pk[0]: pa.array(keys, type=schema.field(pk[0]).type)})
        t = key_schema.empty_table() if isinstance(keys, list) and not keys else to_arrow(keys, schema)
        check_keys(t, pk)
        return conform(t.select(pk), key_schema)

    def stage(self, rows: pa.Table) -> list[DataFile]:
        """Write prepared rows (user columns + _op, in arrival order) as L0 delta files, one per bucket:
        the last change per key, sorted by key. Not visible until committed."""
        if rows.num_rows == 0:
            return []
        pk = self.primary_key
        # bucket numbers in the smallest integer type that holds them: less to write, count and sort
        small = np.uint8 if self.bucket_num <= 256 else np.uint16 if self.bucket_num <= 65536 else np.int32
        # hashing is numpy work that releases the GIL: big batches hash in slices, one per thread
        step = max(_HASH_SLICE_ROWS, -(-rows.num_rows // IO_THREADS))
        starts = range(0, rows.num_rows, step)
        slice_counts = [np.zeros(self.bucket_num, np.int64) for _ in starts]
        buckets = np.concatenate(self._map(
            lambda i: bucket_ids(rows.slice(starts[i], step), pk, self.bucket_num, small, slice_counts[i]),
            range(len(starts))))
        counts = np.sum(slice_counts, axis=0)
        # a stable sort by bucket groups the rows of each bucket, still in arrival order; each bucket
        # is then sorted by key, deduplicated and written in the writer threads
        order = pc.sort_indices(pa.array(buckets)).to_numpy()   # (a counting sort, into reused memory)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        jobs = [(b, order[offsets[b]:offsets[b + 1]]) for b in range(self.bucket_num) if counts[b]]
        int_keys = (rows.column(pk[0]).to_numpy() if len(pk) == 1 and pa.types.is_integer(rows.schema.field(pk[0]).type)
                    else None)   # (once: a key column of several chunks is copied by every to_numpy)
        # keys already strictly increasing (an ordered load, say): every bucket's rows are in key order
        # and unique as they arrived, so there is nothing to sort or deduplicate
        in_key_order = int_keys is not None and bool(np.all(int_keys[1:] > int_keys[:-1]))
        return self._map(lambda job: self._write_bucket(rows, None if in_key_order else int_keys, job[0], job[1],
                                                        in_key_order), jobs)

    def _write_bucket(self, rows: pa.Table, int_keys: np.ndarray | None, bucket: int, arrival: np.ndarray,
                      in_key_order: bool = False) -> DataFile:
        """One bucket's rows (indices in arrival order): the last change per key, in key order.
        ``int_keys``: the key column as numpy, when it is one integer column. ``in_key_order``: the
        rows arrive in strictly increasing key order already."""
        pk = self.primary_key
        if in_key_order:
            chosen = arrival
        elif int_keys is not None:
            keys = int_keys[arrival]
            # a stable sort keeps arrival order among equal keys: the last of each run wins
            by_key = stable_argsort(keys)
            keep = True if self.every_change else _last_of_each_key(keys[by_key], pk)
            chosen = arrival[by_key] if np.all(keep) else arrival[by_key[keep]]
        else:
            key_rows = rows.select(pk).take(arrival)
            by_key = np.asarray(sort_indices_by_key(key_rows, pk))
            keep = True if self.every_change else _last_of_each_key(key_rows.take(by_key), pk)
            chosen = arrival[by_key] if np.all(keep) else arrival[by_key[keep]]
        # the indices come from this batch's own sort: no bounds to check
        return write_parquet(self.storage, pc.take(rows, pa.array(chosen), boundscheck=False), kind="delta",
                             bucket=bucket, level=0, primary_key=pk)

    def _map(self, fn, items: Sequence) -> list:
        """``fn`` over ``items``, in order, in the writer threads: on a local disk (encoding is CPU
        work) one group of items per core; on an object store, whose PUTs wait on the network, one
        task per item in IO_THREADS threads."""
        if self.storage.local_path("") is None:
            return parallel_map(fn, items, pool=shared_pool(IO_THREADS))
        threads = local_threads()
        return map_in_groups(fn, items, shared_pool(threads), threads)

    def prepare_changes(self, changes: pa.Table, schema: pa.Schema) -> pa.Table:
        """Rows of ``schema``'s columns plus ``_op`` (int8, 0 upsert / 1 delete), in the order they
        happened, checked and conformed; a delete's non-key columns are nulled (it keeps only its key).
        The last change of each key wins when staged, so this is the only de-duplication."""
        check_keys(changes, self.primary_key)
        if OP not in changes.column_names:
            raise SchemaError(f"changes need an {OP} column (0 upsert, 1 delete)")
        rows = conform(changes, schema, extra=[pa.field(OP, pa.int8())])
        is_delete = pc.equal(rows.column(OP), OP_DELETE)
        if pc.any(is_delete).as_py():
            for i, field in enumerate(rows.schema):
                if field.name not in self.primary_key and field.name != OP:
                    rows = rows.set_column(i, field, pc.if_else(is_delete, pa.scalar(None, field.type), rows.column(i)))
        return rows

    def stage_files(self, data: Any, op: str, schema: pa.Schema) -> list[DataFile]:
        """``prepare`` + ``stage`` for one operation ('upsert' | 'insert' | 'delete'), or for
        'changes', whose rows carry their own ``_op``."""
        if op == CHANGES:
            return self.stage(self.prepare_changes(to_arrow(data, schema), schema))
        if op not in STAGE_OPS:
            raise ValueError(f"op must be upsert, insert, delete or changes, not {op!r}")
        return self.stage(self.prepare(data, STAGE_OPS[op], schema))


# ---------------------------------------------------------------- staged files as Arrow
# A Spark task returns the files it staged to the driver as typed Arrow values (one struct per file), never as
# text: the driver's commit takes them back as DataFiles.

KEY_HASH_BITS = 63   # key_hashes: the bucket hash taken modulo 2**63 (a power of two: a mask, no division)


def staged_file_type(key_fields: Sequence[pa.Field]) -> pa.StructType:
    """One staged ``DataFile`` as an Arrow struct; its ``key_min`` / ``key_max`` are structs of the primary key's
    columns (``key_fields``, in key order), null where the file records none."""
    keys = pa.struct([pa.field(f.name, f.type) for f in key_fields])
    return pa.struct([pa.field("path", pa.string()), pa.field("kind", pa.string()), pa.field("bucket", pa.int32()),
                      pa.field("level", pa.int32()), pa.field("rows", pa.int64()), pa.field("bytes", pa.int64()),
                      pa.field("min_version", pa.int64()), pa.field("max_version", pa.int64()),
                      pa.field("key_min", keys), pa.field("key_max", keys), pa.field("deletes", pa.int64()),
                      pa.field("changes", pa.string())])


def staged_files_array(files: Sequence[DataFile], key_fields: Sequence[pa.Field]) -> pa.Array:
    """``files`` as an Arrow array of :func:`staged_file_type`."""
    names = [f.name for f in key_fields]

    def keys(values: list | None) -> dict | None:
        return None if values is None else dict(zip(names, values))
    return pa.array([{"path": f.path, "kind": f.kind, "bucket": f.bucket, "level": f.level, "rows": f.rows,
                      "bytes": f.bytes, "min_version": f.min_version, "max_version": f.max_version,
                      "key_min": keys(f.key_min), "key_max": keys(f.key_max), "deletes": f.deletes,
                      "changes": f.changes} for f in files], staged_file_type(key_fields))


def staged_files_from_arrow(files: pa.Array | pa.ChunkedArray) -> list[DataFile]:
    """The DataFiles of an array of :func:`staged_file_type` (a column of several tasks' rows)."""
    out = []
    for row in files.to_pylist():
        for bound in ("key_min", "key_max"):
            if row[bound] is not None:
                row[bound] = list(row[bound].values())
        out.append(DataFile(**row))
    return out


def key_hashes(rows: pa.Table, primary_key: Sequence[str]) -> np.ndarray:
    """Every row's key as its stable 63-bit hash (the one the buckets are cut from; uint64): equal keys, equal
    hashes, so two sets of rows whose hashes are disjoint share no key."""
    return bucket_ids(rows, list(primary_key), 1 << KEY_HASH_BITS, np.uint64)


def changes_between(target: pa.Table, current: pa.Table, primary_key: Sequence[str], schema: pa.Schema) -> pa.Table:
    """The changes turning ``current`` into ``target``: upserts of rows new or different in target,
    deletes of keys not in target. Rows: user columns + _op."""
    pk = list(primary_key)
    suffix = "__cur"
    gone = current.select(pk).join(target.select(pk), keys=pk, join_type="left anti")
    new = target.join(current.select(pk), keys=pk, join_type="left anti")
    both = target.join(current.rename_columns([c if c in pk else c + suffix for c in current.column_names]),
                       keys=pk, join_type="inner")
    same = pa.array(np.ones(both.num_rows, dtype=bool))
    for c in schema.names:
        if c in pk:
            continue
        a, b = both.column(c), both.column(c + suffix)
        eq = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        same = pc.and_(same, eq)
    changed = both.filter(pc.invert(same)).select(schema.names) if both.num_rows else both.select(schema.names)
    ups = pa.concat_tables([conform(new, schema), conform(changed, schema)])
    ups = ups.append_column(OP, pa.array(np.zeros(ups.num_rows, np.int8)))
    dels = conform(gone, schema).append_column(OP, pa.array(np.ones(gone.num_rows, np.int8)))
    return pa.concat_tables([ups, dels])
