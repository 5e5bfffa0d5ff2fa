"""Deletion vectors written by the commit (deletion_vectors.py): for each bucket a commit adds files to, the
positions of the superseded rows of the bucket's files as the commit leaves them. A data commit that only
appends L0 deltas to a bucket adds the rows its keys supersede in the older files (and in its own earlier
files of that bucket) to the bucket's previous vectors.

As change files and merge engines do, the vectors are computed by each attempt to publish version N
against the state at N-1, not the version the writer read: a blind upsert published after another one marks
the rows that one wrote, and an attempt that loses the race for N discards its vectors files and the next
attempt computes them again on the newer state. So two commits never publish vectors computed on the same
state for one file, and concurrent upserts need no conflict rule of their own (each of their attempts is
checked against the versions in between, as any commit is).

A commit that replaces files (clustering, an overwrite, a restore, a compaction that left newer deltas), or
a bucket whose vectors do not cover its files (the property just turned on), has them computed afresh from
the bucket's files in version order (in a clustered file, a key's rows are in commit order: all but its last
are superseded). A bucket of one base needs none. A bucket whose files overlap in versions (a clustered file
spanning one it did not absorb) gets none: its reads merge by key until a compaction. A key's older rows are
found by the files' key columns (kept decoded between commits: a bucket's big base changes only at a
compaction).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from tidelake.storage import Storage

from .deletion_vectors import read_vectors, write_vectors
from .files import IO_THREADS, DataFile, parallel_map, remove_files, shared_pool
from .key_lookup import DecodedFiles
from .key_order import int_key
from .metadata import DeletionVectorIndex, SetDeletionVectors, TableMetadata
from .properties import DELETION_VECTORS_ENABLED
from .reader import MergeOnReadReader, needs_version_order
from .scan import BucketPlan, ScanPlanner

#: memory a writer keeps older files' key columns decoded in, between its commits
KEY_CACHE_BYTES = 256 << 20
_POSITION = "__position"


class DeletionVectorWriter:
    """Writes the deletion vectors of a table's commits (see the module's doc)."""

    def __init__(self, storage: Storage, reader: MergeOnReadReader):
        self.storage = storage
        self.reader = reader
        self.decoded = DecodedFiles(KEY_CACHE_BYTES)

    @staticmethod
    def wanted(md: TableMetadata) -> bool:
        """Whether commits on ``md`` write deletion vectors (the table property)."""
        return md.setting(DELETION_VECTORS_ENABLED)

    def write(self, md: TableMetadata, after: TableMetadata, adds: Sequence[DataFile]) -> list[SetDeletionVectors]:
        """The vectors of the buckets ``adds`` go to, for publishing them on ``md`` (``after``: the state that
        publishing makes, version ``md.version + 1``): one action per bucket whose files then need them. Nothing is
        left behind if this fails."""
        buckets = sorted({f.bucket for f in adds})
        if not buckets:
            return []
        before, now = ScanPlanner(md).buckets(md.version), ScanPlanner(after).buckets(after.version)
        added = {f.path for f in adds}
        written: list[DeletionVectorIndex] = []

        def one_bucket(bucket: int) -> DeletionVectorIndex | None:
            index = self._bucket(after, before.get(bucket), now.get(bucket), added)
            if index is not None:
                written.append(index)
            return index
        try:   # (in the I/O threads whatever the size: each bucket's file is written and synced on its own)
            indexes = parallel_map(one_bucket, buckets, pool=shared_pool(IO_THREADS))
        except BaseException:
            remove_files(self.storage, [i.path for i in written])
            raise
        return [SetDeletionVectors(i) for i in indexes if i is not None]

    def discard(self, actions: Sequence[SetDeletionVectors]) -> None:
        """Delete the files :meth:`write` wrote (an attempt that was not published)."""
        remove_files(self.storage, [a.index.path for a in actions])

    # ------------------------------------------------------------ one bucket
    def _bucket(self, after: TableMetadata, before: BucketPlan | None, plan: BucketPlan | None,
                added: set[str]) -> DeletionVectorIndex | None:
        """The bucket's vectors for its files in ``plan`` (at ``after``), or None if it needs none or cannot
        have them. On top of ``before``'s vectors when the commit only appends L0 deltas to its files;
        else afresh."""
        if plan is None or not plan.deltas:   # nothing, or one base: no row of it is superseded
            return None
        files = [fe.file for fe in plan.files]
        old = [fe.file for fe in before.files] if before is not None else []
        appended = [f.path for f in files[:len(old)]] == [f.path for f in old] and \
            all(f.path in added and f.level == 0 for f in files[len(old):])
        if appended and before is not None and before.vectors is not None:
            vectors, start = read_vectors(self.storage, before.vectors), len(old)
        elif appended and (before is None or not before.deltas):   # (one base, or nothing: none superseded)
            vectors, start = {}, len(old)
        elif not needs_version_order(plan):
            vectors, start = {}, 0
        else:
            return None
        for i in range(start, len(files)):   # each file supersedes the older ones' rows of its keys
            if files[i].level > 0:
                self._mark_repeats(after, vectors, files[i])
            if i:
                self._mark(after, vectors, files[:i], files[i])
        return write_vectors(self.storage, plan.bucket, [f.path for f in files], vectors)

    def _mark(self, md: TableMetadata, vectors: dict[str, BitMap], older: list[DataFile], newer: DataFile) -> None:
        """Mark in ``vectors`` the rows of ``older`` files whose key ``newer`` holds. Newest file first: the
        first file holding a key holds its live row (any older row of it is marked already), so the older
        files are searched only for the keys not found yet."""
        pk = list(md.primary_key)
        keys = self._keys(md, newer)
        for f in reversed(older):
            if not keys.num_rows:
                return
            found, hit = _positions(self._keys(md, f), keys, pk, unique=f.level == 0)
            if len(found):
                vectors.setdefault(f.path, BitMap()).update(found.astype(np.uint32))
            if hit is not None and hit.any():
                keys = keys.filter(pa.array(~hit))

    def _mark_repeats(self, md: TableMetadata, vectors: dict[str, BitMap], f: DataFile) -> None:
        """Mark in ``vectors`` the rows of a clustered file followed by a row of the same key: its rows of a key
        are in commit order, so only the last one of each is live."""
        keys = self._keys(md, f)
        if keys.num_rows < 2:
            return
        same = None
        for k in md.primary_key:
            column = keys.column(k)
            eq = pc.equal(column.slice(0, keys.num_rows - 1), column.slice(1))
            same = eq if same is None else pc.and_(same, eq)
        repeats = np.flatnonzero(same.to_numpy(zero_copy_only=False))
        if len(repeats):
            vectors.setdefault(f.path, BitMap()).update(repeats.astype(np.uint32))

    def _keys(self, md: TableMetadata, f: DataFile) -> pa.Table:
        pk = list(md.primary_key)
        schema = md.schema
        return self.decoded.get((f.path, "keys"), lambda: self.reader.read_file(f, pk, schema, ops=False))


def _positions(file_keys: pa.Table, keys: pa.Table, primary_key: list[str],
               unique: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(positions in ``file_keys``, sorted by key as files are, of rows whose key is in ``keys``; which of
    ``keys`` were found, for one integer key column, else None). ``unique``: one row per key in the file
    (a base or an L0 delta)."""
    ints, wanted = int_key(file_keys, primary_key), int_key(keys, primary_key)
    if ints is not None and wanted is not None:
        if not len(ints):
            return np.empty(0, np.int64), np.zeros(len(wanted), dtype=bool)
        lo = np.searchsorted(ints, wanted, "left")
        if unique:
            hit = ints[np.minimum(lo, len(ints) - 1)] == wanted
            return lo[hit].astype(np.int64), hit
        counts = np.searchsorted(ints, wanted, "right") - lo   # (several rows of a key in a clustered file)
        hit = counts > 0
        lo, counts = lo[hit], counts[hit]
        if not len(counts) or counts.max() == 1:
            return lo.astype(np.int64), hit
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        return (np.repeat(lo, counts) + np.arange(counts.sum()) - starts).astype(np.int64), hit
    numbered = file_keys.select(primary_key).unify_dictionaries()
    numbered = numbered.append_column(_POSITION, pa.array(np.arange(numbered.num_rows, dtype=np.int64)))
    found = numbered.join(keys.select(primary_key).unify_dictionaries(), keys=primary_key, join_type="left semi")
    return np.sort(found.column(_POSITION).to_numpy()), None
