"""Point lookups of many keys in one version of a table: the live row of each key (the change feed's
before-images, change_feed.py).

Only the buckets the keys hash to are read. In a bucket whose files are in version order (the usual
case) the files are probed newest first, each for the keys no newer file had: a file whose key range
holds none of them is not opened; otherwise it is read (files are sorted by key, so a binary search
finds the rows) and only the matching rows are kept. (Reading the key column first and the others only
where some key is found cost more: a second open per file, and nearly every file holds some key.) A
bucket merged by row versions (overlapping clustered files), or a key that is not one integer column,
is merged whole, then filtered to the keys.

A :class:`DecodedFiles` cache keeps probed files decoded between lookups (data files are immutable):
a writer producing change files at every commit (change_files.py) then decodes a bucket's big older
files once, not at every commit, as Paimon's lookup changelog producer keeps its lookup files.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa

from tidelake.storage import Storage

from .files import OP, OP_UPSERT, bucket_ids
from .key_order import int_key
from .metadata import FileEntry, TableMetadata
from .reader import MergeOnReadReader, dictionary_strings, needs_version_order
from .scan import BucketPlan, ScanPlanner


def rows_with_keys(rows: pa.Table, keys: pa.Table, primary_key: Sequence[str]) -> pa.Table:
    """The rows of ``rows`` whose key is in ``keys``, in ``rows``' order. Joined on the key columns and a row
    number only: Acero's join carries no list or struct column (an aggregate sink's min/max state)."""
    numbered = rows.select(list(primary_key)).append_column("__position",
                                                            pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    found = numbered.join(keys.select(list(primary_key)), keys=list(primary_key), join_type="left semi")
    return rows.take(np.sort(found.column("__position").to_numpy()))


class DecodedFiles:
    """Decoded data files, least recently used dropped first beyond ``limit_bytes`` (thread-safe)."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes = limit_bytes
        self._tables: OrderedDict[tuple, pa.Table] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def resize(self, limit_bytes: int) -> None:
        """Keep at most ``limit_bytes`` from now on (dropping the least recently used beyond it)."""
        with self._lock:
            self.limit_bytes = limit_bytes
            self._evict()

    def _evict(self) -> None:
        while self._bytes > self.limit_bytes:
            _, old = self._tables.popitem(last=False)
            self._bytes -= old.get_total_buffer_size()

    def get(self, key: tuple, read: Callable[[], pa.Table]) -> pa.Table:
        """The table cached under ``key`` (a file's path and how it was read), else ``read()``, kept."""
        with self._lock:
            t = self._tables.get(key)
            if t is not None:
                self._tables.move_to_end(key)
                return t
        t = read()   # (outside the lock: other buckets' files are read meanwhile)
        size = t.get_total_buffer_size()
        with self._lock:
            if key not in self._tables and size <= self.limit_bytes:
                self._tables[key] = t
                self._bytes += size
                self._evict()
        return t


class KeyLookup:
    """Looks keys up in the versions of one metadata snapshot (``cache``: keep the files it decodes)."""

    def __init__(self, storage: Storage, metadata: TableMetadata, reader: MergeOnReadReader,
                 cache: DecodedFiles | None = None):
        self.storage = storage
        self.md = metadata
        self.reader = reader
        self.cache = cache
        self.primary_key = list(metadata.primary_key)

    def rows(self, version: int, keys: pa.Table, columns: Sequence[str], schema: pa.Schema) -> pa.Table:
        """The rows live at ``version`` whose key is in ``keys`` (distinct keys), as ``columns`` of ``schema``
        (which must include the key); keys not live then are absent. In no particular order."""
        out_schema = pa.schema([schema.field(c) for c in columns])
        if keys.num_rows == 0 or version <= 0:
            return out_schema.empty_table()
        pk = self.primary_key
        ids = bucket_ids(keys.select(pk), pk, self.md.bucket_num)
        order = np.argsort(ids.astype(np.int16) if self.md.bucket_num <= 1 << 15 else ids, kind="stable")  # (radix)
        bounds = np.searchsorted(ids[order], np.arange(self.md.bucket_num + 1))
        by_bucket = {b: order[bounds[b]:bounds[b + 1]] for b in range(self.md.bucket_num) if bounds[b + 1] > bounds[b]}
        plans = ScanPlanner(self.md).snapshot(version, buckets=set(by_bucket))
        parts = self.reader.map_files(lambda p: self._bucket(p, keys.take(by_bucket[p.bucket]), list(columns), schema),
                                      plans, sum(fe.file.rows for p in plans for fe in p.files))
        return pa.concat_tables([p.cast(out_schema) for p in parts]) if parts else out_schema.empty_table()

    def bucket_rows(self, plan: BucketPlan | None, keys: pa.Table, columns: Sequence[str],
                    schema: pa.Schema) -> pa.Table:
        """As :meth:`rows` for keys all in one bucket, given its plan (``ScanPlanner.snapshot``; None: the
        bucket has no file)."""
        out_schema = pa.schema([schema.field(c) for c in columns])
        if plan is None or keys.num_rows == 0:
            return out_schema.empty_table()
        return self._bucket(plan, keys, list(columns), schema).cast(out_schema)

    def _bucket(self, plan: BucketPlan, keys: pa.Table, columns: list[str], schema: pa.Schema) -> pa.Table:
        wanted = int_key(keys, self.primary_key)
        if wanted is None or needs_version_order(plan) or any(fe.file.level > 0 for fe in plan.deltas):
            live = self.reader.merge_bucket(plan, columns, schema)
            # (one dictionary per column: the join cannot unify the files' different ones)
            return rows_with_keys(live.unify_dictionaries(), keys, self.primary_key)
        if len(wanted) > 1 and not (wanted[1:] > wanted[:-1]).all():   # (one commit's keys come sorted)
            wanted = np.sort(wanted)
        return self._probe(plan, wanted, columns, schema)

    def _probe(self, plan: BucketPlan, wanted: np.ndarray, columns: list[str], schema: pa.Schema) -> pa.Table:
        """Files newest first (each sorted by its one integer key), each for the keys no newer file had
        (``wanted``: sorted, distinct)."""
        key = self.primary_key[0]
        stored = dictionary_strings(schema)   # (strings gathered as stored, cast once at the end)
        remaining = wanted
        parts = []
        newest_first: list[FileEntry] = list(reversed(plan.deltas)) + ([plan.base] if plan.base else [])
        for fe in newest_first:
            if not len(remaining):
                break
            f = fe.file
            lo, hi = 0, len(remaining)
            if f.key_min is not None and f.key_max is not None and None not in (f.key_min[0], f.key_max[0]):
                lo = int(np.searchsorted(remaining, f.key_min[0], side="left"))
                hi = int(np.searchsorted(remaining, f.key_max[0], side="right"))
            if hi <= lo:
                continue
            candidates = remaining[lo:hi]
            deletes = f.kind == "delta" and f.deletes > 0
            if self.cache is None:
                read = self.reader.read_file(f, columns, stored, ops=deletes)
            else:
                read = self.cache.get((f.path, tuple(columns), stored, deletes),
                                      lambda: self.reader.read_file(f, columns, stored, ops=deletes))
            file_keys = read.column(key).to_numpy()
            if not len(file_keys):
                continue
            pos = np.minimum(np.searchsorted(file_keys, candidates), len(file_keys) - 1)
            hit = file_keys[pos] == candidates
            # a key found here is live or deleted here: older files are not asked for it
            remaining = np.concatenate([remaining[:lo], candidates[~hit], remaining[hi:]])
            rows = pos[hit]
            if deletes:
                rows = rows[read.column(OP).to_numpy()[rows] == OP_UPSERT]
            if len(rows):
                parts.append(read.select(columns).take(pa.array(rows)))
        out = pa.schema([stored.field(c) for c in columns])
        return pa.concat_tables(parts) if parts else out.empty_table()
