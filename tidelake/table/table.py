"""The transactional primary-key table (MaxCompute Transactional Table 2.0, seed 003; SPEC T1-T13):
the ``Table`` facade over the parts in this package, and ``Transaction``.

- ``metadata.py`` / ``log.py``: immutable metadata, typed actions and log entries, the versioned log;
- ``versions.py``: the one resolver of versions, timestamps and ranges against the retention horizon;
- ``scan.py`` (planning, pruning), ``reader.py`` (merge on read), ``snapshot.py`` (a pinned version);
- ``writer.py`` (staging delta files), ``commit.py`` (optimistic commit, conflict table);
- ``maintenance.py``: compaction, clustering, retention, run in the background after data commits.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from tidelake.clock import wall_ms
from tidelake.storage import Storage, open_storage
from tidelake.observability.table_stats import TableStats

from .change_feed import ChangeFeed
from .change_files import ChangeFileWriter
from .commit import Committer
from .dv_commit import DeletionVectorWriter
from .engine_commit import EngineCommit, engine_of
from .errors import SchemaError, TableExists, TableNotFound, VersionNotFound
from .files import (COMMIT_TIME, COMMIT_VERSION, OP_DELETE, OP_UPSERT, DataFile, FilePlan, bucket_ids, check_keys,
                    conform, last_wins, to_arrow)
from .key_lookup import rows_with_keys
from .log import CurrentMetadata, MetadataLog
from .maintenance import Maintenance
from .merge_engine import MergeEngine
from .metadata import ChangeSchema, LogEntry, SetAppState, SetProperties, TableMetadata
from .properties import BUCKET_NUM, CREATION_DEFAULTS, InvalidProperty, engine_property, validated
from .reader import MergeOnReadReader
from .scan import ScanFilter, ScanPlanner, file_plans
from .snapshot import Snapshot
from .versions import VersionResolver
from .writer import DeltaWriter, changes_between

Clock = Callable[[], int]   # milliseconds since the epoch

COMMIT_OPERATIONS = ("upsert", "insert", "update", "delete", "overwrite")


class Table:
    """A transactional table on a storage (a local directory, ``s3://bucket/prefix``, ``memory://name``;
    ``storage_options`` for S3: endpoint, region, access_key_id, secret_access_key, session_token,
    allow_http, else AWS's environment variables). Thread-safe for concurrent use from several threads;
    several processes (on any machines, for S3) coordinate through the metadata log.

    Automatic maintenance triggered by data commits runs in a background thread (``maintenance``:
    ``wait()`` for it, ``close()`` / ``with Table.open(...) as t`` to stop it); pass
    ``maintenance="inline"`` (or set the property ``maintenance.mode``) to run it inside the commit.

    The object reads the metadata log only when asked to: at ``open``, in ``refresh()``, and when it commits
    (a write starts from the newest version, as an optimistic commit must). Between those, ``metadata``,
    ``version``, ``schema``, ``properties`` and the reads (``scan``, ``changes``, ``snapshot``, ...) see the
    version it last loaded, so a reader that wants another writer's commits calls ``refresh()`` first.

    A Table pickles as its storage (URL and options) and current metadata (no log I/O to unpickle); to
    ship one version to many tasks, prefer the smaller ``snapshot()``."""

    def __init__(self, storage: Storage, metadata: TableMetadata, clock: Clock | None = None,
                 maintenance: str | None = None):
        #: where the table's files are (data and metadata log alike)
        self.storage = storage
        #: the table's location: an absolute local path, or the URL it was opened with
        self.path = storage.url
        self._clock: Clock = clock or wall_ms
        self._maintenance_mode = maintenance
        self._current = CurrentMetadata(MetadataLog(storage), metadata)
        #: merge-on-read access to the data files
        self.reader = MergeOnReadReader(storage, metadata.primary_key)
        #: staging of delta files (``prepare``, ``keys``, ``stage``)
        self.writer = DeltaWriter(storage, metadata.primary_key, metadata.bucket_num,
                                  every_change=engine_of(metadata).resolves_on_commit)
        #: the optimistic commit of this table
        self.committer = Committer(self._current, self._clock,
                                   change_files=ChangeFileWriter(storage, self.reader),
                                   engine=EngineCommit(storage, self.reader),
                                   vectors=DeletionVectorWriter(storage, self.reader))
        #: compaction, clustering, retention; ``wait()`` / ``close()`` the background worker
        self.maintenance = Maintenance(storage, self._current, self.committer, self.reader, self._clock,
                                       maintenance)

    @property
    def stats(self) -> TableStats:
        """What this process's object of the table counted: commit retries and conflicts, maintenance runs
        (``tidelake.observability.table_collector.TableCollector`` exposes them as metrics)."""
        return self.committer.stats

    def __reduce__(self):
        return (Table, (self.storage, self._current.get(), self._clock, self._maintenance_mode))

    # ================================================================ create / open / close
    @classmethod
    def create(cls, path: "str | Storage", schema: pa.Schema, primary_key: list[str],
               properties: dict[str, str] | None = None, *, clock: Clock | None = None,
               maintenance: str | None = None, storage_options: Mapping[str, str] | None = None) -> "Table":
        for k in primary_key:
            if k not in schema.names:
                raise SchemaError(f"primary key column {k!r} not in schema {schema.names}")
        bad = [n for n in schema.names if n.startswith("_op") or n in (COMMIT_VERSION, COMMIT_TIME)]
        if bad:
            raise SchemaError(f"column names {bad} are reserved")
        props = {**CREATION_DEFAULTS, **validated(properties or {})}
        # primary key columns are never null
        schema = pa.schema([f.with_nullable(False) if f.name in primary_key else f for f in schema])
        MergeEngine.of(props, schema, primary_key)   # (its properties must fit the schema)
        storage = open_storage(path, storage_options)
        mlog = MetadataLog(storage)
        entry = LogEntry(version=0, timestamp_ms=int((clock or wall_ms)()), operation="create", read_version=-1,
                         actions=(ChangeSchema(schema), SetProperties(props)), primary_key=tuple(primary_key))
        if not mlog.publish(entry):
            raise TableExists(f"a table already exists at {storage.url}")
        return cls.open(storage, clock=clock, maintenance=maintenance)

    @classmethod
    def open(cls, path: "str | Storage", *, clock: Clock | None = None, maintenance: str | None = None,
             storage_options: Mapping[str, str] | None = None) -> "Table":
        """The table at ``path``: a local path, ``file://``, ``s3://bucket/prefix``, ``memory://name``, or a
        ``Storage`` (``tidelake.storage.open_storage``)."""
        storage = open_storage(path, storage_options)
        mlog = MetadataLog(storage)
        if not mlog.exists():
            raise TableNotFound(f"no tidelake table at {storage.url}")
        return cls(storage, mlog.load(), clock, maintenance)

    @classmethod
    def exists(cls, path: "str | Storage", *, storage_options: Mapping[str, str] | None = None) -> bool:
        return MetadataLog(open_storage(path, storage_options)).exists()

    def close(self) -> None:
        """Stop background maintenance (the run in progress finishes; pending work is found again
        after a later commit)."""
        self.maintenance.close()

    def __enter__(self) -> "Table":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ================================================================ metadata
    def refresh(self) -> int:
        """Catch up with the log (the only read of it outside open and commit); returns the latest version."""
        return self._current.refresh().version

    @property
    def metadata(self) -> TableMetadata:
        """The metadata as of the last ``refresh()``, open or commit of this object (no I/O): immutable."""
        return self._current.get()

    def _resolver(self, md: TableMetadata | None = None) -> VersionResolver:
        return VersionResolver(md if md is not None else self._current.get(), int(self._clock()))

    @property
    def version(self) -> int:
        """The newest version this object knows (``refresh()`` looks for newer ones)."""
        return self._current.get().version

    @property
    def schema(self) -> pa.Schema:
        return self._current.get().schema

    def schema_at(self, version: int) -> pa.Schema:
        """The table schema as of a version (columns added later are absent)."""
        return self._current.get().schema_at(version)

    def visible_schema_at(self, version: int | None = None) -> pa.Schema:
        """The schema as a reader sees it (default: latest): without the ``columns.hidden`` columns."""
        md = self._current.get()
        return md.visible_schema_at(md.version if version is None else version)

    @property
    def primary_key(self) -> list[str]:
        return list(self._current.get().primary_key)

    @property
    def properties(self) -> dict[str, str]:
        md = self.metadata
        return dict(md.properties_at(md.version))

    @property
    def bucket_num(self) -> int:
        return self._current.get().bucket_num

    # ================================================================ history and versions
    def history(self) -> list[dict[str, Any]]:
        """Every retained version, oldest first: version, timestamp_ms, operation, read_version,
        files added/removed, rows added, app state."""
        md = self.metadata
        return [md.commits[v].as_dict() for v in md.retained_versions()]

    def latest_version(self, n: int = 1) -> int:
        """The n-th latest version (seed 003's get_latest_version(table, n)); n=1 is the latest."""
        if n < 1:
            raise ValueError("n must be >= 1")
        md = self.metadata
        v = md.version - (n - 1)
        if v not in md.commits:
            raise VersionNotFound(f"there is no {n}-th latest version (latest {md.version}, "
                                  f"oldest retained {min(md.commits)})")
        return v

    def latest_timestamp(self, n: int = 1) -> int:
        """Commit timestamp (ms) of the n-th latest version (seed 003's get_latest_timestamp)."""
        v = self.latest_version(n)
        return self._current.get().timestamp(v)

    def version_at(self, timestamp_ms: int) -> int:
        """The version current at a timestamp: the newest commit at or before it."""
        return self._resolver().version_at(timestamp_ms)

    def resolve_range(self, start_version: int | None = None, end_version: int | None = None, *,
                      start_timestamp: int | None = None, end_timestamp: int | None = None) -> tuple[int, int]:
        """The (start, end] version range an incremental read over these bounds covers (validated
        against the retention horizon)."""
        return self._resolver().range(start_version, end_version, start_timestamp, end_timestamp)

    def app_state(self, app_id: str) -> dict[str, Any] | None:
        """The last (batch_id, extra) committed by an application, as of the latest version:
        {"batch_id": ..., "extra": {...}, "version": ...}; None if it never committed."""
        commits = self.metadata.apps.get(app_id)
        if not commits:
            return None
        c = commits[-1]
        return {"batch_id": c.batch_id, "extra": dict(c.extra), "version": c.version}

    # ================================================================ reading
    def snapshot(self, version: int | None = None, timestamp: int | None = None) -> Snapshot:
        """An immutable, picklable handle on one version (default: the newest this object knows):
        ``scan(buckets=...)``, ``plan()``, ``stage_files()`` without touching the metadata log (for Spark tasks)."""
        md = self._current.get()
        v = self._resolver(md).snapshot(version, timestamp)
        return Snapshot(self.storage, md.pinned(v), v)

    def plan(self, version: int | None = None, timestamp: int | None = None, *,
             start_version: int | None = None, end_version: int | None = None,
             start_timestamp: int | None = None, end_timestamp: int | None = None,
             filter: Any = None) -> list[FilePlan]:
        """The files a read would touch: a snapshot read (version/timestamp) or, given a start, an
        incremental read over (start, end]."""
        f = ScanFilter.parse(filter)
        md = self._current.get()
        resolver = self._resolver(md)
        if start_version is not None or start_timestamp is not None:
            s, e = resolver.range(start_version, end_version, start_timestamp, end_timestamp)
            return file_plans(ScanPlanner(md).incremental(s, e, f))
        v = resolver.snapshot(version, timestamp)
        return file_plans([fe for p in ScanPlanner(md).snapshot(v, f) for fe in p.files])

    def scan(self, version: int | None = None, timestamp: int | None = None, filter: Any = None,
             columns: Sequence[str] | None = None, *, buckets: set[int] | None = None,
             include_hidden: bool = False) -> pa.Table:
        """The table at a version (default latest) or timestamp (ms): one row per key; the ``columns.hidden``
        columns only when named in ``columns`` or ``include_hidden`` (the pipeline maintaining them).

        ``filter``: a pyarrow compute Expression, a dict {column: value}, or a list of
        (column, op, value) tuples ANDed together; tuples on the primary key drive bucket pruning
        (equality on the whole key reads one bucket) and min/max file skipping. ``buckets``: read
        only these buckets (one Spark partition per bucket)."""
        md = self._current.get()
        v = self._resolver(md).snapshot(version, timestamp)
        return Snapshot(self.storage, md, v).scan(filter, columns, buckets, include_hidden)

    def changes(self, start_version: int | None = None, end_version: int | None = None, *,
                start_timestamp: int | None = None, end_timestamp: int | None = None,
                filter: Any = None, columns: Sequence[str] | None = None, before_images: bool = False,
                buckets: set[int] | None = None, include_hidden: bool = False) -> pa.Table:
        """Incremental read over (start, end] (left-open, right-closed), by version or by commit
        timestamp (ms): every change with ``_op`` ('upsert'/'delete'), ``_commit_version`` and
        ``_commit_time``, ordered by commit, then key. Reads only delta files written by data
        commits in the range (never base files, never clustering/compaction output).

        ``before_images=True``: Delta's change data feed instead (see change_feed.py): ``_op`` is
        'insert' (a new key), 'update_preimage' + 'update_postimage' (a key that existed: the row as
        it was, then as it is), 'delete' (the row removed; a delete of a missing key yields nothing).
        The images come from the change files of versions committed with ``changelog.producer=lookup``,
        else from the table as of the range start, looked up by key (that version must still be
        within acid.data.retain.hours). ``buckets``: only the changes of those buckets (one
        Spark partition per bucket). The ``columns.hidden`` columns as in ``scan``."""
        f = ScanFilter.parse(filter)
        md = self._current.get()
        s, e = self._resolver(md).range(start_version, end_version, start_timestamp, end_timestamp)
        schema = md.schema_at(e)
        if columns is not None:
            wanted = list(columns)
        else:
            wanted = (schema if include_hidden else md.visible_schema_at(e)).names
        if before_images:
            return ChangeFeed(self.storage, md, self.reader, int(self._clock())).read(s, e, f, wanted, buckets)
        return self.reader.read_changes(ScanPlanner(md).incremental(s, e, f, buckets), schema, wanted, f.expression,
                                        md.timestamps)

    def follow(self, start_version: int, *, poll_seconds: float = 0.5, idle_timeout: float | None = None,
               stop: Callable[[], bool] | None = None, before_images: bool = False
               ) -> Iterable[tuple[int, int, pa.Table]]:
        """Incremental pipeline driver (SPEC T13): yields ``(start, end, changes over (start, end])``
        each time new versions are committed, reading exactly the new increment (``before_images``: as
        ``changes(before_images=True)``). Ends when ``stop()`` is true or after ``idle_timeout`` seconds
        without a new version."""
        start = start_version
        idle_since = time.monotonic()
        while not (stop and stop()):
            end = self.refresh()
            if end > start:
                yield start, end, self.changes(start_version=start, end_version=end, before_images=before_images)
                start = end
                idle_since = time.monotonic()
                continue
            if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                return
            time.sleep(poll_seconds)

    # ================================================================ staging and committing
    def stage_files(self, data: Any, *, op: str = "upsert", add_columns: Sequence[pa.Field] = ()) -> list[DataFile]:
        """Write bucketed, PK-sorted L0 delta Parquet files (not yet visible) for commit_staged().
        ``op``: 'upsert' | 'insert' (rows upserted), 'delete' (only the key columns are used), or
        'changes' (each row's own ``_op`` column, int8 0 upsert / 1 delete, in the order they happened:
        the last change of a key wins). Safe to call on Spark executors. Stages in the schema of the version
        this object knows (no log I/O). ``add_columns``: columns the commit of these files adds
        (``commit_staged(add_columns=)``), staged with the rest."""
        return self.writer.stage_files(data, op, with_columns(self._current.get().schema, add_columns))

    def commit_staged(self, files: list[DataFile], *, operation: str = "upsert",
                      read_version: int | None = None, app_id: str | None = None,
                      batch_id: int | None = None, app_extra: dict | None = None,
                      add_columns: Sequence[pa.Field] = ()) -> int:
        """Publish staged files as one new version (atomic). ``operation`` names the conflict class:
        'upsert' (blind stream write), 'insert', 'update', 'delete', 'overwrite' (all rows live at
        ``read_version`` are replaced). ``read_version``: the version the job read (None: no
        conflict detection except overwrite). With ``app_id``/``batch_id`` the commit also records
        the application's batch id and ``app_extra`` (e.g. Kafka offsets) atomically; if that batch
        was already committed this is a no-op returning that version (idempotent sink).
        Automatic maintenance this commit makes due runs afterwards, off this call's path. ``add_columns``
        (nullable columns, schema evolution) are added to the schema by the same commit: the version that first
        holds their values is the one that has them."""
        if operation not in COMMIT_OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}")
        app = None
        if app_id is not None:
            if batch_id is None:
                raise ValueError("batch_id is required with app_id")
            app = SetAppState(app_id, int(batch_id), app_extra or {})
        files = [f if isinstance(f, DataFile) else DataFile.from_dict(f) for f in files]
        rv, removes = read_version, None
        if operation == "overwrite":   # its tombstones: the rows live at the version it read, in the newest schema
            md = self._current.refresh()
            rv = md.version if read_version is None else read_version
            files = files + self._overwrite_tombstones(md, rv, files)
            removes = _all_live
        # (the committer reads the log, once per attempt: a blind write is checked against nothing before the
        # version it publishes on, and its new columns are added to that version's schema)
        v = self.committer.commit(operation, adds=files, read_version=rv, app=app, removes=removes,
                                  schema=_added(add_columns) if add_columns else None)
        self.maintenance.after_commit()
        return v

    def _overwrite_tombstones(self, md: TableMetadata, read_version: int,
                              new_files: list[DataFile]) -> list[DataFile]:
        """Delete rows for keys live at read_version that the overwrite does not write again, so an
        incremental read sees the overwrite as the change it is."""
        pk = self.primary_key
        old = self.scan(version=read_version, columns=pk)
        if old.num_rows == 0:
            return []
        new_keys = [self.reader.read_file(f, pk, md.schema).select(pk) for f in new_files]
        gone = old.join(pa.concat_tables(new_keys), keys=pk, join_type="left anti") if new_keys else old
        return self.writer.stage(self.writer.prepare(gone, OP_DELETE, md.schema)) if gone.num_rows else []

    def _write(self, operation: str, rows: pa.Table, read_version: int) -> int:
        v = self.committer.commit(operation, adds=self.writer.stage(rows), read_version=read_version)
        self.maintenance.after_commit()
        return v

    # ================================================================ write API
    def transaction(self) -> "Transaction":
        """``with table.transaction() as tx: tx.upsert(...); tx.delete(...)`` commits atomically on
        exit (one version), or writes nothing if the block raises. It reads from the newest version."""
        self.refresh()
        return Transaction(self)

    def upsert(self, data: Any) -> int:
        with self.transaction() as tx:
            tx.upsert(data)
        return tx.version

    def insert_into(self, data: Any) -> int:
        """INSERT INTO: rows upserted by key (a key present twice: the last row wins)."""
        md = self._current.refresh()  # a write starts from the newest version
        return self._write("insert", self.writer.prepare(data, OP_UPSERT, md.schema), md.version)

    def insert_overwrite(self, data: Any) -> int:
        """INSERT OVERWRITE: the table's content becomes ``data``."""
        md = self._current.refresh()
        files = self.writer.stage(self.writer.prepare(data, OP_UPSERT, md.schema))
        return self.commit_staged(files, operation="overwrite", read_version=md.version)

    def _current_rows(self, keys: pa.Table, v: int, columns: list[str] | None = None) -> pa.Table:
        """Rows live at v whose key is in ``keys`` (reads only the buckets those keys hash to)."""
        pk = self.primary_key
        buckets = set(bucket_ids(keys, pk, self.bucket_num).tolist())
        cur = self.scan(version=v, columns=columns, buckets=buckets, include_hidden=True)
        return rows_with_keys(cur, keys, pk)

    def update(self, data: Any = None, *, where: Any = None, set: dict[str, Any] | None = None) -> int:
        """UPDATE. Either ``data`` (key columns + the columns to change; rows whose key does not
        exist are ignored) or ``where`` (filter) with ``set`` {column: new value}."""
        md = self._current.refresh()
        rv, schema, pk = md.version, md.schema, self.primary_key
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
            new = self.scan(version=rv, filter=where, include_hidden=True)
            for col, value in set.items():
                if col in pk:
                    raise SchemaError("cannot update primary key columns")
                idx = new.schema.get_field_index(col)
                new = new.set_column(idx, schema.field(col), pa.array([value] * new.num_rows, type=schema.field(col).type))
        return self._write("update", self.writer.prepare(new, OP_UPSERT, schema), rv)

    def delete(self, keys: Any = None, *, where: Any = None) -> int:
        """DELETE existing rows by key (a pa.Table / list of dicts with the key columns, or a list
        of values for a one-column key) or by a filter ``where``."""
        md = self._current.refresh()
        rv, schema, pk = md.version, md.schema, self.primary_key
        if isinstance(keys, pc.Expression):
            keys, where = None, keys
        if where is not None:
            gone = self.scan(version=rv, filter=where, columns=pk)
        else:
            gone = self._current_rows(self.writer.keys(keys, schema), rv, columns=pk)
        return self._write("delete", self.writer.prepare(gone, OP_DELETE, schema), rv)

    def add_column(self, name: str, type: pa.DataType) -> int:
        """Schema evolution: add a nullable column; older files read it as nulls."""
        md = self._current.refresh()
        if name in md.schema.names:
            raise SchemaError(f"column {name!r} already exists")
        return self.committer.commit("schema", read_version=md.version,
                                     schema=md.schema.append(pa.field(name, type, nullable=True)))

    def set_properties(self, properties: dict[str, str]) -> int:
        """ALTER TABLE SET TBLPROPERTIES: every value checked first (``properties.validated``), then one version."""
        md = self._current.refresh()
        for name in properties:
            if name == BUCKET_NUM.name or engine_property(name):
                raise InvalidProperty(name, "fixed at creation")
        props = dict(md.properties_at(md.version))
        props.update(validated(properties))
        return self.committer.commit("properties", read_version=md.version, properties=props)

    # ================================================================ restore
    def restore(self, version: int) -> int:
        """RESTORE to a retained version: a new version whose content equals that version's. The
        files live then become live again, plus a delta with the difference, so incremental
        readers see the restore as the change it is."""
        md = self._current.refresh()
        rv = md.version
        target = self._resolver(md).snapshot(version)
        schema = md.schema
        old = conform(Snapshot(self.storage, md, target).scan(include_hidden=True), schema)
        diff = changes_between(old, self.scan(version=rv, include_hidden=True), self.primary_key, schema)
        readd = [fe.file for fe in md.live_files(target)]
        v = self.committer.commit("restore", adds=readd + self.writer.stage(diff), read_version=rv,
                                  removes=_all_live, restore_of=target)
        self.maintenance.after_commit()
        return v

    # ================================================================ maintenance
    def compact(self, buckets: Iterable[int] | None = None, *,
                progress: Callable[[int, int], None] | None = None) -> int | None:
        """Merge each bucket's base + deltas into a new base (see ``Maintenance.compact``);
        ``progress(done, total)`` as buckets finish."""
        return self.maintenance.compact(buckets, progress=progress)

    def cluster(self, *, force: bool = True) -> int | None:
        """Merge small delta files per bucket, L0 -> L1 -> L2 (see ``Maintenance.cluster``)."""
        return self.maintenance.cluster(force=force)

    def expire(self) -> dict[str, int]:
        """Delete history older than acid.data.retain.hours (see ``Maintenance.expire``)."""
        return self.maintenance.expire()

    def purge(self) -> dict[str, int]:
        """PURGE: drop all history; only the latest version stays readable."""
        return self.maintenance.purge()

    def __repr__(self) -> str:
        return f"Table({self.path!r}, version={self._current.get().version})"


def _all_live(md: TableMetadata) -> list[str]:
    """Every live file at commit time (what an overwrite or a restore replaces)."""
    return [fe.file.path for fe in md.files.values() if fe.live]


def _added(columns: Sequence[pa.Field]) -> Callable[[TableMetadata], "pa.Schema | None"]:
    """The commit's schema change adding ``columns``: none when the schema it publishes on has them all."""
    def change(md: TableMetadata) -> pa.Schema | None:
        schema = with_columns(md.schema, columns)
        return None if schema.equals(md.schema) else schema
    return change


def with_columns(schema: pa.Schema, columns: Sequence[pa.Field]) -> pa.Schema:
    """``schema`` with ``columns`` appended as nullable columns (a column it has already, of the same type, is
    left as it is; of another type, a SchemaError)."""
    for column in columns:
        if column.name in schema.names:
            have = schema.field(column.name).type
            if not have.equals(column.type):
                raise SchemaError(f"column {column.name!r} is {have}, cannot add it as {column.type}")
            continue
        schema = schema.append(column.with_nullable(True))
    return schema


class Transaction:
    """Buffered upserts/deletes committed as one version on exit (see Table.transaction). Uses only
    the table's public parts: ``writer`` to prepare and stage, ``commit_staged`` to publish."""

    def __init__(self, table: Table):
        self.table = table
        md = table.metadata
        self.read_version = md.version
        self.schema = md.schema
        self._parts: list[pa.Table] = []
        self._app: tuple[str, int, dict] | None = None
        self.version: int | None = None

    def upsert(self, data: Any) -> None:
        self._parts.append(self.table.writer.prepare(data, OP_UPSERT, self.schema))

    def delete(self, keys: Any) -> None:
        k = keys if isinstance(keys, pa.Table) else self.table.writer.keys(keys, self.schema)
        self._parts.append(self.table.writer.prepare(k, OP_DELETE, self.schema))

    def set_app_state(self, app_id: str, batch_id: int, extra: dict | None = None) -> None:
        self._app = (app_id, int(batch_id), extra or {})

    def commit(self) -> int:
        files = self.table.writer.stage(pa.concat_tables(self._parts)) if self._parts else []
        app_id, batch_id, extra = self._app if self._app is not None else (None, None, None)
        self.version = self.table.commit_staged(files, operation="upsert", read_version=self.read_version,
                                                app_id=app_id, batch_id=batch_id, app_extra=extra)
        return self.version

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.commit()
        return False
