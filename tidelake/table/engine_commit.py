"""The merge engine applied by the commit: a data commit's rows combined with the live rows of their keys
(merge_engine.py), so every data file of the table holds resolved rows, one per key.

A table whose engine is not plain deduplication stages every change a writer is given (``DeltaWriter``
with ``every_change``: a bucket's rows sorted by key, in arrival order within a key), not only the last of
each key. For each attempt to publish version N the committer calls :meth:`EngineCommit.resolve`: per
bucket the staged rows are folded (engine_fold.py) onto their keys' rows live at N-1 (``KeyLookup``: only the
buckets and rows of the changed keys), and one L0 delta of the resolved rows replaces the staged files in
the commit: an upsert of the new row, or a delete. A key whose row does not change (first-row's later
upserts, a row dropped by its sequence field) is left out, so the change feed shows only real changes.
As with change files, an attempt that loses the race for N discards what it wrote, and the next attempt
folds onto the newer state: two writers of one partial-update table each see the other's columns.

``insert``/``upsert``/``delete`` fold onto the live rows; ``overwrite`` folds from an empty table (every
key written, deletes included: they are the overwrite's tombstones). ``update`` and ``restore`` write
rows already resolved against the table and are published as staged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pyarrow as pa

from tidelake.storage import Storage

from .engine_fold import fold
from .files import DataFile, remove_files, write_parquet
from .key_lookup import DecodedFiles, KeyLookup
from .key_order import sort_indices_by_key
from .merge_engine import MergeEngine, MergeRefused
from .metadata import TableMetadata
from .properties import CHANGELOG_LOOKUP_CACHE_BYTES
from .reader import MergeOnReadReader
from .scan import ScanPlanner

#: operations whose rows fold onto the live rows / onto nothing
ONTO_LIVE = frozenset({"upsert", "insert", "delete"})
ONTO_EMPTY = frozenset({"overwrite"})


@dataclass
class Resolved:
    """One attempt's resolution: the files it commits, the staged files they replace, the files it wrote."""
    adds: list[DataFile]
    staged: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)


def engine_of(md: TableMetadata, schema: pa.Schema | None = None) -> MergeEngine:
    """The merge engine of the table ``md`` describes (``schema``: the one a commit gives it, else its own)."""
    return MergeEngine.of(md.properties_at(md.version), schema if schema is not None else md.schema, md.primary_key)


class EngineCommit:
    """Applies a table's merge engine to its commits (see the module's doc)."""

    def __init__(self, storage: Storage, reader: MergeOnReadReader):
        self.storage = storage
        self.reader = reader
        # the older files a lookup decoded, kept for the next commits (as change_files.py does)
        self.decoded = DecodedFiles(CHANGELOG_LOOKUP_CACHE_BYTES.parse(CHANGELOG_LOOKUP_CACHE_BYTES.default))

    def resolve(self, md: TableMetadata, adds: Sequence[DataFile], operation: str,
                schema: pa.Schema) -> Resolved | None:
        """``adds`` with the L0 deltas of version ``md.version + 1`` resolved by the table's engine, in ``schema``
        (the commit's: columns it adds included) (None: the engine is plain deduplication, or ``operation`` writes
        resolved rows). Nothing is left behind if this fails; MergeRefused names what the engine cannot apply."""
        engine = engine_of(md, schema)
        if not engine.resolves_on_commit or operation not in ONTO_LIVE | ONTO_EMPTY:
            return None
        version = md.version + 1
        mine = [f for f in adds if f.kind == "delta" and f.level == 0 and f.min_version == version]
        if not mine:
            return None
        columns = schema.names
        by_bucket: dict[int, list[DataFile]] = {}
        for f in mine:   # (in the order they were added: a key in two of them changed in that order)
            by_bucket.setdefault(f.bucket, []).append(f)
        onto_live = operation in ONTO_LIVE
        plans = {p.bucket: p for p in ScanPlanner(md).snapshot(md.version, buckets=set(by_bucket))} if onto_live else {}
        self.decoded.resize(md.setting(CHANGELOG_LOOKUP_CACHE_BYTES))
        lookup = KeyLookup(self.storage, md, self.reader, self.decoded)
        pk = list(md.primary_key)
        written: list[DataFile] = []

        def one_bucket(bucket: int) -> DataFile | None:
            staged = pa.concat_tables([self.reader.read_file(f, columns, schema) for f in by_bucket[bucket]])
            # a stable sort: a key's changes stay in the order they were written
            staged = staged.take(sort_indices_by_key(staged, pk))
            keys = staged.select(pk)
            if onto_live:
                distinct = keys.group_by(pk).aggregate([])
                live = lookup.bucket_rows(plans.get(bucket), distinct, columns, schema)
            else:
                live = schema.empty_table()
            rows = fold(engine, live, staged, pk, schema, keep_unchanged=not onto_live)
            if not rows.num_rows:
                return None
            f = write_parquet(self.storage, rows, kind="delta", bucket=bucket, level=0, primary_key=pk,
                              min_version=version, max_version=version)
            written.append(f)
            return f
        try:
            resolved = self.reader.map_files(one_bucket, sorted(by_bucket), sum(f.rows for f in mine))
        except (pa.ArrowInvalid, OverflowError) as e:   # an aggregate out of its column's range, say
            remove_files(self.storage, [f.path for f in written])
            raise MergeRefused(f"{self.storage.url} version {version}: merge-engine={engine.kind}: a resolved row "
                               f"does not fit the schema: {e}") from None
        except MergeRefused as e:
            remove_files(self.storage, [f.path for f in written])
            raise MergeRefused(f"{self.storage.url} version {version}: {e}") from None
        except BaseException:
            remove_files(self.storage, [f.path for f in written])
            raise
        staged_paths = {f.path for f in mine}
        out = [f for f in adds if f.path not in staged_paths] + [f for f in resolved if f is not None]
        return Resolved(out, sorted(staged_paths), [f.path for f in written])

    def published(self, resolved: Resolved) -> None:
        """The attempt was published: the staged files it replaced are nobody's (best effort)."""
        remove_files(self.storage, resolved.staged)

    def discard(self, resolved: Resolved) -> None:
        """The attempt was not published: delete the files it wrote."""
        remove_files(self.storage, resolved.written)
