"""Immutable table metadata: typed actions, typed log entries, and the state they replay into.

A commit is a :class:`LogEntry`: who/when (version, timestamp, operation, read version) plus a tuple of
typed actions (:class:`AddFile`, :class:`RemoveFile`, :class:`SetProperties`, :class:`ChangeSchema`,
:class:`SetAppState`, :class:`SetDeletionVectors`). :meth:`TableMetadata.apply` returns a NEW
:class:`TableMetadata`; nothing is changed in place, so a metadata object handed to a reader (another thread, a pickled Spark task)
stays valid and consistent for as long as it is held. The dicts inside a published metadata object
are never modified either (they are rebuilt by ``apply`` / ``expire``).

The JSON form of an entry (``to_json``/``from_json``) is the on-disk log format::

    {"version", "timestamp_ms", "operation", "read_version", "add": [DataFile dicts], "remove": [paths],
     "rows_added", optional "primary_key", "schema" (+ "schema_fields"), "properties", "app",
     "buckets", "restore_of", "auto", "deletion_vectors": [DeletionVectorIndex dicts]}
"""
from __future__ import annotations

import base64
import bisect
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, TypeVar, Union

import pyarrow as pa

from .files import DataFile
from .properties import BUCKET_NUM, HIDDEN_COLUMNS, TableProperty

T = TypeVar("T")


def schema_to_json(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_json(s: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(s)))


# ---------------------------------------------------------------- actions

@dataclass(frozen=True)
class AddFile:
    """A data file becomes live (a new file, or an old one live again after a restore)."""
    file: DataFile


@dataclass(frozen=True)
class RemoveFile:
    """A data file stops being live (still readable at older versions until retention removes it)."""
    path: str


@dataclass(frozen=True)
class SetProperties:
    """The table's complete property set from this version on."""
    properties: Mapping[str, str]


@dataclass(frozen=True)
class ChangeSchema:
    """The table schema from this version on."""
    schema: pa.Schema


@dataclass(frozen=True)
class SetAppState:
    """An application's progress, committed atomically with the data (exactly-once sinks)."""
    app_id: str
    batch_id: int
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeletionVectorIndex:
    """One bucket's deletion vectors file (deletion_vectors.py): the positions of the superseded rows of
    each data file it ``covers``, which are exactly the files a snapshot of the bucket read when it was
    written. A read uses it only while the bucket's files are still those (scan.py)."""
    path: str
    bucket: int
    covers: tuple[str, ...]
    deleted: int      # positions marked, over all its vectors
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "bucket": self.bucket, "covers": list(self.covers), "deleted": self.deleted,
                "bytes": self.bytes}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DeletionVectorIndex":
        return cls(d["path"], int(d["bucket"]), tuple(d["covers"]), int(d["deleted"]), int(d["bytes"]))


@dataclass(frozen=True)
class SetDeletionVectors:
    """A bucket's deletion vectors from this version on (they replace the bucket's previous ones)."""
    index: DeletionVectorIndex


Action = Union[AddFile, RemoveFile, SetProperties, ChangeSchema, SetAppState, SetDeletionVectors]


# ---------------------------------------------------------------- log entries

@dataclass(frozen=True)
class LogEntry:
    """One version of the metadata log."""
    version: int
    timestamp_ms: int
    operation: str
    read_version: int
    actions: tuple[Action, ...] = ()
    primary_key: tuple[str, ...] | None = None   # version 0 only
    buckets: tuple[int, ...] | None = None       # maintenance: the buckets it rewrote
    restore_of: int | None = None
    auto: bool = False                           # automatic maintenance (not asked for by a user)

    def of(self, kind: type) -> list:
        return [a for a in self.actions if isinstance(a, kind)]

    @property
    def rows_added(self) -> int:
        return sum(a.file.rows for a in self.of(AddFile))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"version": self.version, "timestamp_ms": self.timestamp_ms,
                             "operation": self.operation, "read_version": self.read_version,
                             "add": [a.file.to_dict() for a in self.of(AddFile)],
                             "remove": [a.path for a in self.of(RemoveFile)], "rows_added": self.rows_added}
        if self.primary_key is not None:
            d["primary_key"] = list(self.primary_key)
        for a in self.of(ChangeSchema):
            d["schema"] = schema_to_json(a.schema)
            d["schema_fields"] = [f"{f.name} {f.type}" for f in a.schema]
        for a in self.of(SetProperties):
            d["properties"] = dict(a.properties)
        for a in self.of(SetAppState):
            d["app"] = {"app_id": a.app_id, "batch_id": a.batch_id, "extra": dict(a.extra)}
        if self.buckets is not None:
            d["buckets"] = list(self.buckets)
        if self.restore_of is not None:
            d["restore_of"] = self.restore_of
        if self.auto:
            d["auto"] = True
        if self.of(SetDeletionVectors):
            d["deletion_vectors"] = [a.index.to_dict() for a in self.of(SetDeletionVectors)]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LogEntry":
        actions: list[Action] = [RemoveFile(p) for p in d.get("remove", [])]
        actions += [AddFile(DataFile.from_dict(f)) for f in d.get("add", [])]
        if "schema" in d:
            actions.append(ChangeSchema(schema_from_json(d["schema"])))
        if "properties" in d:
            actions.append(SetProperties(dict(d["properties"])))
        app = d.get("app")
        if app:
            actions.append(SetAppState(app["app_id"], int(app["batch_id"]), app.get("extra") or {}))
        actions += [SetDeletionVectors(DeletionVectorIndex.from_dict(x)) for x in d.get("deletion_vectors", [])]
        return cls(version=d["version"], timestamp_ms=d["timestamp_ms"], operation=d["operation"],
                   read_version=d.get("read_version", -1), actions=tuple(actions),
                   primary_key=tuple(d["primary_key"]) if "primary_key" in d else None,
                   buckets=tuple(d["buckets"]) if d.get("buckets") is not None else None,
                   restore_of=d.get("restore_of"), auto=bool(d.get("auto", False)))

    def info(self) -> "CommitInfo":
        """What the metadata keeps of this entry once replayed (its history row)."""
        apps = self.of(SetAppState)
        schemas = self.of(ChangeSchema)
        props = self.of(SetProperties)
        return CommitInfo(
            version=self.version, timestamp_ms=self.timestamp_ms, operation=self.operation,
            read_version=self.read_version, added=len(self.of(AddFile)), removed=len(self.of(RemoveFile)),
            rows_added=self.rows_added, app=apps[-1] if apps else None, buckets=self.buckets,
            restore_of=self.restore_of, auto=self.auto, primary_key=self.primary_key,
            schema_fields=tuple(f"{f.name} {f.type}" for f in schemas[-1].schema) if schemas else None,
            properties=props[-1].properties if props else None)


@dataclass(frozen=True)
class CommitInfo:
    """One retained version as the metadata remembers it (without its file lists)."""
    version: int
    timestamp_ms: int
    operation: str
    read_version: int
    added: int = 0
    removed: int = 0
    rows_added: int = 0
    app: SetAppState | None = None
    buckets: tuple[int, ...] | None = None
    restore_of: int | None = None
    auto: bool = False
    primary_key: tuple[str, ...] | None = None
    schema_fields: tuple[str, ...] | None = None
    properties: Mapping[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The history row (JSON-safe; optional fields only when set). Also the checkpoint form."""
        d: dict[str, Any] = {"version": self.version, "timestamp_ms": self.timestamp_ms, "operation": self.operation,
                             "read_version": self.read_version, "added": self.added, "removed": self.removed,
                             "rows_added": self.rows_added}
        if self.app is not None:
            d["app"] = {"app_id": self.app.app_id, "batch_id": self.app.batch_id, "extra": dict(self.app.extra)}
        optional = {"buckets": list(self.buckets) if self.buckets is not None else None,
                    "restore_of": self.restore_of, "auto": self.auto or None,
                    "primary_key": list(self.primary_key) if self.primary_key is not None else None,
                    "schema_fields": list(self.schema_fields) if self.schema_fields is not None else None,
                    "properties": dict(self.properties) if self.properties is not None else None}
        d.update({k: v for k, v in optional.items() if v is not None})
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CommitInfo":
        app = d.get("app")
        return cls(version=d["version"], timestamp_ms=d["timestamp_ms"], operation=d["operation"],
                   read_version=d.get("read_version", -1), added=d.get("added", 0), removed=d.get("removed", 0),
                   rows_added=d.get("rows_added", 0),
                   app=SetAppState(app["app_id"], int(app["batch_id"]), app.get("extra") or {}) if app else None,
                   buckets=tuple(d["buckets"]) if d.get("buckets") is not None else None,
                   restore_of=d.get("restore_of"), auto=bool(d.get("auto", False)),
                   primary_key=tuple(d["primary_key"]) if "primary_key" in d else None,
                   schema_fields=tuple(d["schema_fields"]) if "schema_fields" in d else None,
                   properties=dict(d["properties"]) if "properties" in d else None)


@dataclass(frozen=True)
class AppCommit:
    """One committed batch of an application."""
    batch_id: int
    version: int
    extra: Mapping[str, Any]


# ---------------------------------------------------------------- files and their lifetimes

@dataclass(frozen=True)
class FileEntry:
    """A data file and the version intervals [added, removed) during which it is live."""
    file: DataFile
    intervals: tuple[tuple[int, int | None], ...]
    commit_seq: int = 0   # position in the add list of the commit that first published it

    def live_at(self, v: int) -> bool:
        return any(a <= v and (r is None or v < r) for a, r in self.intervals)

    def live_since(self, v: int) -> bool:
        """Live at some version >= v."""
        return any(r is None or r > v for _, r in self.intervals)

    @property
    def live(self) -> bool:
        return bool(self.intervals) and self.intervals[-1][1] is None

    @property
    def removed_at(self) -> int | None:
        return self.intervals[-1][1] if self.intervals else None


# ---------------------------------------------------------------- the replayed state

@dataclass(frozen=True)
class TableMetadata:
    """Everything the log says up to ``version``, replayed: commits, files with their live
    intervals, schemas, properties, application states. Immutable: ``apply`` and ``expire``
    return new objects."""
    version: int = -1
    horizon: int = 0                                       # versions below were expired
    primary_key: tuple[str, ...] = ()
    commits: Mapping[int, CommitInfo] = field(default_factory=dict)
    # commit time of every version still referenced (outlives ``commits`` rows that expire while a
    # restored or clustered file still holds rows of that version)
    timestamps: Mapping[int, int] = field(default_factory=dict)
    files: Mapping[str, FileEntry] = field(default_factory=dict)
    schemas: tuple[tuple[int, pa.Schema], ...] = ()
    properties: tuple[tuple[int, Mapping[str, str]], ...] = ()
    apps: Mapping[str, tuple[AppCommit, ...]] = field(default_factory=dict)
    # per bucket, its deletion vectors files by the version they took effect (oldest first)
    deletion_vectors: Mapping[int, tuple[tuple[int, DeletionVectorIndex], ...]] = field(default_factory=dict)

    # ------------------------------------------------------------ replay
    def apply(self, *entries: LogEntry) -> "TableMetadata":
        """The metadata after these entries (consecutive versions after ``self.version``)."""
        if not entries:
            return self
        files, commits, timestamps = dict(self.files), dict(self.commits), dict(self.timestamps)
        apps, vectors = dict(self.apps), dict(self.deletion_vectors)
        schemas, properties, pk, version = list(self.schemas), list(self.properties), self.primary_key, self.version
        for e in entries:
            v = e.version
            if v != version + 1:
                raise ValueError(f"log gap: have version {version}, got {v}")
            for a in e.of(RemoveFile):
                fe = files.get(a.path)
                if fe is not None and fe.live:
                    files[a.path] = replace(fe, intervals=fe.intervals[:-1] + ((fe.intervals[-1][0], v),))
            for i, a in enumerate(e.of(AddFile)):
                fe = files.get(a.file.path)
                if fe is None:
                    files[a.file.path] = FileEntry(a.file, ((v, None),), i)
                elif not fe.live:
                    files[a.file.path] = replace(fe, intervals=fe.intervals + ((v, None),))
            if e.primary_key is not None:
                pk = tuple(e.primary_key)
            for s in e.of(ChangeSchema):
                schemas.append((v, s.schema))
            for p in e.of(SetProperties):
                properties.append((v, dict(p.properties)))
            for a in e.of(SetAppState):
                apps[a.app_id] = apps.get(a.app_id, ()) + (AppCommit(a.batch_id, v, dict(a.extra)),)
            for a in e.of(SetDeletionVectors):
                vectors[a.index.bucket] = vectors.get(a.index.bucket, ()) + ((v, a.index),)
            commits[v] = e.info()
            timestamps[v] = e.timestamp_ms
            version = v
        return replace(self, version=version, primary_key=pk, commits=commits, timestamps=timestamps,
                       files=files, schemas=tuple(schemas), properties=tuple(properties), apps=apps,
                       deletion_vectors=vectors)

    def expire(self, horizon: int) -> tuple["TableMetadata", list[str]]:
        """The metadata without history before ``horizon``, and the paths of the data files no
        retained version reads any more (with the change files of those deltas)."""
        horizon = max(horizon, self.horizon)
        dead = [p for p, fe in self.files.items() if not fe.live_since(horizon) and not fe.live_at(horizon)]
        gone = set(dead)
        files = {p: fe for p, fe in self.files.items() if p not in gone}
        referenced = {v for fe in files.values() for v in (fe.file.min_version, fe.file.max_version)}
        timestamps = {v: ts for v, ts in self.timestamps.items() if v >= horizon or v in referenced}
        commits = {v: c for v, c in self.commits.items() if v >= horizon}
        # keep the latest batch per application, whatever its age
        apps = {a: tuple(c for c in cs if c.version >= horizon) or cs[-1:] for a, cs in self.apps.items()}
        dead += [self.files[p].file.changes for p in gone if self.files[p].file.changes]   # (they go with their delta)
        vectors = {}
        for b, history in self.deletion_vectors.items():   # each bucket's from the one in force at the horizon on
            first = max([i for i, (since, _) in enumerate(history) if since <= horizon], default=0)
            # (vectors of a file no retained version reads are never read again: no plan has its files)
            kept = tuple((since, index) for since, index in history[first:] if all(p in files for p in index.covers))
            dead += [index.path for since, index in history if (since, index) not in kept]
            if kept:
                vectors[b] = kept
        return replace(self, horizon=horizon, files=files, commits=commits, timestamps=timestamps, apps=apps,
                       deletion_vectors=vectors), dead

    def pinned(self, v: int) -> "TableMetadata":
        """Only what reading version v needs: the files live at v, the commit times they refer to,
        the schema and properties in force at v. Small, so cheap to pickle and ship."""
        files = {p: fe for p, fe in self.files.items() if fe.live_at(v)}
        referenced = {x for fe in files.values() for x in (fe.file.min_version, fe.file.max_version)} | {v}
        return TableMetadata(
            version=v, horizon=v, primary_key=self.primary_key, commits={v: self.commits[v]},
            timestamps={x: ts for x, ts in self.timestamps.items() if x in referenced}, files=files,
            schemas=((0, self.schema_at(v)),), properties=((0, self.properties_at(0)), (v, self.properties_at(v))),
            deletion_vectors={b: ((v, index),) for b in self.deletion_vectors
                              if (index := self.vectors_at(b, v)) is not None})

    # ------------------------------------------------------------ queries
    def timestamp(self, v: int) -> int:
        return self.timestamps[v]

    def live_files(self, v: int) -> list[FileEntry]:
        return [fe for fe in self.files.values() if fe.live_at(v)]

    def vectors_at(self, bucket: int, v: int) -> DeletionVectorIndex | None:
        """The bucket's deletion vectors file in force at version v (None: none yet)."""
        out = None
        for since, index in self.deletion_vectors.get(bucket, ()):
            if since <= v:
                out = index
        return out

    def vector_paths(self) -> set[str]:
        """Every deletion vectors file a retained version may read."""
        return {index.path for history in self.deletion_vectors.values() for _, index in history}

    def schema_at(self, v: int) -> pa.Schema:
        return _as_of(self.schemas, v)

    def properties_at(self, v: int) -> Mapping[str, str]:
        return _as_of(self.properties, v)

    def visible_schema_at(self, v: int) -> pa.Schema:
        """The schema at v without the ``columns.hidden`` columns (what a reader sees unless it asks for them)."""
        schema, hidden = self.schema_at(v), set(HIDDEN_COLUMNS.of(self.properties_at(v)))
        return pa.schema([f for f in schema if f.name not in hidden]) if hidden else schema

    @property
    def schema(self) -> pa.Schema:
        return self.schema_at(self.version)

    def setting(self, prop: TableProperty[T]) -> T:
        """A property's typed value at the latest version (its default when unset)."""
        return prop.of(self.properties_at(self.version))

    @property
    def bucket_num(self) -> int:
        return BUCKET_NUM.of(self.properties[0][1])   # fixed at creation

    def retained_versions(self) -> list[int]:
        return sorted(self.commits)

    def version_at_or_before(self, ts: int) -> int | None:
        """The newest retained version committed at or before ``ts``; None if there is none."""
        versions = self.retained_versions()
        i = bisect.bisect_right([self.timestamps[v] for v in versions], ts)
        return versions[i - 1] if i else None

    # ------------------------------------------------------------ checkpoint (de)serialisation
    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version, "horizon": self.horizon, "primary_key": list(self.primary_key),
            "versions": [self.commits[v].as_dict() for v in sorted(self.commits)],
            "files": [{"file": fe.file.to_dict(), "intervals": [list(i) for i in fe.intervals],
                       "commit_seq": fe.commit_seq} for fe in self.files.values()],
            "schemas": [[v, schema_to_json(s)] for v, s in self.schemas],
            "properties": [[v, dict(p)] for v, p in self.properties],
            "apps": {a: [[c.batch_id, c.version, dict(c.extra)] for c in cs] for a, cs in self.apps.items()},
            "timestamps": [[v, ts] for v, ts in sorted(self.timestamps.items())],
            "deletion_vectors": [[b, since, index.to_dict()] for b, history in sorted(self.deletion_vectors.items())
                                 for since, index in history],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TableMetadata":
        return cls(
            version=d["version"], horizon=d["horizon"], primary_key=tuple(d["primary_key"]),
            commits={c["version"]: CommitInfo.from_dict(c) for c in d["versions"]},
            timestamps={v: ts for v, ts in d["timestamps"]},
            files={f["file"]["path"]: FileEntry(DataFile.from_dict(f["file"]),
                                                tuple((a, r) for a, r in f["intervals"]), f["commit_seq"])
                   for f in d["files"]},
            schemas=tuple((v, schema_from_json(s)) for v, s in d["schemas"]),
            properties=tuple((v, dict(p)) for v, p in d["properties"]),
            apps={a: tuple(AppCommit(b, v, extra or {}) for b, v, extra in cs) for a, cs in d["apps"].items()},
            deletion_vectors=_vector_histories(d.get("deletion_vectors", [])))


def _vector_histories(rows: Iterable[list]) -> dict[int, tuple[tuple[int, DeletionVectorIndex], ...]]:
    out: dict[int, tuple[tuple[int, DeletionVectorIndex], ...]] = {}
    for b, since, index in rows:
        out[int(b)] = out.get(int(b), ()) + ((int(since), DeletionVectorIndex.from_dict(index)),)
    return out


def _as_of(history: Iterable[tuple[int, Any]], v: int) -> Any:
    """The value of a (version, value) history in force at version v (the first one if none yet)."""
    items = list(history)
    out = items[0][1]
    for since, value in items:
        if since <= v:
            out = value
    return out
