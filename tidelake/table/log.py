"""The versioned metadata log of a table: ``_tidelake_log/<20-digit version>.json``.

One JSON file per version, published with create-exclusive semantics: the entry is written to a
temporary file, fsynced, then ``os.link``-ed to its final name. ``link`` fails if the name exists, so
of two writers racing for a version exactly one wins, and a reader never sees a partial entry
(a process killed before the link leaves only a temporary file; after it, the whole entry).

Every ``checkpoint.interval`` versions (and on expire) the whole replayed state is written as
``<version>.checkpoint.json`` and ``_last_checkpoint`` points at it, so opening a table reads one
checkpoint plus the entries after it. A checkpoint is only an accelerator: the entries are the truth
until expire deletes those older than the retention horizon.

The log is verified as it is read: a version missing between published ones, or an entry or
checkpoint that is not valid JSON of the expected shape, raises ``CorruptLog`` naming the file. A
reader never stops early at a gap (that would show an older table), and no commit is published on
top of a gap (that would fork the history).
"""
from __future__ import annotations

import json
import os
import threading
import uuid
from typing import Any

from tidelake.fsutil import fsync_dir

from .errors import CorruptLog
from .metadata import LogEntry, TableMetadata

LOG_DIR = "_tidelake_log"
LAST_CHECKPOINT = "_last_checkpoint"


def entry_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.json"


def write_exclusive(path: str, payload: dict[str, Any]) -> bool:
    """Publish ``payload`` at ``path`` iff nothing is there yet. True if this call won."""
    d = os.path.dirname(path)
    tmp = os.path.join(d, f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "w") as fh:
        json.dump(payload, fh, separators=(",", ":"))
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, path)
        won = True
    except FileExistsError:
        won = False
    finally:
        os.unlink(tmp)
    if won:
        try:  # make the new directory entry durable
            fsync_dir(d)
        except OSError:
            pass
    return won


def _decoded(path: str, raw: str, from_json, what: str, version: int):
    """``from_json`` of the file's JSON, which must hold ``version``; CorruptLog naming ``path`` if not."""
    try:
        decoded = from_json(json.loads(raw))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        reason = "empty file" if not raw.strip() else f"not a valid {what} ({type(e).__name__}: {e})"
        raise CorruptLog(path, reason) from e
    if decoded.version != version:
        raise CorruptLog(path, f"holds version {decoded.version}, not {version}")
    return decoded


class MetadataLog:
    """Reads and publishes log entries and checkpoints of one table directory."""

    def __init__(self, root: str):
        self.root = root
        self.dir = os.path.join(root, LOG_DIR)

    def exists(self) -> bool:
        return os.path.isdir(self.dir) and any(n.endswith(".json") for n in os.listdir(self.dir))

    def entry_path(self, v: int) -> str:
        return os.path.join(self.dir, entry_name(v))

    def publish(self, entry: LogEntry) -> bool:
        """Publish ``entry`` as its version; False if another writer took that version first.
        Raises CorruptLog instead of filling a gap (a later version published, this one missing)."""
        if os.path.exists(self.entry_path(entry.version)):
            return False   # taken: the caller's conflict handling applies, not a gap
        self._check_no_gap_at(entry.version)
        return write_exclusive(self.entry_path(entry.version), entry.to_json())

    def read_entry(self, v: int) -> LogEntry | None:
        path = self.entry_path(v)
        try:
            with open(path) as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        return _decoded(path, raw, LogEntry.from_json, "log entry", v)

    def entries_after(self, version: int, *, list_for_gaps: bool = False) -> list[LogEntry]:
        """Every published entry after ``version``, in order. CorruptLog at a gap: the entry after
        the last one is always checked for (one stat); ``list_for_gaps`` lists the directory to find
        a gap of any width (on open, and before every publish)."""
        out = []
        while True:
            v = version + len(out) + 1
            e = self.read_entry(v)
            if e is None:
                if list_for_gaps:
                    self._check_no_gap_at(v)
                elif os.path.exists(self.entry_path(v + 1)):
                    # v may have been published between the read and the stat (concurrent writers publish
                    # v before v + 1): only a v still missing is a gap
                    e = self.read_entry(v)
                    if e is None:
                        raise CorruptLog(self.entry_path(v), f"missing, but version {v + 1} exists (the log "
                                                             "has a gap)")
                    out.append(e)
                    continue
                return out
            out.append(e)

    def _check_no_gap_at(self, v: int) -> None:
        """``v`` is not published: raise CorruptLog if a later version is (a deleted or lost entry)."""
        later = [n for n in self.entry_versions() if n > v] if os.path.isdir(self.dir) else []
        if later and not os.path.exists(self.entry_path(v)):   # v published meanwhile: no gap
            raise CorruptLog(self.entry_path(v), f"missing, but version {later[0]} exists "
                                                 f"(the log has a gap: {len(later)} later entr"
                                                 f"{'y' if len(later) == 1 else 'ies'} past it)")

    def catch_up(self, metadata: TableMetadata) -> TableMetadata:
        """``metadata`` with every entry published after it applied (a new object)."""
        return metadata.apply(*self.entries_after(metadata.version))

    def load(self) -> TableMetadata:
        """The latest metadata: the newest checkpoint plus the entries after it (without a
        checkpoint the log starts at version 0; expire always writes a checkpoint first)."""
        cp = self.latest_checkpoint()
        start = cp if cp is not None else TableMetadata()
        return start.apply(*self.entries_after(start.version, list_for_gaps=True))

    def read_checkpoint(self, version: int) -> TableMetadata:
        path = os.path.join(self.dir, checkpoint_name(version))
        try:
            with open(path) as fh:
                raw = fh.read()
        except FileNotFoundError as e:
            raise CorruptLog(path, "missing (named by _last_checkpoint)") from e
        return _decoded(path, raw, TableMetadata.from_json, "checkpoint", version)

    def latest_checkpoint(self) -> TableMetadata | None:
        """The newest checkpoint: the one ``_last_checkpoint`` names, else the newest by listing.
        A damaged one is an error, not skipped: entries older than it may have been expired, so an
        older checkpoint could show an older table."""
        pointer = os.path.join(self.dir, LAST_CHECKPOINT)
        named: int | None = None
        try:
            with open(pointer) as fh:
                raw = fh.read()
        except FileNotFoundError:
            raw = None
        if raw is not None:
            try:
                named = int(json.loads(raw)["version"])
            except (ValueError, KeyError, TypeError) as e:
                raise CorruptLog(pointer, f"not a valid checkpoint pointer ({type(e).__name__}: {e})") from e
        listed = self.checkpoint_versions() if os.path.isdir(self.dir) else []
        newest = max([v for v in (named,) if v is not None] + listed, default=None)
        return None if newest is None else self.read_checkpoint(newest)

    def write_checkpoint(self, state: TableMetadata, *, update_pointer: bool = True) -> None:
        # replaced, not created exclusively: expire/purge rewrite the same version's checkpoint with
        # a later horizon. Readers see the old or the new file whole (rename is atomic).
        path = os.path.join(self.dir, checkpoint_name(state.version))
        tmp = os.path.join(self.dir, f".tmp-{uuid.uuid4().hex}")
        with open(tmp, "w") as fh:
            json.dump(state.to_json(), fh, separators=(",", ":"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        if update_pointer:
            self.write_pointer(state.version)

    def write_pointer(self, version: int) -> None:
        """Point ``_last_checkpoint`` at the checkpoint of ``version``."""
        tmp = os.path.join(self.dir, f".tmp-{uuid.uuid4().hex}")
        with open(tmp, "w") as fh:
            json.dump({"version": version}, fh)
        os.replace(tmp, os.path.join(self.dir, LAST_CHECKPOINT))

    def checkpoint_versions(self) -> list[int]:
        return sorted(int(n.split(".")[0]) for n in os.listdir(self.dir) if n.endswith(".checkpoint.json"))

    def entry_versions(self) -> list[int]:
        return sorted(int(n[:-5]) for n in os.listdir(self.dir)
                      if n.endswith(".json") and not n.endswith(".checkpoint.json") and n[0].isdigit())


class CurrentMetadata:
    """The newest metadata of one table known to this process. Thread-safe; the metadata object is
    replaced, never changed, so ``get()`` hands out a consistent snapshot without a lock."""

    def __init__(self, log: MetadataLog, metadata: TableMetadata):
        self.log = log
        self._metadata = metadata
        self._lock = threading.Lock()

    def get(self) -> TableMetadata:
        """The metadata as last refreshed (no I/O)."""
        return self._metadata

    def refresh(self) -> TableMetadata:
        """Catch up with the log: entries published since (by any process) are applied."""
        with self._lock:
            self._metadata = self.log.catch_up(self._metadata)
            return self._metadata

    def published(self, entry: LogEntry) -> TableMetadata:
        """Record an entry this process just published (a concurrent ``refresh`` may have read it
        from the log already, or read up to just before it)."""
        with self._lock:
            if self._metadata.version == entry.version - 1:
                self._metadata = self._metadata.apply(entry)
            elif self._metadata.version < entry.version:
                self._metadata = self.log.catch_up(self._metadata)
            return self._metadata

    def replace(self, metadata: TableMetadata) -> None:
        """Adopt metadata derived from the current one (retention: the same version, less history)."""
        with self._lock:
            self._metadata = metadata
