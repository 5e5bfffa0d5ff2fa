"""Table maintenance: compaction (T6), clustering (T5), retention (T9), and when they run automatically.

- ``compact``: per bucket, base + deltas -> a new base (latest row per key, deletes dropped).
- ``cluster``: per bucket, small delta files -> one bigger delta, L0 -> L1 -> L2, every row kept (or, with
  clustering.keep.every.row=false, each key's newest row: Paimon's merge of sorted runs).
- ``expire`` / ``purge``: drop history older than the retention horizon (or all of it).

Automatic maintenance is decided from the table's state, never from "what the last commit did":
a bucket with clustering.l0.num L0 files, compaction.delta.num deltas, compaction.commit.num data
commits since the last compaction, retention.check.commit.num versions past the retention horizon.
So work a crash interrupted (between a data commit and its maintenance, or half-way through a
compaction whose output was never published) is simply found again after the next commit.

It runs off the writer's path: a data commit only ``trigger()``s the :class:`MaintenanceWorker`, a
daemon thread that runs the due work and exits when there is none. ``maintenance.mode=inline`` (or
``Table.open(..., maintenance="inline")``) runs it inside the commit call instead, for determinism.
"""
from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
import weakref
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.storage import Storage

from .commit import DATA_OPERATIONS, Committer
from .errors import CommitConflict, TableError
from .files import COMMIT_VERSION, DataFile, parallel_map, remove_files, write_parquet
from .key_order import sort_indices_by_key
from .log import CurrentMetadata
from .metadata import FileEntry, TableMetadata
from .properties import (CLUSTERING_AUTO, CLUSTERING_KEEP_EVERY_ROW, CLUSTERING_L0_NUM, CLUSTERING_L1_NUM,
                         CLUSTERING_MAX_FILE_BYTES, CLUSTERING_MAX_TIME_SPAN_HOURS, COMPACTION_COMMIT_NUM,
                         COMPACTION_DELTA_NUM, COMPACTION_PARALLELISM, MAINTENANCE_MODE, RETAIN_HOURS, RETENTION_AUTO,
                         RETENTION_CHECK_COMMIT_NUM, VIEW_FORMATS)
from .reader import MergeOnReadReader
from .scan import ScanPlanner
from .versions import HOUR_MS, VersionResolver

log = logging.getLogger(__name__)

EXIT_GRACE_SECONDS = 30.0    # how long interpreter exit waits for a maintenance run in progress
BACKGROUND_NICENESS = 19     # the worker thread's CPU niceness (0 normal .. 19 lowest: it uses the CPU writers leave)

_workers: "weakref.WeakSet[MaintenanceWorker]" = weakref.WeakSet()

#: publishes a table's read-optimized view after a compaction (table property view.formats)
ViewPublisher = Callable[[Storage, TableMetadata, int], object]
_view_publisher: list[ViewPublisher] = []


def install_view_publisher(publisher: ViewPublisher) -> None:
    """What a compaction of a table with view.formats set calls once committed. ``tidelake.lakeview``
    installs its publisher when imported: it sits above the table, which never imports it."""
    _view_publisher[:] = [publisher]


@atexit.register
def _finish_at_exit() -> None:
    """At exit, let triggered maintenance finish (bounded), then start nothing new: a daemon thread
    cut off inside pyarrow while the interpreter tears down could crash the exit. Whatever is cut
    short is found again after a later commit."""
    for worker in list(_workers):
        worker.wait(EXIT_GRACE_SECONDS)
        worker.close(0)


def _lower_priority() -> None:
    """Run this thread (and the threads it starts, which inherit it) at the lowest CPU priority, so
    a compaction running next to a writer takes the CPU the writer leaves (Linux: niceness is per
    thread)."""
    if sys.platform == "linux":
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICENESS)
        except OSError:   # not permitted in this sandbox/container: run at normal priority
            pass


class MaintenanceWorker:
    """Runs ``job`` off the caller's thread whenever triggered: one daemon thread at a time, started
    on demand and gone when nothing is pending (so an idle table holds no thread, and a process
    never waits for it at exit; work cut short by an exit is found again later)."""

    def __init__(self, job: Callable[[], None], name: str):
        self._job = job
        self._name = name
        self._cond = threading.Condition()
        self._pending = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def trigger(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
                _workers.add(self)

    def _loop(self) -> None:
        _lower_priority()
        while True:
            with self._cond:
                if not self._pending or self._closed:
                    self._thread = None
                    self._cond.notify_all()
                    return
                self._pending = False
            try:
                self._job()
            except Exception:   # noqa: BLE001 - a failed maintenance run must not kill later ones
                log.exception("%s: automatic maintenance failed (it is retried after the next commit)", self._name)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no maintenance is pending or running; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._thread is None, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Start nothing new; wait for the run in progress (if any) to finish."""
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: self._thread is None, timeout)


class Maintenance:
    """Compaction, clustering and retention of one table, manual and automatic."""

    def __init__(self, storage: Storage, current: CurrentMetadata, committer: Committer, reader: MergeOnReadReader,
                 clock: Callable[[], int], mode: str | None = None):
        if mode is not None and mode not in MAINTENANCE_MODE.choices:
            raise ValueError(f"maintenance must be one of {MAINTENANCE_MODE.choices}, not {mode!r}")
        self.storage = storage
        self.path = storage.url
        self.current = current
        self.committer = committer
        self.reader = reader
        self.clock = clock
        self._mode = mode
        self.worker = MaintenanceWorker(self.run_automatic, f"tidelake-maintenance:{self.path}")

    @property
    def mode(self) -> str:
        """'background' or 'inline': the open() option, else the table property maintenance.mode."""
        return self._mode or self.current.get().setting(MAINTENANCE_MODE)

    # ------------------------------------------------------------ after a data commit
    def after_commit(self) -> None:
        """Called by every data commit once it is published: run what became due, in the background or right
        here. The commit stands whatever happens here, so a failure is logged (one line), never raised to the
        writer: it would report a committed write as failed."""
        try:
            if self.mode == "inline":
                self.run_automatic()
            else:
                self.worker.trigger()
        except Exception as e:   # noqa: BLE001 - see above; the next commit tries again
            log.warning("%s: the commit stands, but automatic maintenance after it failed: %s", self.path, e)
            log.debug("automatic maintenance failure", exc_info=True)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until triggered background maintenance has finished (False on timeout)."""
        return self.worker.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Stop background maintenance: the run in progress finishes, nothing new starts."""
        self.worker.close(timeout)

    def run_automatic(self) -> None:
        """Every automatic job that is due. A job losing a conflict is logged and left for later."""
        for job in self._due_jobs(self.current.refresh()):
            try:
                job()
            except CommitConflict as e:
                log.info("automatic maintenance of %s skipped: %s", self.path, e)

    def _due_jobs(self, md: TableMetadata) -> list[Callable[[], object]]:
        jobs: list[Callable[[], object]] = []
        if md.setting(CLUSTERING_AUTO):
            jobs.append(lambda: self.cluster(force=False, auto=True))
        delta_num = md.setting(COMPACTION_DELTA_NUM)
        commit_num = md.setting(COMPACTION_COMMIT_NUM)
        if delta_num > 0:
            def by_deltas():   # counted after clustering ran, on the files it left
                cur = self.current.get()
                busy = [b for b, p in ScanPlanner(cur).buckets(cur.version).items() if len(p.deltas) >= delta_num]
                return self.compact(busy, auto=True) if busy else None
            jobs.append(by_deltas)
        if commit_num > 0:
            last = max((v for v, c in md.commits.items() if c.operation == "compact"), default=0)
            if sum(1 for v, c in md.commits.items() if v > last and c.operation in DATA_OPERATIONS) >= commit_num:
                jobs.append(lambda: self.compact(auto=True))
        every = md.setting(RETENTION_CHECK_COMMIT_NUM)
        if (md.setting(RETENTION_AUTO)
                and VersionResolver(md, self.clock()).horizon() - md.horizon >= every):
            jobs.append(self.expire)
        return jobs

    # ------------------------------------------------------------ compaction (T6)
    def _timed(self, operation: str, job: Callable[[], int | None]) -> int | None:
        """Run a compaction or clustering; one that committed counts in the table's metrics with its time."""
        began = time.monotonic()
        version = job()
        if version is not None:
            self.committer.stats.maintenance_run(operation, time.monotonic() - began)
        return version

    def compact(self, buckets: Iterable[int] | None = None, *, auto: bool = False,
                progress: Callable[[int, int], None] | None = None) -> int | None:
        """Merge each bucket's base + deltas into a new base (latest state per key, deletes dropped),
        buckets in parallel. Returns the new version, or None if nothing needed compaction.
        ``progress(done, total)``: called as buckets finish (from the worker threads)."""
        return self._timed("compact", lambda: self._compact(buckets, auto, progress))

    def _compact(self, buckets: Iterable[int] | None, auto: bool,
                 progress: Callable[[int, int], None] | None = None) -> int | None:
        md = self.current.refresh()
        rv = md.version
        schema = md.schema_at(rv)
        only = set(buckets) if buckets is not None else None
        plans = [p for b, p in sorted(ScanPlanner(md).buckets(rv).items()) if p.deltas and (only is None or b in only)]
        if not plans:
            return None

        finished = [0]
        lock = threading.Lock()

        def one(plan) -> DataFile:
            merged = self.reader.merge_bucket(plan, schema.names, schema)
            merged = merged.take(sort_indices_by_key(merged, md.primary_key))
            written = write_parquet(self.storage, merged, kind="base", bucket=plan.bucket, level=0,
                                    primary_key=md.primary_key, min_version=rv, max_version=rv)
            if progress is not None:
                with lock:
                    finished[0] += 1
                    progress(finished[0], len(plans))
            return written
        new_bases = parallel_map(one, plans, md.setting(COMPACTION_PARALLELISM))
        done = {p.bucket for p in plans}

        def removes(at_commit: TableMetadata) -> list[str]:
            # every live file of these buckets fully covered by the new base
            return [fe.file.path for fe in at_commit.files.values()
                    if fe.live and fe.file.bucket in done and fe.file.max_version is not None
                    and fe.file.max_version <= rv]
        version = self._publish("compact", new_bases, read_version=rv, removes=removes, buckets=done, auto=auto)
        self._publish_views(version)
        return version

    def _publish_views(self, version: int) -> None:
        """Table property view.formats: publish the read-optimized view of what this compaction
        committed, through the installed publisher. A failed publish never fails the compaction;
        ``tidelake table publish`` redoes it."""
        md = self.current.get()
        if not md.setting(VIEW_FORMATS):
            return
        if not _view_publisher:
            log.warning("%s: view.formats is set but this process has no view publisher (import tidelake.lakeview);"
                        " version %d's view is not published", self.path, version)
            return
        try:
            _view_publisher[0](self.storage, md, version)
        except Exception:   # noqa: BLE001 - the compaction is committed whatever the view does
            log.exception("%s: publishing the view of version %d failed", self.path, version)

    # ------------------------------------------------------------ clustering (T5)
    def cluster(self, *, force: bool = True, auto: bool = False) -> int | None:
        """Merge small delta files per bucket, L0 -> L1 -> L2, keeping every row (every intermediate
        state), or with clustering.keep.every.row=false each key's newest row (a delete included: it still
        hides older files' rows; no snapshot reads a clustered file at a version before it was written, and
        incremental reads go by the L0 files). ``force``: merge any 2+ eligible files (manual); otherwise only
        when a level reaches clustering.l0.num / clustering.l1.num files (automatic). Files of at least
        clustering.max.file.bytes, or spanning more than clustering.max.time.span.hours, are left
        alone. Retried at the metadata level when other commits intervene; returns the new version
        or None if there was nothing to do."""
        return self._timed("cluster", lambda: self._cluster(force, auto))

    def _cluster(self, force: bool, auto: bool) -> int | None:
        md = self.current.refresh()
        rv = md.version
        schema = md.schema_at(rv)
        max_bytes = md.setting(CLUSTERING_MAX_FILE_BYTES)
        max_span = int(md.setting(CLUSTERING_MAX_TIME_SPAN_HOURS) * HOUR_MS)
        thresholds = {0: md.setting(CLUSTERING_L0_NUM), 1: md.setting(CLUSTERING_L1_NUM)}
        every_row = md.setting(CLUSTERING_KEEP_EVERY_ROW)

        def span(first: FileEntry, last: FileEntry) -> int:
            return md.timestamp(last.file.max_version) - md.timestamp(first.file.min_version)
        groups: list[tuple[int, int, list[FileEntry]]] = []
        for b, plan in sorted(ScanPlanner(md).buckets(rv).items()):
            for level in (0, 1):
                cands = [fe for fe in plan.deltas if fe.file.level == level and fe.file.bytes < max_bytes
                         and span(fe, fe) <= max_span]
                if len(cands) < (2 if force else max(2, thresholds[level])):
                    continue
                group: list[FileEntry] = []
                for fe in cands:   # consecutive files, bounded in bytes and time span
                    if group and (sum(g.file.bytes for g in group) + fe.file.bytes > max_bytes or
                                  span(group[0], fe) > max_span):
                        if len(group) > 1:
                            groups.append((b, level + 1, group))
                        group = []
                    group.append(fe)
                if len(group) > 1:
                    groups.append((b, level + 1, group))
        if not groups:
            return None

        def one(g) -> DataFile:
            b, level, fes = g
            t = pa.concat_tables([self.reader.read_file(fe.file, schema.names, schema, timestamps=md.timestamps)
                                  for fe in fes])
            seq = "__seq"
            t = t.append_column(seq, pa.array(np.arange(t.num_rows, dtype=np.int64)))
            order = [(k, "ascending") for k in md.primary_key] + [(COMMIT_VERSION, "ascending"), (seq, "ascending")]
            t = t.take(pc.sort_indices(t, sort_keys=order)).drop_columns([seq])
            if not every_row:
                t = _newest_of_each_key(t, md.primary_key)
            return write_parquet(self.storage, t, kind="delta", bucket=b, level=level, primary_key=md.primary_key,
                                 min_version=min(fe.file.min_version for fe in fes),
                                 max_version=max(fe.file.max_version for fe in fes))
        adds = parallel_map(one, groups)
        inputs = [fe.file.path for g in groups for fe in g[2]]
        return self._publish("cluster", adds, read_version=rv, removes=inputs, inputs=inputs,
                             buckets={g[0] for g in groups}, auto=auto)

    def _publish(self, operation: str, adds: list[DataFile], **kw) -> int:
        try:
            return self.committer.commit(operation, adds=adds, **kw)
        except TableError:
            remove_files(self.storage, [f.path for f in adds])   # never published: not needed by anyone
            raise

    # ------------------------------------------------------------ retention (T9)
    def expire(self) -> dict[str, int]:
        """Delete history older than acid.data.retain.hours: data files not live at any retained
        version, log entries before the horizon, orphan files of failed writers older than the
        retention. Returns counts."""
        md = self.current.refresh()
        return self._clean(VersionResolver(md, self.clock()).horizon())

    def purge(self) -> dict[str, int]:
        """PURGE: drop all history; only the latest version stays readable."""
        return self._clean(self.current.refresh().version)

    def _clean(self, horizon: int) -> dict[str, int]:
        with self.committer.lock:   # between two of this process's commits
            md, dead = self.current.refresh().expire(horizon)
            self.current.log.write_checkpoint(md)   # the state the table is opened from from now on
            self.current.replace(md)
        removed_files = remove_files(self.storage, dead)
        mlog = self.current.log
        removed_logs = remove_files(self.storage, [mlog.entry_key(v) for v in mlog.entry_versions() if v < md.horizon])
        remove_files(self.storage, [mlog.checkpoint_key(v) for v in mlog.checkpoint_versions() if v < md.version])
        # files no commit references (failed / abandoned writers), once older than the retention
        grace_ms = md.setting(RETAIN_HOURS) * HOUR_MS
        now_ms = self.clock()
        keep = set(md.files) | {fe.file.changes for fe in md.files.values() if fe.file.changes} | md.vector_paths()
        orphans = [f.path for f in self.storage.list_info("data")
                   if f.path not in keep and now_ms - f.modified_ms > grace_ms]
        return {"horizon": md.horizon, "files_removed": removed_files, "log_entries_removed": removed_logs,
                "orphans_removed": remove_files(self.storage, orphans)}


def _newest_of_each_key(t: pa.Table, primary_key: Iterable[str]) -> pa.Table:
    """The last row of each key of ``t``, sorted by key and then commit order: the key's newest."""
    if t.num_rows < 2:
        return t
    same_as_next = None
    for k in primary_key:
        column = t.column(k)
        eq = pc.equal(column.slice(0, t.num_rows - 1), column.slice(1))
        same_as_next = eq if same_as_next is None else pc.and_(same_as_next, eq)
    last = np.ones(t.num_rows, dtype=bool)
    last[:-1] = ~same_as_next.to_numpy(zero_copy_only=False)
    return t if last.all() else t.filter(pa.array(last))
