"""The optimistic commit: MaxCompute's conflict table, then publish version latest+1, retry on a lost race.

A job reads version R, writes its files, then commits: every version committed after R is checked
against the conflict table (:func:`conflict_rule`); if none conflicts, the entry is published as
latest+1 with create-exclusive semantics (``MetadataLog.publish``). Losing that race to another writer
just means re-checking the versions in between and trying the next number.

Automatic maintenance (a compaction or clustering the table ran by itself, ``LogEntry.auto``) changes
no logical row, so it never makes a data commit fail: a data commit skips such versions in its check.
The maintenance job itself still loses to anything it conflicts with (and is retried later).

A table with a merge engine (merge_engine.py) has each attempt's rows folded onto the live rows of the
state it publishes on (engine_commit.py), discarded likewise when the attempt loses its race.

With ``changelog.producer=lookup`` a data commit's change files (change_files.py) are written by each
attempt against the state that attempt publishes on, and discarded when the attempt loses its race.

With ``deletion-vectors.enabled`` the deletion vectors of the buckets a commit adds files to (dv_commit.py)
are likewise computed by each attempt on the state it publishes on (version N-1 for N, and the state N makes)
and discarded when it loses its race: two
commits never publish vectors for one file computed on the same state, so blind upserts stay free of
conflicts with each other and neither loses the rows the other superseded.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Callable, Iterable, Mapping

import pyarrow as pa

from tidelake.observability.table_stats import TableStats

from .change_files import ChangeFileWriter
from .dv_commit import DeletionVectorWriter
from .engine_commit import EngineCommit
from .errors import CommitConflict, TableError, VersionExpired, VersionNotFound
from .files import DataFile
from .log import CurrentMetadata
from .metadata import (Action, AddFile, ChangeSchema, LogEntry, RemoveFile, SetAppState, SetDeletionVectors,
                       SetProperties, TableMetadata)
from .properties import CHECKPOINT_INTERVAL

Clock = Callable[[], int]   # milliseconds since the epoch
log = logging.getLogger(__name__)

# operations that change rows (SPEC T4's data jobs); the others are cluster, compact, schema, properties, create
DATA_OPERATIONS = frozenset({"upsert", "insert", "update", "delete", "overwrite", "restore"})


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


RemoveSpec = Callable[[TableMetadata], Iterable[str]] | Iterable[str] | None
SchemaSpec = Callable[[TableMetadata], "pa.Schema | None"] | pa.Schema | None


class Committer:
    """Publishes the commits of one table (thread-safe; processes coordinate through the log)."""

    def __init__(self, current: CurrentMetadata, clock: Clock, max_attempts: int = 10_000,
                 stats: TableStats | None = None, change_files: ChangeFileWriter | None = None,
                 engine: EngineCommit | None = None, vectors: DeletionVectorWriter | None = None):
        self.current = current
        self.vectors = vectors   # writes a data commit's deletion vectors when the table asks for them
        self.change_files = change_files   # writes a data commit's change files when the table asks for them
        self.engine = engine   # resolves a data commit's rows by the table's merge engine
        self.clock = clock
        self.max_attempts = max_attempts
        self.stats = stats or TableStats()  # retries and conflicts, for the table's metrics
        self.lock = threading.Lock()   # held while publishing (retention holds it to swap in its metadata)

    def commit(self, operation: str, *, read_version: int | None, adds: Iterable[DataFile] = (),
               removes: RemoveSpec = None, app: SetAppState | None = None, schema: SchemaSpec = None,
               properties: Mapping[str, str] | None = None, buckets: Iterable[int] | None = None,
               inputs: Iterable[str] | None = None, restore_of: int | None = None, auto: bool = False) -> int:
        """Commit ``operation`` started at ``read_version``; returns the new version. ``read_version`` None: a
        blind write, checked against nothing published before the version it publishes on.

        ``removes``: paths, or a function of the metadata at commit time (e.g. "every live file").
        ``app``: with an already committed (app_id, batch_id) this is a no-op returning that version.
        ``buckets``: the buckets a maintenance job rewrote. ``inputs``: files that must still be live
        (clustering). ``auto``: automatic maintenance (skipped by data commits' conflict checks). ``schema``: the
        new schema, or a function of the metadata the attempt publishes on (None: unchanged)."""
        adds = list(adds)
        bucket_set = set(buckets) if buckets is not None else None
        inputs = list(inputs) if inputs is not None else None
        with self.lock:
            for _ in range(self.max_attempts):
                md = self.current.refresh()   # the optimistic check's one read of the log per attempt
                rv = md.version if read_version is None else read_version
                if rv > md.version:
                    raise VersionNotFound(f"read version {rv} is newer than the latest {md.version}")
                if app is not None:
                    done = _already_committed(md, app)
                    if done is not None:
                        return done
                try:
                    self._check_conflicts(md, operation, rv, bucket_set, inputs)
                except CommitConflict:
                    self.stats.commit_conflicts += 1
                    raise
                new_schema = schema(md) if callable(schema) else schema
                version = md.version + 1
                ts = max(int(self.clock()), md.timestamp(md.version) + 1)   # strictly increasing commit times
                rm = removes(md) if callable(removes) else list(removes or [])
                actions: list[Action] = [RemoveFile(p) for p in rm]
                stamped: list[DataFile] = []
                for f in adds:   # an L0 file gets its commit's version now that it is known
                    if f.kind == "delta" and f.level == 0 and f.min_version is None:
                        f = replace(f, min_version=version, max_version=version)
                    stamped.append(f)
                resolved = None
                if self.engine is not None and operation in DATA_OPERATIONS:
                    resolved = self.engine.resolve(md, stamped, operation,
                                                   new_schema if new_schema is not None else md.schema)
                    if resolved is not None:
                        stamped = resolved.adds
                changes_written = False
                vectors: list[SetDeletionVectors] = []
                try:
                    if self.change_files is not None and operation in DATA_OPERATIONS and self.change_files.wanted(md):
                        stamped = self.change_files.write(md, stamped)
                        changes_written = True
                    if self.vectors is not None and stamped and self.vectors.wanted(md):
                        after = md.apply(LogEntry(version=version, timestamp_ms=ts, operation=operation,
                                                  read_version=rv,
                                                  actions=tuple(actions) + tuple(AddFile(f) for f in stamped)))
                        vectors = self.vectors.write(md, after, stamped)
                except BaseException:
                    if changes_written:   # (nothing of this attempt is left behind)
                        self.change_files.discard(stamped)
                    if resolved is not None:
                        self.engine.discard(resolved)
                    raise
                actions.extend(AddFile(f) for f in stamped)
                actions.extend(vectors)
                if new_schema is not None:
                    actions.append(ChangeSchema(new_schema))
                if properties is not None:
                    actions.append(SetProperties(dict(properties)))
                if app is not None:
                    actions.append(app)
                entry = LogEntry(version=version, timestamp_ms=ts, operation=operation, read_version=rv,
                                 actions=tuple(actions), buckets=tuple(sorted(bucket_set)) if bucket_set is not None else None,
                                 restore_of=restore_of, auto=auto)
                if self.current.log.publish(entry):
                    if resolved is not None:
                        self.engine.published(resolved)
                    self._checkpoint_if_due(self.current.published(entry))
                    return version
                if self.change_files is not None:   # its images were of a state it no longer publishes on
                    self.change_files.discard(stamped)
                if vectors:   # so were its vectors
                    self.vectors.discard(vectors)
                if resolved is not None:   # its rows were folded onto a state it no longer publishes on
                    self.engine.discard(resolved)
                self.stats.commit_retries += 1  # another writer took this version: check again, retry
            raise TableError(f"{operation}: gave up after {self.max_attempts} commit attempts")

    def _checkpoint_if_due(self, md: TableMetadata) -> None:
        """Every checkpoint.interval versions, a checkpoint. It only speeds up loading, and the version is
        already published: a checkpoint that cannot be written (or an interval not understood) is logged,
        never reported as a failed commit."""
        try:
            if md.version % md.setting(CHECKPOINT_INTERVAL) == 0:
                self.current.log.write_checkpoint(md)
        except (TableError, OSError) as e:
            log.warning("%s: version %d committed, but its checkpoint was not written: %s",
                        self.current.log.storage.url, md.version, e)

    @staticmethod
    def _check_conflicts(md: TableMetadata, operation: str, read_version: int, buckets: set[int] | None,
                         inputs: list[str] | None) -> None:
        for ov in range(read_version + 1, md.version + 1):
            o = md.commits.get(ov)
            if o is None:
                raise VersionExpired(f"version {ov} expired while this {operation} was running")
            if o.auto and operation in DATA_OPERATIONS:
                continue
            rule = conflict_rule(operation, o.operation, buckets, set(o.buckets or []) or None)
            if rule:
                raise CommitConflict(operation, read_version, o.operation, ov, rule)
        if inputs is not None:   # clustering inputs must still be live
            gone = [p for p in inputs if p not in md.files or not md.files[p].live]
            if gone:
                culprit = max((md.files[p].removed_at for p in gone if p in md.files), default=md.version)
                raise CommitConflict(operation, read_version, md.commits[culprit].operation, culprit,
                                     f"{operation} inputs were replaced")


def _already_committed(md: TableMetadata, app: SetAppState) -> int | None:
    """The version that committed this (app_id, batch_id) already, if any (idempotent sinks)."""
    commits = md.apps.get(app.app_id) or ()
    if commits and app.batch_id <= commits[-1].batch_id:
        for c in reversed(commits):
            if c.batch_id == app.batch_id:
                return c.version
        return commits[-1].version
    return None
