"""The transactional primary-key table (MaxCompute Transactional Table 2.0, seed 003; SPEC T1-T13).

Reads are merge-on-read: per bucket, the newest live base file plus the live delta files whose rows
are newer than that base, last change per key wins, deletes dropped. Writes are blind appends of
delta files published by one atomic log entry (optimistic concurrency, see ``_commit``).
"""
from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import (CommitConflict, SchemaError, TableError, TableExists, TableNotFound,
                     VersionExpired, VersionNotFound)
from .files import (COMMIT_TIME, COMMIT_TIME_TYPE, COMMIT_VERSION, OP, OP_DELETE, OP_NAMES, OP_UPSERT,
                    DataFile, FilePlan, bucket_ids, check_keys, conform, first_of_each_key,
                    last_wins, read_parquet, sort_keys, to_arrow, write_parquet)
from .log import FileEntry, MetadataLog, TableState, schema_to_json

log = logging.getLogger(__name__)

Clock = Callable[[], int]   # milliseconds since the epoch

#: Table properties, their defaults and meaning (all values are strings, as in MaxCompute).
DEFAULT_PROPERTIES: dict[str, str] = {
    "transactional": "true",
    "write.bucket.num": "16",            # buckets: hash(PK) mod this
    "acid.data.retain.hours": "24",      # time travel / incremental horizon; older history is cleaned
    "retention.auto": "true",            # clean expired history automatically after commits
    "retention.check.commit.num": "10",  # ... checking every this many versions (cleanup lists the data dir)
    "clustering.auto": "true",           # run clustering automatically after data commits
    "clustering.l0.num": "8",            # merge a bucket's L0 delta files into L1 when this many exist
    "clustering.l1.num": "8",            # merge L1 files into L2 when this many exist
    "clustering.max.file.bytes": str(64 << 20),   # files at least this big are never clustered
    "clustering.max.time.span.hours": "6",        # never cluster files/groups spanning longer than this
    "compaction.delta.num": "0",         # auto-compact a bucket once it has this many live deltas (0: off)
    "compaction.commit.num": "0",        # auto-compact all buckets every this many data commits (0: off)
    "compaction.parallelism": "4",       # buckets compacted in parallel (threads)
    "checkpoint.interval": "10",         # write a metadata checkpoint every this many versions
}

# operation names recorded in the log; the conflict classes of SPEC T4
DATA_OPERATIONS = {"upsert", "insert", "update", "delete", "overwrite", "restore"}
MAINTENANCE_OPERATIONS = {"cluster", "compact"}


def _wall_clock() -> int:
    return time.time_ns() // 1_000_000


def conflict_rule(mine: str, other: str, mine_buckets: set[int] | None = None,
                  other_buckets: set[int] | None = None) -> str | None:
    """MaxCompute's conflict table: why ``mine`` (committing later) conflicts with ``other``
    (committed after ``mine`` started), or None.

    - clustering never makes another job fail, and itself only fails when its input files were
      replaced (by compaction / overwrite / restore); otherwise it is retried at the metadata level;
    - insert overwrite (and restore, which is an overwrite with an old version) vs everything;
    - update/delete vs anything but clustering;
    - insert into vs insert into;
    - compaction vs compaction of the same bucket;
    - schema change vs schema change.
    Upserts (near-real-time stream commits) are blind and do not conflict with each other, with
    insert into, or with compaction.
    """
    if other == "cluster" or mine == "cluster" or other == "create":
        return None
    if mine in ("schema", "properties") or other in ("schema", "properties"):
        return "schema change vs schema change" if mine == other else None
    if {"overwrite", "restore"} & {mine, other}:
        return "insert overwrite/restore vs everything"
    if {"update", "delete"} & {mine, other}:
        return "update/delete vs anything but clustering"
    if mine == other == "insert":
        return "insert into vs insert into"
    if mine == other == "compact" and (mine_buckets is None or other_buckets is None or mine_buckets & other_buckets):
        return "compaction vs compaction of the same bucket"
    return None


def _filter_to_expression(filter: Any) -> tuple[pc.Expression | None, list[tuple[str, str, Any]]]:
    """Accept a pc.Expression, a dict {col: value} (equalities) or a list of (col, op, value)
    tuples (AND). Returns the expression and the tuples (only tuples can drive pruning)."""
    if filter is None:
        return None, []
    if isinstance(filter, pc.Expression):
        return filter, []
    if isinstance(filter, dict):
        filter = [(k, "=", v) for k, v in filter.items()]
    tuples = [tuple(t) for t in filter]
    return pq.filters_to_expression([list(tuples)]), tuples  # type: ignore[arg-type]


class Table:
    """A transactional table directory. Thread-safe for concurrent use from several threads;
    several processes coordinate through the metadata log."""

    def __init__(self, path: str, state: TableState, clock: Clock | None = None):
        import threading
        self.path = os.path.abspath(path)
        self._log = MetadataLog(self.path)
        self._state = state
        self._clock: Clock = clock or _wall_clock
        self._lock = threading.RLock()

    # ================================================================ create / open
    @classmethod
    def create(cls, path: str, schema: pa.Schema, primary_key: list[str],
               properties: dict[str, str] | None = None, *, clock: Clock | None = None) -> "Table":
        for k in primary_key:
            if k not in schema.names:
                raise SchemaError(f"primary key column {k!r} not in schema {schema.names}")
        bad = [n for n in schema.names if n.startswith("_op") or n in (COMMIT_VERSION, COMMIT_TIME)]
        if bad:
            raise SchemaError(f"column names {bad} are reserved")
        props = dict(DEFAULT_PROPERTIES)
        props.update({k: str(v) for k, v in (properties or {}).items()})
        if props.get("transactional", "true").lower() != "true":
            raise TableError("only transactional=true tables are supported")
        if int(props["write.bucket.num"]) < 1:
            raise TableError("write.bucket.num must be >= 1")
        # primary key columns are never null
        schema = pa.schema([f.with_nullable(False) if f.name in primary_key else f for f in schema])
        mlog = MetadataLog(os.path.abspath(path))
        os.makedirs(mlog.dir, exist_ok=True)
        ts = (clock or _wall_clock)()
        entry = {"version": 0, "timestamp_ms": ts, "operation": "create", "read_version": -1,
                 "primary_key": list(primary_key), "schema": schema_to_json(schema),
                 "schema_fields": [f"{f.name} {f.type}" for f in schema], "properties": props}
        if not mlog.publish(0, entry):
            raise TableExists(f"a table already exists at {path}")
        return cls.open(path, clock=clock)

    @classmethod
    def open(cls, path: str, *, clock: Clock | None = None) -> "Table":
        mlog = MetadataLog(os.path.abspath(path))
        if not mlog.exists():
            raise TableNotFound(f"no tidelake table at {path}")
        return cls(path, mlog.load(), clock)

    @classmethod
    def exists(cls, path: str) -> bool:
        return MetadataLog(os.path.abspath(path)).exists()

    # ================================================================ basic properties
    def refresh(self) -> int:
        with self._lock:
            self._log.catch_up(self._state)
            return self._state.version

    @property
    def version(self) -> int:
        """The latest committed version (refreshed from the log)."""
        return self.refresh()

    @property
    def schema(self) -> pa.Schema:
        self.refresh()
        return self._state.schema_at(self._state.version)

    def schema_at(self, version: int) -> pa.Schema:
        """The table schema as of a version (columns added later are absent)."""
        with self._lock:
            return self._state.schema_at(version)

    def resolve_range(self, start_version: int | None = None, end_version: int | None = None, *,
                      start_timestamp: int | None = None, end_timestamp: int | None = None) -> tuple[int, int]:
        """The (start, end] version range an incremental read over these bounds covers (validated
        against the retention horizon)."""
        with self._lock:
            return self._resolve_range(start_version, end_version, start_timestamp, end_timestamp)

    @property
    def primary_key(self) -> list[str]:
        return list(self._state.primary_key)

    @property
    def properties(self) -> dict[str, str]:
        self.refresh()
        return dict(self._state.properties_at(self._state.version))

    def _prop(self, name: str) -> str:
        return self._state.properties_at(self._state.version).get(name, DEFAULT_PROPERTIES.get(name, ""))

    @property
    def bucket_num(self) -> int:
        return int(self._state.properties_at(0)["write.bucket.num"])   # fixed at creation

    def _now(self) -> int:
        return int(self._clock())

    # ================================================================ history and versions
    def history(self) -> list[dict[str, Any]]:
        """Every retained version, oldest first: version, timestamp_ms, operation, read_version,
        files added/removed, rows added, app state."""
        with self._lock:
            self.refresh()
            return [dict(self._state.versions[v]) for v in sorted(self._state.versions)]

    def latest_version(self, n: int = 1) -> int:
        """The n-th latest version (seed 003's get_latest_version(table, n)); n=1 is the latest."""
        if n < 1:
            raise ValueError("n must be >= 1")
        v = self.refresh() - (n - 1)
        if v not in self._state.versions:
            raise VersionNotFound(f"there is no {n}-th latest version (latest {self._state.version}, "
                                  f"oldest retained {min(self._state.versions)})")
        return v

    def latest_timestamp(self, n: int = 1) -> int:
        """Commit timestamp (ms) of the n-th latest version (seed 003's get_latest_timestamp)."""
        return self._state.timestamp(self.latest_version(n))

    def version_at(self, timestamp_ms: int) -> int:
        """The version current at a timestamp: the newest commit at or before it."""
        self.refresh()
        best = None
        for v in sorted(self._state.versions):
            if self._state.timestamp(v) <= timestamp_ms:
                best = v
            else:
                break
        if best is None:
            if self._state.horizon > 0:
                raise VersionExpired(f"timestamp {timestamp_ms} is before the retention horizon "
                                     f"(oldest retained version {self._horizon()})")
            raise VersionNotFound(f"timestamp {timestamp_ms} is before the table was created")
        return best

    def _horizon(self) -> int:
        """Oldest readable version: the version current at now - acid.data.retain.hours (the latest
        version is always readable), and never below what expire already removed."""
        st = self._state
        limit = self._now() - int(float(self._prop("acid.data.retain.hours")) * 3_600_000)
        h = st.horizon
        for v in sorted(st.versions):
            if st.timestamp(v) <= limit:
                h = max(h, v)
            else:
                break
        return min(h, st.version)

    def _resolve(self, version: int | None, timestamp: int | None) -> int:
        self.refresh()
        if version is not None and timestamp is not None:
            raise ValueError("give version or timestamp, not both")
        v = self.version_at(timestamp) if timestamp is not None else (self._state.version if version is None else version)
        if v > self._state.version or v < 0:
            raise VersionNotFound(f"version {v} does not exist (latest is {self._state.version})")
        h = self._horizon()
        if v < h:
            raise VersionExpired(
                f"version {v} is older than the retention horizon: the oldest readable version is {h} "
                f"(acid.data.retain.hours={self._prop('acid.data.retain.hours')})")
        return v

    def app_state(self, app_id: str) -> dict[str, Any] | None:
        """The last (batch_id, extra) committed by an application, as of the latest version:
        {"batch_id": ..., "extra": {...}, "version": ...}; None if it never committed."""
        self.refresh()
        entries = self._state.apps.get(app_id)
        if not entries:
            return None
        batch_id, version, extra = entries[-1]
        return {"batch_id": batch_id, "extra": extra, "version": version}

    # ================================================================ planning
    def _bucket_files(self, v: int) -> dict[int, tuple[FileEntry | None, int, list[FileEntry]]]:
        """Per bucket at version v: (base, base_version, deltas newer than the base)."""
        by_bucket: dict[int, list[FileEntry]] = {}
        with self._lock:   # another thread's refresh may be applying log entries
            live = self._state.live_files(v)
        for fe in live:
            by_bucket.setdefault(fe.file.bucket, []).append(fe)
        out = {}
        for b, fes in by_bucket.items():
            bases = [fe for fe in fes if fe.file.kind == "base"]
            base = max(bases, key=lambda fe: fe.file.min_version) if bases else None
            base_version = base.file.min_version if base else -1
            deltas = sorted((fe for fe in fes if fe.file.kind == "delta" and fe.file.max_version > base_version),
                            key=lambda fe: (fe.file.min_version, fe.commit_seq))
            out[b] = (base, base_version, deltas)
        return out

    def _prune(self, tuples: list[tuple[str, str, Any]], schema: pa.Schema) -> tuple[set[int] | None, Callable[[DataFile], bool]]:
        """Buckets a PK-equality filter can touch (None: all) and a min/max file test on PK columns."""
        pk = self._state.primary_key
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
            import itertools
            combos = list(itertools.product(*(eq[k] for k in pk)))
            if combos:
                keys = pa.table({k: pa.array([c[i] for c in combos], type=schema.field(k).type)
                                 for i, k in enumerate(pk)})
                buckets = set(bucket_ids(keys, pk, self.bucket_num).tolist())
            else:
                buckets = set()

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

    def _snapshot_plan(self, v: int, tuples: list) -> dict[int, tuple[FileEntry | None, int, list[FileEntry]]]:
        schema = self._state.schema_at(v)
        buckets, may_match = self._prune(tuples, schema)
        plan = {}
        for b, (base, bv, deltas) in self._bucket_files(v).items():
            if buckets is not None and b not in buckets:
                continue
            base2 = base if base is not None and may_match(base.file) else None
            deltas2 = [d for d in deltas if may_match(d.file)]
            if base2 is None and not deltas2:
                continue
            plan[b] = (base2, bv, deltas2)
        return plan

    def _increment_files(self, start: int, end: int) -> list[FileEntry]:
        """Delta files written by data commits in (start, end]: never base files, never files
        written by clustering or compaction."""
        fes = [fe for fe in self._state.files.values()
               if fe.file.kind == "delta" and fe.file.level == 0 and start < fe.file.min_version <= end]
        return sorted(fes, key=lambda fe: (fe.file.min_version, fe.commit_seq))

    def plan(self, version: int | None = None, timestamp: int | None = None, *,
             start_version: int | None = None, end_version: int | None = None,
             start_timestamp: int | None = None, end_timestamp: int | None = None,
             filter: Any = None) -> list[FilePlan]:
        """The files a read would touch: a snapshot read (version/timestamp) or, given a start, an
        incremental read over (start, end]."""
        _, tuples = _filter_to_expression(filter)
        with self._lock:
            if start_version is not None or start_timestamp is not None:
                s, e = self._resolve_range(start_version, end_version, start_timestamp, end_timestamp)
                fes = self._increment_files(s, e)
                buckets, may_match = self._prune(tuples, self._state.schema_at(e))
                fes = [fe for fe in fes if (buckets is None or fe.file.bucket in buckets) and may_match(fe.file)]
            else:
                v = self._resolve(version, timestamp)
                fes = []
                for b, (base, _, deltas) in sorted(self._snapshot_plan(v, tuples).items()):
                    fes += ([base] if base else []) + deltas
        return [FilePlan(fe.file.path, fe.file.kind, fe.file.bucket, fe.file.level, fe.file.min_version,
                         fe.file.max_version, fe.file.rows, fe.file.bytes) for fe in fes]

    # ================================================================ reading
    def _read(self, fe: FileEntry, columns: list[str], schema: pa.Schema, filter_expr: pc.Expression | None,
              with_time: bool = False) -> pa.Table:
        """A file's rows conformed to ``columns`` + _op + _commit_version (+ _commit_time): base
        rows are upserts at the base version, an L0 file's rows carry its commit's version/time."""
        f = fe.file
        try:
            t = read_parquet(self.path, f, columns + ([OP, COMMIT_VERSION, COMMIT_TIME] if f.kind == "delta" else []), filter_expr)
        except FileNotFoundError:
            self.refresh()
            raise VersionExpired(f"data file {f.path} was removed by retention cleanup "
                                 f"(oldest readable version is now {self._horizon()})") from None
        n = t.num_rows
        if f.kind == "base":
            t = t.append_column(OP, pa.array(np.zeros(n, np.int8)))
        if COMMIT_VERSION not in t.column_names:   # base or L0 file: one version for all rows
            t = t.append_column(COMMIT_VERSION, pa.array(np.full(n, f.min_version, np.int64)))
        extra = [pa.field(OP, pa.int8()), pa.field(COMMIT_VERSION, pa.int64())]
        if with_time:
            if COMMIT_TIME not in t.column_names:
                ts = np.full(n, self._state.timestamp(f.min_version), dtype="datetime64[ms]")
                t = t.append_column(COMMIT_TIME, pa.array(ts).cast(COMMIT_TIME_TYPE))
            extra.append(pa.field(COMMIT_TIME, COMMIT_TIME_TYPE))
        return conform(t, pa.schema([schema.field(c) for c in columns]), extra=extra)

    def _merge_bucket(self, base: FileEntry | None, base_version: int, deltas: list[FileEntry],
                      columns: list[str], schema: pa.Schema, pk_expr: pc.Expression | None) -> pa.Table:
        pk = self._state.primary_key
        base_t = self._read(base, columns, schema, pk_expr).select(columns) if base else None
        if not deltas:
            return base_t if base_t is not None else pa.schema([schema.field(c) for c in columns]).empty_table()
        parts = [self._read(fe, columns, schema, pk_expr) for fe in deltas]
        d = pa.concat_tables(parts)
        if any(fe.file.min_version <= base_version for fe in deltas):   # clustered file straddling the base
            d = d.filter(pc.greater(d.column(COMMIT_VERSION), base_version))
        seq = "__seq"
        d = d.append_column(seq, pa.array(np.arange(d.num_rows, dtype=np.int64)))
        d = d.take(pc.sort_indices(d, sort_keys=sort_keys(pk, (COMMIT_VERSION, "descending"), (seq, "descending"))))
        d = first_of_each_key(d, pk)
        upserts = d.filter(pc.equal(d.column(OP), OP_UPSERT)).select(columns)
        if base_t is None or base_t.num_rows == 0:
            return upserts
        if len(pk) == 1:
            keep = pc.invert(pc.is_in(base_t.column(pk[0]), value_set=d.column(pk[0]).combine_chunks()))
            base_kept = base_t.filter(keep)
        else:
            base_kept = base_t.join(d.select(pk), keys=pk, join_type="left anti").select(columns)
        return pa.concat_tables([base_kept, upserts])

    def _read_snapshot(self, v: int, filter: Any = None, columns: Sequence[str] | None = None,
                       buckets: set[int] | None = None) -> pa.Table:
        expr, tuples = _filter_to_expression(filter)
        schema = self._state.schema_at(v)
        pk = self._state.primary_key
        wanted = list(columns) if columns is not None else schema.names
        for c in wanted:
            if c not in schema.names:
                raise SchemaError(f"no column {c!r} (columns: {schema.names})")
        filter_cols = set()
        if tuples:
            filter_cols = {t[0] for t in tuples}
        elif expr is not None:
            filter_cols = set(schema.names)   # unknown: read everything the expression may use
        read_cols = [c for c in schema.names if c in set(pk) | set(wanted) | filter_cols]
        # PK-only predicates are safe before the merge (every version of a key shares its PK)
        pk_tuples = [t for t in tuples if t[0] in pk]
        pk_expr = pq.filters_to_expression([pk_tuples]) if pk_tuples else None
        with self._lock:
            plan = self._snapshot_plan(v, tuples)
        if buckets is not None:
            plan = {b: p for b, p in plan.items() if b in buckets}
        work = sorted(plan.items())
        if len(work) > 1:
            with ThreadPoolExecutor(max_workers=min(4, len(work))) as ex:
                parts = list(ex.map(lambda it: self._merge_bucket(it[1][0], it[1][1], it[1][2], read_cols, schema, pk_expr), work))
        else:
            parts = [self._merge_bucket(p[0], p[1], p[2], read_cols, schema, pk_expr) for _, p in work]
        out = pa.concat_tables(parts) if parts else pa.schema([schema.field(c) for c in read_cols]).empty_table()
        if expr is not None and out.num_rows:
            out = out.filter(expr)
        return out.select(wanted)

    def scan(self, version: int | None = None, timestamp: int | None = None, filter: Any = None,
             columns: Sequence[str] | None = None) -> pa.Table:
        """The table at a version (default latest) or timestamp (ms): one row per key.

        ``filter``: a pyarrow compute Expression, a dict {column: value}, or a list of
        (column, op, value) tuples ANDed together; tuples on the primary key drive bucket pruning
        (equality on the whole key reads one bucket) and min/max file skipping."""
        with self._lock:
            v = self._resolve(version, timestamp)
        return self._read_snapshot(v, filter, columns)

    def _resolve_range(self, start_version, end_version, start_timestamp, end_timestamp) -> tuple[int, int]:
        self.refresh()
        if start_timestamp is not None or end_timestamp is not None:
            if start_version is not None or end_version is not None:
                raise ValueError("give versions or timestamps, not both")
            if start_timestamp is None:
                raise ValueError("start_timestamp is required")
            s = self._version_at_or_before(start_timestamp)
            e = self._state.version if end_timestamp is None else self._version_at_or_before(end_timestamp)
        else:
            if start_version is None:
                raise ValueError("start_version is required")
            s = start_version
            e = self._state.version if end_version is None else end_version
        if e > self._state.version:
            raise VersionNotFound(f"end version {e} does not exist (latest is {self._state.version})")
        h = self._horizon()
        # (s, e] needs the files of versions s+1..e, all retained iff s+1 >= horizon
        if s + 1 < h and e > s:
            raise VersionExpired(f"increment ({s}, {e}] starts before the retention horizon: the oldest "
                                 f"retained version is {h} (acid.data.retain.hours={self._prop('acid.data.retain.hours')})")
        return s, max(s, e)

    def _version_at_or_before(self, ts: int) -> int:
        """Latest version committed at or before ts (-1 if none): the bound of a (begin, end] range."""
        best = -1
        for v in sorted(self._state.versions):
            if self._state.timestamp(v) <= ts:
                best = v
        if best == -1 and self._state.horizon > 0:
            # versions before the retained history were committed after ts: their changes are gone
            raise VersionExpired(f"timestamp {ts} is before the retention horizon (oldest retained version "
                                 f"{self._state.horizon}, acid.data.retain.hours={self._prop('acid.data.retain.hours')})")
        return best

    def changes(self, start_version: int | None = None, end_version: int | None = None, *,
                start_timestamp: int | None = None, end_timestamp: int | None = None,
                filter: Any = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Incremental read over (start, end] (left-open, right-closed), by version or by commit
        timestamp (ms): every change with ``_op`` ('upsert'/'delete'), ``_commit_version`` and
        ``_commit_time``, ordered by commit. Reads only delta files written by data commits in the
        range (never base files, never clustering/compaction output)."""
        expr, tuples = _filter_to_expression(filter)
        with self._lock:
            s, e = self._resolve_range(start_version, end_version, start_timestamp, end_timestamp)
            schema = self._state.schema_at(e)
            fes = self._increment_files(s, e)
            buckets, may_match = self._prune(tuples, schema)
            fes = [fe for fe in fes if (buckets is None or fe.file.bucket in buckets) and may_match(fe.file)]
        wanted = list(columns) if columns is not None else schema.names
        parts = []
        for fe in fes:
            parts.append(self._read(fe, schema.names, schema, None, with_time=True))
        out_schema = pa.schema([schema.field(c) for c in wanted] + [
            pa.field(OP, pa.string()), pa.field(COMMIT_VERSION, pa.int64()), pa.field(COMMIT_TIME, COMMIT_TIME_TYPE)])
        if not parts:
            return out_schema.empty_table()
        t = pa.concat_tables(parts)
        if expr is not None:
            t = t.filter(expr)
        t = t.take(pc.sort_indices(t, sort_keys=[(COMMIT_VERSION, "ascending")] + sort_keys(self._state.primary_key)))
        ops = pc.if_else(pc.equal(t.column(OP), OP_DELETE), OP_NAMES[OP_DELETE], OP_NAMES[OP_UPSERT])
        t = t.set_column(t.schema.get_field_index(OP), OP, ops)
        return t.select(wanted + [OP, COMMIT_VERSION, COMMIT_TIME]).cast(out_schema)

    def follow(self, start_version: int, *, poll_seconds: float = 0.5, idle_timeout: float | None = None,
               stop: Callable[[], bool] | None = None) -> Iterable[tuple[int, int, pa.Table]]:
        """Incremental pipeline driver (SPEC T13): yields ``(start, end, changes over (start, end])``
        each time new versions are committed, reading exactly the new increment. Ends when
        ``stop()`` is true or after ``idle_timeout`` seconds without a new version."""
        start = start_version
        idle_since = time.monotonic()
        while not (stop and stop()):
            end = self.refresh()
            if end > start:
                yield start, end, self.changes(start_version=start, end_version=end)
                start = end
                idle_since = time.monotonic()
                continue
            if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                return
            time.sleep(poll_seconds)

    # ================================================================ staging and committing
    def _prepare(self, data: Any, op: int, schema: pa.Schema) -> pa.Table:
        t = to_arrow(data, schema)
        check_keys(t, self._state.primary_key)
        if op == OP_DELETE:   # a delete needs only the key
            t = t.select(self._state.primary_key)
        unknown = [c for c in t.column_names if c not in schema.names and c != OP]
        if unknown:
            raise SchemaError(f"columns {unknown} are not in the table schema {schema.names}")
        t = conform(t, schema)
        return t.append_column(OP, pa.array(np.full(t.num_rows, op, np.int8)))

    def _stage(self, rows: pa.Table) -> list[DataFile]:
        """Write rows (user columns + _op, in arrival order) as L0 delta files, one per bucket:
        deduplicated (last wins), PK-sorted. Not visible until committed."""
        pk = self._state.primary_key
        n_buckets = self.bucket_num
        if rows.num_rows == 0:
            return []
        seq, bkt = "__seq", "__bucket"
        t = rows.append_column(seq, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
        t = t.append_column(bkt, pa.array(bucket_ids(t, pk, n_buckets)))
        # one sort: bucket, then key, then newest first; the first row of each key wins
        t = t.take(pc.sort_indices(t, sort_keys=[(bkt, "ascending")] + sort_keys(pk, (seq, "descending"))))
        t = first_of_each_key(t, pk)
        buckets = t.column(bkt).to_numpy()
        t = t.drop_columns([seq, bkt])
        counts = np.bincount(buckets, minlength=n_buckets)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        jobs = [(b, t.slice(int(offsets[b]), int(counts[b]))) for b in range(n_buckets) if counts[b]]

        def write(job):
            b, part = job
            return write_parquet(self.path, part, kind="delta", bucket=b, level=0, primary_key=pk)
        if len(jobs) > 1:
            with ThreadPoolExecutor(max_workers=min(4, len(jobs))) as ex:
                return list(ex.map(write, jobs))
        return [write(j) for j in jobs]

    def stage_files(self, data: Any, *, op: str = "upsert") -> list[DataFile]:
        """Write bucketed, PK-sorted L0 delta Parquet files (not yet visible) for commit_staged().
        ``op``: 'upsert' | 'insert' (rows upserted) or 'delete' (only the key columns are used).
        Safe to call on Spark executors (needs only the table path and its metadata)."""
        if op not in ("upsert", "insert", "delete"):
            raise ValueError(f"op must be upsert, insert or delete, not {op!r}")
        with self._lock:
            self.refresh()
            schema = self._state.schema_at(self._state.version)
        return self._stage(self._prepare(data, OP_DELETE if op == "delete" else OP_UPSERT, schema))

    def commit_staged(self, files: list[DataFile], *, operation: str = "upsert",
                      read_version: int | None = None, app_id: str | None = None,
                      batch_id: int | None = None, app_extra: dict | None = None) -> int:
        """Publish staged files as one new version (atomic). ``operation`` names the conflict class:
        'upsert' (blind stream write), 'insert', 'update', 'delete', 'overwrite' (all rows live at
        ``read_version`` are replaced). ``read_version``: the version the job read (None: no
        conflict detection except overwrite). With ``app_id``/``batch_id`` the commit also records
        the application's batch id and ``app_extra`` (e.g. Kafka offsets) atomically; if that batch
        was already committed this is a no-op returning that version (idempotent sink)."""
        if operation not in ("upsert", "insert", "update", "delete", "overwrite"):
            raise ValueError(f"unknown operation {operation!r}")
        app = None
        if app_id is not None:
            if batch_id is None:
                raise ValueError("batch_id is required with app_id")
            app = {"app_id": app_id, "batch_id": int(batch_id), "extra": app_extra or {}}
        files = [f if isinstance(f, DataFile) else DataFile.from_dict(f) for f in files]
        rv = self.refresh() if read_version is None else read_version
        if operation == "overwrite":
            files = files + self._overwrite_tombstones(rv, files)
        v = self._commit(operation, adds=files, read_version=rv, app=app,
                         removes=(lambda st: [fe.file.path for fe in st.files.values() if fe.live])
                         if operation == "overwrite" else None)
        self._after_data_commit(v)
        return v

    def _overwrite_tombstones(self, read_version: int, new_files: list[DataFile]) -> list[DataFile]:
        """Delete rows for keys live at read_version that the overwrite does not write again, so an
        incremental read sees the overwrite as the change it is."""
        pk = self._state.primary_key
        old = self._read_snapshot(read_version, columns=pk)
        if old.num_rows == 0:
            return []
        new_keys = [pq.read_table(os.path.join(self.path, f.path), columns=pk) for f in new_files]
        if new_keys:
            gone = old.join(pa.concat_tables(new_keys), keys=pk, join_type="left anti")
        else:
            gone = old
        schema = self._state.schema_at(self._state.version)
        return self._stage(self._prepare(gone, OP_DELETE, schema)) if gone.num_rows else []

    def _commit(self, operation: str, *, adds: list[DataFile], read_version: int,
                removes: Callable[[TableState], list[str]] | list[str] | None = None,
                app: dict | None = None, extra: dict | None = None, buckets: set[int] | None = None,
                inputs: list[str] | None = None, max_attempts: int = 10_000) -> int:
        """Optimistic commit: check the commits since ``read_version`` against the conflict table,
        then try to publish version latest+1; on losing the race, re-check and retry."""
        with self._lock:
            for _ in range(max_attempts):
                self.refresh()
                st = self._state
                if read_version > st.version:
                    raise VersionNotFound(f"read version {read_version} is newer than the latest {st.version}")
                if app is not None:
                    done = self._already_committed(app)
                    if done is not None:
                        return done
                for ov in range(read_version + 1, st.version + 1):
                    o = st.versions.get(ov)
                    if o is None:
                        raise VersionExpired(f"version {ov} expired while this {operation} was running")
                    rule = conflict_rule(operation, o["operation"], buckets, set(o.get("buckets") or []) or None)
                    if rule:
                        raise CommitConflict(operation, read_version, o["operation"], ov, rule)
                if inputs is not None:   # clustering inputs must still be live
                    gone = [p for p in inputs if p not in st.files or not st.files[p].live]
                    if gone:
                        culprit = max((st.files[p].intervals[-1][1] for p in gone if p in st.files), default=st.version)
                        raise CommitConflict(operation, read_version, st.versions[culprit]["operation"], culprit,
                                             f"{operation} inputs were replaced")
                version = st.version + 1
                ts = max(self._now(), st.timestamp(st.version) + 1)   # strictly increasing commit times
                rm = removes(st) if callable(removes) else list(removes or [])
                add_dicts = []
                for f in adds:
                    d = f.to_dict()
                    if f.kind == "delta" and f.level == 0 and d.get("min_version") is None:
                        d["min_version"] = d["max_version"] = version
                    add_dicts.append(d)
                entry = {"version": version, "timestamp_ms": ts, "operation": operation,
                         "read_version": read_version, "add": add_dicts, "remove": rm,
                         "rows_added": sum(f.rows for f in adds)}
                if app is not None:
                    entry["app"] = app
                if buckets is not None:
                    entry["buckets"] = sorted(buckets)
                entry.update(extra or {})
                if self._log.publish(version, entry):
                    st.apply(entry)
                    if version % max(1, int(self._prop("checkpoint.interval"))) == 0:
                        self._log.write_checkpoint(st)
                    return version
            raise TableError(f"{operation}: gave up after {max_attempts} commit attempts")

    def _already_committed(self, app: dict) -> int | None:
        entries = self._state.apps.get(app["app_id"]) or []
        if entries and app["batch_id"] <= entries[-1][0]:
            for b, v, _ in reversed(entries):
                if b == app["batch_id"]:
                    return v
            return entries[-1][1]
        return None

    # ================================================================ write API
    def transaction(self) -> "Transaction":
        """``with table.transaction() as tx: tx.upsert(...); tx.delete(...)`` commits atomically on
        exit (one version), or writes nothing if the block raises."""
        return Transaction(self)

    def _write(self, operation: str, rows: pa.Table, read_version: int) -> int:
        files = self._stage(rows)
        v = self._commit(operation, adds=files, read_version=read_version)
        self._after_data_commit(v)
        return v

    def upsert(self, data: Any) -> int:
        with self.transaction() as tx:
            tx.upsert(data)
        return tx.version

    def insert_into(self, data: Any) -> int:
        """INSERT INTO: rows upserted by key (a key present twice: the last row wins)."""
        rv = self.refresh()
        return self._write("insert", self._prepare(data, OP_UPSERT, self._state.schema_at(rv)), rv)

    def insert_overwrite(self, data: Any) -> int:
        """INSERT OVERWRITE: the table's content becomes ``data``."""
        rv = self.refresh()
        files = self._stage(self._prepare(data, OP_UPSERT, self._state.schema_at(rv)))
        return self.commit_staged(files, operation="overwrite", read_version=rv)

    def _current_rows(self, keys: pa.Table, v: int, columns: list[str] | None = None) -> pa.Table:
        """Rows live at v whose key is in ``keys`` (reads only the buckets those keys hash to)."""
        pk = self._state.primary_key
        buckets = set(bucket_ids(keys, pk, self.bucket_num).tolist())
        cur = self._read_snapshot(v, columns=columns, buckets=buckets)
        return cur.join(keys.select(pk), keys=pk, join_type="left semi")

    def update(self, data: Any = None, *, where: Any = None, set: dict[str, Any] | None = None) -> int:
        """UPDATE. Either ``data`` (key columns + the columns to change; rows whose key does not
        exist are ignored) or ``where`` (filter) with ``set`` {column: new value}."""
        rv = self.refresh()
        schema = self._state.schema_at(rv)
        pk = self._state.primary_key
        if data is not None:
            changes = to_arrow(data, schema)
            check_keys(changes, pk)
            changes = last_wins(changes, pk)
            cur = self._current_rows(changes.select(pk), rv)
            keep = [c for c in cur.column_names if c not in changes.column_names or c in pk]
            new = cur.select(keep).join(changes, keys=pk, join_type="inner")
        else:
            if not set:
                raise ValueError("update needs data, or where= and set=")
            new = self._read_snapshot(rv, filter=where)
            for col, value in set.items():
                if col in pk:
                    raise SchemaError("cannot update primary key columns")
                idx = new.schema.get_field_index(col)
                new = new.set_column(idx, schema.field(col), pa.array([value] * new.num_rows, type=schema.field(col).type))
        return self._write("update", self._prepare(new, OP_UPSERT, schema), rv)

    def delete(self, keys: Any = None, *, where: Any = None) -> int:
        """DELETE existing rows by key (a pa.Table / list of dicts with the key columns, or a list
        of values for a one-column key) or by a filter ``where``."""
        rv = self.refresh()
        pk = self._state.primary_key
        schema = self._state.schema_at(rv)
        if isinstance(keys, pc.Expression):
            keys, where = None, keys
        if where is not None:
            gone = self._read_snapshot(rv, filter=where, columns=pk)
        else:
            k = self._keys_table(keys, schema)
            gone = self._current_rows(k, rv, columns=pk)
        return self._write("delete", self._prepare(gone, OP_DELETE, schema), rv)

    def _keys_table(self, keys: Any, schema: pa.Schema) -> pa.Table:
        pk = self._state.primary_key
        if isinstance(keys, list) and keys and not isinstance(keys[0], dict):
            if len(pk) != 1:
                keys = [dict(zip(pk, k)) for k in keys]
            else:
                return pa.table({pk[0]: pa.array(keys, type=schema.field(pk[0]).type)})
        t = to_arrow(keys, schema) if not (isinstance(keys, list) and not keys) else pa.schema([schema.field(k) for k in pk]).empty_table()
        check_keys(t, pk)
        return conform(t.select(pk), pa.schema([schema.field(k) for k in pk]))

    def add_column(self, name: str, type: pa.DataType) -> int:
        """Schema evolution: add a nullable column; older files read it as nulls."""
        rv = self.refresh()
        schema = self._state.schema_at(rv)
        if name in schema.names:
            raise SchemaError(f"column {name!r} already exists")
        new = schema.append(pa.field(name, type, nullable=True))
        return self._commit("schema", adds=[], read_version=rv,
                            extra={"schema": schema_to_json(new), "schema_fields": [f"{f.name} {f.type}" for f in new]})

    def set_properties(self, properties: dict[str, str]) -> int:
        rv = self.refresh()
        if "write.bucket.num" in properties:
            raise TableError("write.bucket.num is fixed at creation")
        props = dict(self._state.properties_at(rv))
        props.update({k: str(v) for k, v in properties.items()})
        return self._commit("properties", adds=[], read_version=rv, extra={"properties": props})

    # ================================================================ restore
    def restore(self, version: int) -> int:
        """RESTORE to a retained version: a new version whose content equals that version's. The
        files live then become live again, plus a delta with the difference, so incremental
        readers see the restore as the change it is."""
        rv = self.refresh()
        target = self._resolve(version, None)
        pk = self._state.primary_key
        schema = self._state.schema_at(rv)
        old = conform(self._read_snapshot(target), schema)
        cur = self._read_snapshot(rv)
        diff_rows = self._diff(old, cur, pk, schema)
        files = self._stage(diff_rows)
        readd = [fe.file for fe in self._state.live_files(target)]
        v = self._commit("restore", adds=readd + files, read_version=rv,
                         removes=lambda st: [fe.file.path for fe in st.files.values() if fe.live],
                         extra={"restore_of": target})
        self._after_data_commit(v)
        return v

    @staticmethod
    def _diff(target: pa.Table, cur: pa.Table, pk: list[str], schema: pa.Schema) -> pa.Table:
        """Changes turning ``cur`` into ``target``: upserts of rows new or different in target,
        deletes of keys not in target. Rows: user columns + _op."""
        suffix = "__cur"
        gone = cur.select(pk).join(target.select(pk), keys=pk, join_type="left anti")
        new = target.join(cur.select(pk), keys=pk, join_type="left anti")
        both = target.join(cur.rename_columns([c if c in pk else c + suffix for c in cur.column_names]),
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

    # ================================================================ compaction (T6)
    def compact(self, buckets: Iterable[int] | None = None) -> int | None:
        """Merge each bucket's base + deltas into a new base (latest state per key, deletes dropped),
        buckets in parallel. Returns the new version, or None if nothing needed compaction."""
        rv = self.refresh()
        schema = self._state.schema_at(rv)
        plan = {b: p for b, p in self._bucket_files(rv).items() if p[2] and (buckets is None or b in set(buckets))}
        if not plan:
            return None
        pk = self._state.primary_key

        def one(item):
            b, (base, bv, deltas) = item
            merged = self._merge_bucket(base, bv, deltas, schema.names, schema, None)
            merged = merged.take(pc.sort_indices(merged, sort_keys=sort_keys(pk)))
            return write_parquet(self.path, merged, kind="base", bucket=b, level=0, primary_key=pk,
                                 min_version=rv, max_version=rv)
        par = max(1, int(self._prop("compaction.parallelism")))
        with ThreadPoolExecutor(max_workers=min(par, len(plan))) as ex:
            new_bases = list(ex.map(one, sorted(plan.items())))
        done = set(plan)

        def removes(st: TableState) -> list[str]:
            # at commit time: every live file of these buckets fully covered by the new base
            return [fe.file.path for fe in st.files.values()
                    if fe.live and fe.file.bucket in done and fe.file.max_version is not None
                    and fe.file.max_version <= rv]
        return self._commit("compact", adds=new_bases, read_version=rv, removes=removes, buckets=done)

    # ================================================================ clustering (T5)
    def cluster(self, *, force: bool = True) -> int | None:
        """Merge small delta files per bucket, L0 -> L1 -> L2, keeping every row (every intermediate
        state). ``force``: merge any 2+ eligible files (manual); otherwise only when a level reaches
        clustering.l0.num / clustering.l1.num files (automatic). Files of at least
        clustering.max.file.bytes, or spanning more than clustering.max.time.span.hours, are left
        alone. Retried at the metadata level when other commits intervene; returns the new version
        or None if there was nothing to do."""
        rv = self.refresh()
        st = self._state
        schema = st.schema_at(rv)
        pk = st.primary_key
        max_bytes = int(self._prop("clustering.max.file.bytes"))
        max_span = int(float(self._prop("clustering.max.time.span.hours")) * 3_600_000)
        thresholds = {0: int(self._prop("clustering.l0.num")), 1: int(self._prop("clustering.l1.num"))}
        groups: list[tuple[int, int, list[FileEntry]]] = []
        for b, (_, bv, deltas) in self._bucket_files(rv).items():
            for level in (0, 1):
                cands = [fe for fe in deltas if fe.file.level == level and fe.file.bytes < max_bytes
                         and st.timestamp(fe.file.max_version) - st.timestamp(fe.file.min_version) <= max_span]
                if len(cands) < (2 if force else max(2, thresholds[level])):
                    continue
                group: list[FileEntry] = []
                for fe in cands:   # consecutive files, bounded in bytes and time span
                    if group and (sum(g.file.bytes for g in group) + fe.file.bytes > max_bytes or
                                  st.timestamp(fe.file.max_version) - st.timestamp(group[0].file.min_version) > max_span):
                        if len(group) > 1:
                            groups.append((b, level + 1, group))
                        group = []
                    group.append(fe)
                if len(group) > 1:
                    groups.append((b, level + 1, group))
        if not groups:
            return None

        def one(g):
            b, level, fes = g
            t = pa.concat_tables([self._read(fe, schema.names, schema, None, with_time=True) for fe in fes])
            seq = "__seq"
            t = t.append_column(seq, pa.array(np.arange(t.num_rows, dtype=np.int64)))
            order = sort_keys(pk, (COMMIT_VERSION, "ascending"), (seq, "ascending"))
            t = t.take(pc.sort_indices(t, sort_keys=order)).drop_columns([seq])
            return write_parquet(self.path, t, kind="delta", bucket=b, level=level, primary_key=pk,
                                 min_version=min(fe.file.min_version for fe in fes),
                                 max_version=max(fe.file.max_version for fe in fes)), [fe.file.path for fe in fes]
        with ThreadPoolExecutor(max_workers=min(4, len(groups))) as ex:
            results = list(ex.map(one, groups))
        adds = [r[0] for r in results]
        inputs = [p for r in results for p in r[1]]
        try:
            return self._commit("cluster", adds=adds, read_version=rv, removes=inputs, inputs=inputs,
                                buckets={g[0] for g in groups})
        except CommitConflict:
            for f in adds:   # never published: remove the orphan files now
                try:
                    os.unlink(os.path.join(self.path, f.path))
                except FileNotFoundError:
                    pass
            raise

    # ================================================================ automatic maintenance
    def _after_data_commit(self, version: int) -> None:
        """Automatic clustering / compaction / retention triggered by table properties. Failures
        (a concurrent job won) are logged, never raised to the writer whose commit succeeded."""
        try:
            st = self._state
            if self._prop("clustering.auto").lower() == "true":
                self.cluster(force=False)
            delta_num = int(self._prop("compaction.delta.num"))
            commit_num = int(self._prop("compaction.commit.num"))
            if delta_num > 0:
                busy = [b for b, (_, _, d) in self._bucket_files(st.version).items() if len(d) >= delta_num]
                if busy:
                    self.compact(busy)
            if commit_num > 0:
                last = max((v for v, e in st.versions.items() if e["operation"] == "compact"), default=0)
                n = sum(1 for v, e in st.versions.items() if v > last and e["operation"] in DATA_OPERATIONS)
                if n >= commit_num:
                    self.compact()
            every = max(1, int(self._prop("retention.check.commit.num")))
            if (self._prop("retention.auto").lower() == "true" and st.version % every == 0
                    and self._horizon() > st.horizon):
                self.expire()
        except CommitConflict as e:
            log.info("automatic maintenance after version %d skipped: %s", version, e)

    # ================================================================ retention (T9)
    def expire(self) -> dict[str, int]:
        """Delete history older than acid.data.retain.hours: data files not live at any retained
        version, log entries before the horizon, orphan files of failed writers older than the
        retention. Returns counts."""
        with self._lock:
            self.refresh()
            return self._clean(self._horizon())

    def purge(self) -> dict[str, int]:
        """PURGE: drop all history; only the latest version stays readable."""
        with self._lock:
            return self._clean(self.refresh())

    def _clean(self, horizon: int) -> dict[str, int]:
        st = self._state
        horizon = max(horizon, st.horizon)
        dead = [p for p, fe in st.files.items() if not fe.live_since(horizon) and not fe.live_at(horizon)]
        keep_paths = set(st.files) - set(dead)
        for p in dead:
            del st.files[p]
        for v in [v for v in st.versions if v < horizon]:
            del st.versions[v]
        referenced = {v for p in keep_paths for v in (st.files[p].file.min_version, st.files[p].file.max_version)}
        for v in [v for v in st.timestamps if v < horizon and v not in referenced]:
            del st.timestamps[v]
        for app_id, entries in st.apps.items():   # keep the latest batch per app, whatever its age
            st.apps[app_id] = [e for e in entries if e[1] >= horizon] or entries[-1:]
        st.horizon = horizon
        self._log.write_checkpoint(st)   # the state from which the table is opened from now on
        removed_files = 0
        for p in dead:
            try:
                os.unlink(os.path.join(self.path, p))
                removed_files += 1
            except FileNotFoundError:
                pass
        removed_logs = 0
        for v in self._log.entry_versions():
            if v < horizon:
                os.unlink(self._log.entry_path(v))
                removed_logs += 1
        for v in self._log.checkpoint_versions():
            if v < st.version:
                try:
                    os.unlink(os.path.join(self._log.dir, f"{v:020d}.checkpoint.json"))
                except FileNotFoundError:
                    pass
        # files no commit references (failed / abandoned writers), once older than the retention
        grace_s = float(self._prop("acid.data.retain.hours")) * 3600
        now_s = self._now() / 1000
        orphans = 0
        data_dir = os.path.join(self.path, "data")
        for dirpath, _, names in os.walk(data_dir):
            for n in names:
                rel = os.path.relpath(os.path.join(dirpath, n), self.path)
                if rel not in keep_paths and now_s - os.path.getmtime(os.path.join(dirpath, n)) > grace_s:
                    os.unlink(os.path.join(dirpath, n))
                    orphans += 1
        return {"horizon": horizon, "files_removed": removed_files, "log_entries_removed": removed_logs,
                "orphans_removed": orphans}

    def __repr__(self) -> str:
        return f"Table({self.path!r}, version={self._state.version})"


class Transaction:
    """Buffered upserts/deletes committed as one version on exit (see Table.transaction)."""

    def __init__(self, table: Table):
        self.table = table
        self.read_version = table.refresh()
        self.schema = table._state.schema_at(self.read_version)
        self._parts: list[pa.Table] = []
        self._app: dict | None = None
        self.version: int | None = None

    def upsert(self, data: Any) -> None:
        self._parts.append(self.table._prepare(data, OP_UPSERT, self.schema))

    def delete(self, keys: Any) -> None:
        k = self.table._keys_table(keys, self.schema) if not isinstance(keys, pa.Table) else keys
        self._parts.append(self.table._prepare(k, OP_DELETE, self.schema))

    def set_app_state(self, app_id: str, batch_id: int, extra: dict | None = None) -> None:
        self._app = {"app_id": app_id, "batch_id": int(batch_id), "extra": extra or {}}

    def commit(self) -> int:
        rows = pa.concat_tables(self._parts) if self._parts else None
        files = self.table._stage(rows) if rows is not None else []
        self.version = self.table._commit("upsert", adds=files, read_version=self.read_version, app=self._app)
        self.table._after_data_commit(self.version)
        return self.version

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.commit()
        return False
