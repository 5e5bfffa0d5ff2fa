"""The versioned metadata log of a table: ``_tidelake_log/<20-digit version>.json``.

One JSON file per version, published with create-exclusive semantics: the entry is written to a
temporary file, fsynced, then ``os.link``-ed to its final name. ``link`` fails if the name exists, so
of two writers racing for a version exactly one wins, and a reader never sees a partial entry
(a process killed before the link leaves only a temporary file; after it, the whole entry).

Every ``checkpoint.interval`` versions (and on expire) the whole replayed state is written as
``<version>.checkpoint.json`` and ``_last_checkpoint`` points at it, so opening a table reads one
checkpoint plus the entries after it. A checkpoint is only an accelerator: the entries are the truth
until expire deletes those older than the retention horizon.
"""
from __future__ import annotations

import json
import os
import threading
import uuid
from typing import Any

from tidelake.fsutil import fsync_dir

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
        """Publish ``entry`` as its version; False if another writer took that version first."""
        return write_exclusive(self.entry_path(entry.version), entry.to_json())

    def read_entry(self, v: int) -> LogEntry | None:
        try:
            with open(self.entry_path(v)) as fh:
                return LogEntry.from_json(json.load(fh))
        except FileNotFoundError:
            return None

    def entries_after(self, version: int) -> list[LogEntry]:
        """Every published entry after ``version``, in order."""
        out = []
        while True:
            e = self.read_entry(version + len(out) + 1)
            if e is None:
                return out
            out.append(e)

    def catch_up(self, metadata: TableMetadata) -> TableMetadata:
        """``metadata`` with every entry published after it applied (a new object)."""
        return metadata.apply(*self.entries_after(metadata.version))

    def load(self) -> TableMetadata:
        """The latest metadata: the newest checkpoint plus the entries after it (without a
        checkpoint the log starts at version 0; expire always writes a checkpoint first)."""
        cp = self._latest_checkpoint()
        return self.catch_up(TableMetadata.from_json(cp) if cp is not None else TableMetadata())

    def _latest_checkpoint(self) -> dict[str, Any] | None:
        candidates: list[str] = []
        try:
            with open(os.path.join(self.dir, LAST_CHECKPOINT)) as fh:
                candidates.append(checkpoint_name(json.load(fh)["version"]))
        except (FileNotFoundError, ValueError, KeyError):
            pass
        if os.path.isdir(self.dir):  # the pointer is a hint; fall back to listing
            candidates += sorted((n for n in os.listdir(self.dir) if n.endswith(".checkpoint.json")), reverse=True)
        for name in candidates:
            try:
                with open(os.path.join(self.dir, name)) as fh:
                    return json.load(fh)
            except (FileNotFoundError, ValueError):
                continue
        return None

    def write_checkpoint(self, state: TableMetadata) -> None:
        # replaced, not created exclusively: expire/purge rewrite the same version's checkpoint with
        # a later horizon. Readers see the old or the new file whole (rename is atomic).
        path = os.path.join(self.dir, checkpoint_name(state.version))
        tmp = os.path.join(self.dir, f".tmp-{uuid.uuid4().hex}")
        with open(tmp, "w") as fh:
            json.dump(state.to_json(), fh, separators=(",", ":"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = os.path.join(self.dir, f".tmp-{uuid.uuid4().hex}")
        with open(tmp, "w") as fh:
            json.dump({"version": state.version}, fh)
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
