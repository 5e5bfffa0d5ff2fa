"""Scan planning: which files a snapshot read or an incremental read touches, after pruning.

A snapshot of bucket b at version v is its newest live base file plus the live delta files with rows
newer than that base (:class:`BucketPlan`). An incremental read over (start, end] is the L0 delta
files written by data commits in that range: never base files, never clustering/compaction output.
A bucket with deletion vectors (deletion_vectors.py) that cover exactly its planned files carries them
in its plan: its reader then filters each file by position instead of merging by key.
Filters given as (column, op, value) tuples on the primary key prune buckets (equality on the whole
key hashes to one bucket) and skip files whose key min/max cannot match.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .files import DataFile, FilePlan, bucket_ids
from .metadata import DeletionVectorIndex, FileEntry, TableMetadata

FilterTuple = tuple[str, str, Any]


@dataclass(frozen=True)
class ScanFilter:
    """A read filter: the Arrow expression applied to rows, and the tuples that drive pruning."""
    expression: pc.Expression | None = None
    tuples: tuple[FilterTuple, ...] = ()

    @classmethod
    def parse(cls, filter: Any) -> "ScanFilter":
        """Accept None, a pc.Expression, a dict {col: value} (equalities) or a list of
        (col, op, value) tuples (AND). Only tuples can drive pruning."""
        if filter is None:
            return cls()
        if isinstance(filter, ScanFilter):
            return filter
        if isinstance(filter, pc.Expression):
            return cls(filter)
        if isinstance(filter, dict):
            filter = [(k, "=", v) for k, v in filter.items()]
        tuples = tuple(tuple(t) for t in filter)
        if not tuples:
            return cls()
        return cls(pq.filters_to_expression([list(tuples)]), tuples)  # type: ignore[arg-type]

    def on_key(self, primary_key: tuple[str, ...] | list[str]) -> pc.Expression | None:
        """The part of the filter on primary-key columns: safe to apply before the merge, as every
        version of a key shares its key."""
        pk_tuples = [t for t in self.tuples if t[0] in primary_key]
        return pq.filters_to_expression([pk_tuples]) if pk_tuples else None

    def columns(self, schema: pa.Schema) -> set[str]:
        """Columns the filter reads (every column if it is an opaque expression)."""
        if self.tuples:
            return {t[0] for t in self.tuples}
        return set(schema.names) if self.expression is not None else set()


@dataclass(frozen=True)
class BucketPlan:
    """What a snapshot read of one bucket merges: the base (if any) and the deltas newer than it,
    in commit order."""
    bucket: int
    base: FileEntry | None
    base_version: int
    deltas: tuple[FileEntry, ...]
    # the superseded rows of every file of the bucket (the unpruned plan): read by position, no key merge
    vectors: DeletionVectorIndex | None = None

    @property
    def files(self) -> list[FileEntry]:
        return ([self.base] if self.base else []) + list(self.deltas)


def _pruner(tuples: tuple[FilterTuple, ...], primary_key: tuple[str, ...], schema: pa.Schema,
            bucket_num: int) -> tuple[set[int] | None, Callable[[DataFile], bool]]:
    """Buckets a PK-equality filter can touch (None: all) and a min/max file test on PK columns."""
    pk = list(primary_key)
    eq: dict[str, list] = {}
    ranges: list[tuple[int, str, Any]] = []
    for col, op, val in tuples:
        if col not in pk:
            continue
        if op in ("=", "=="):
            eq[col] = [val]
        elif op == "in":
            eq[col] = list(val)
        if op in ("=", "==", "<", "<=", ">", ">=", "in"):
            ranges.append((pk.index(col), op, val))
    buckets = None
    if all(k in eq for k in pk):
        combos = list(itertools.product(*(eq[k] for k in pk)))
        buckets = set()
        if combos:
            keys = pa.table({k: pa.array([c[i] for c in combos], type=schema.field(k).type) for i, k in enumerate(pk)})
            buckets = set(bucket_ids(keys, pk, bucket_num).tolist())

    def may_match(f: DataFile) -> bool:
        if f.key_min is None or f.key_max is None:
            return f.rows > 0 or f.kind == "base"
        for i, op, val in ranges:
            lo, hi = f.key_min[i], f.key_max[i]
            if lo is None or hi is None:
                continue
            try:
                if op in ("=", "==") and not (lo <= val <= hi):
                    return False
                if op == "in" and not any(lo <= x <= hi for x in val):
                    return False
                if op == "<" and not lo < val:
                    return False
                if op == "<=" and not lo <= val:
                    return False
                if op == ">" and not hi > val:
                    return False
                if op == ">=" and not hi >= val:
                    return False
            except TypeError:
                continue
        return True
    return buckets, may_match


class ScanPlanner:
    """Plans reads against one (immutable) metadata snapshot."""

    def __init__(self, metadata: TableMetadata):
        self.md = metadata

    def buckets(self, v: int) -> dict[int, BucketPlan]:
        """Per bucket at version v, unpruned: the newest live base and the deltas newer than it."""
        by_bucket: dict[int, list[FileEntry]] = {}
        for fe in self.md.live_files(v):
            by_bucket.setdefault(fe.file.bucket, []).append(fe)
        out = {}
        for b, fes in by_bucket.items():
            bases = [fe for fe in fes if fe.file.kind == "base"]
            base = max(bases, key=lambda fe: fe.file.min_version) if bases else None
            base_version = base.file.min_version if base else -1
            deltas = sorted((fe for fe in fes if fe.file.kind == "delta" and fe.file.max_version > base_version),
                            key=lambda fe: (fe.file.min_version, fe.commit_seq))
            index = self.md.vectors_at(b, v)
            paths = [fe.file.path for fe in ([base] if base else []) + deltas]
            if index is not None and sorted(index.covers) != sorted(paths):
                index = None   # written for other files (maintenance or a restore replaced some since)
            out[b] = BucketPlan(b, base, base_version, tuple(deltas), index)
        return out

    def snapshot(self, v: int, filter: ScanFilter = ScanFilter(), buckets: set[int] | None = None) -> list[BucketPlan]:
        """The pruned per-bucket plans of a snapshot read at v, by bucket; ``buckets`` restricts the
        read to those buckets."""
        wanted, may_match = _pruner(filter.tuples, self.md.primary_key, self.md.schema_at(v), self.md.bucket_num)
        out = []
        for b, p in sorted(self.buckets(v).items()):
            if (wanted is not None and b not in wanted) or (buckets is not None and b not in buckets):
                continue
            base = p.base if p.base is not None and may_match(p.base.file) else None
            deltas = tuple(d for d in p.deltas if may_match(d.file))
            if base is not None or deltas:
                out.append(BucketPlan(b, base, p.base_version, deltas, p.vectors))
        return out

    def incremental(self, start: int, end: int, filter: ScanFilter = ScanFilter(),
                    buckets: set[int] | None = None) -> list[FileEntry]:
        """Delta files written by data commits in (start, end], pruned, in commit order; ``buckets``
        restricts the read to those buckets."""
        wanted, may_match = _pruner(filter.tuples, self.md.primary_key, self.md.schema_at(end), self.md.bucket_num)
        fes = [fe for fe in self.md.files.values()
               if fe.file.kind == "delta" and fe.file.level == 0 and start < fe.file.min_version <= end
               and (wanted is None or fe.file.bucket in wanted) and (buckets is None or fe.file.bucket in buckets)
               and may_match(fe.file)]
        return sorted(fes, key=lambda fe: (fe.file.min_version, fe.commit_seq))


def file_plans(entries: list[FileEntry]) -> list[FilePlan]:
    return [FilePlan(fe.file.path, fe.file.kind, fe.file.bucket, fe.file.level, fe.file.min_version,
                     fe.file.max_version, fe.file.rows, fe.file.bytes) for fe in entries]
