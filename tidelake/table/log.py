"""The versioned metadata log of a table: ``_tidelake_log/<20-digit version>.json``, on the table's storage.

One JSON file per version, published with put-if-absent (``Storage.create``): on a local disk a
temporary file, fsynced, hard-linked to its final name (``link`` fails if the name exists); on S3 a PUT
with ``If-None-Match: *``, which the server refuses if the key exists. Either way, of writers racing
for a version exactly one wins, with no lock service and no catalog, and a reader never sees a partial
entry (a process killed before the link or the PUT leaves nothing visible; after it, the whole entry).

Every ``checkpoint.interval`` versions (and on expire) the whole replayed state is written as
``<version>.checkpoint.json`` and ``_last_checkpoint`` points at it, so opening a table reads one
checkpoint plus the entries after it. A checkpoint is only an accelerator: the entries are the truth
until expire deletes those older than the retention horizon. Both are whole-file writes (atomic on
every store: a rename locally, a single PUT on S3).

The log is verified as it is read: a version missing between published ones, or an entry or
checkpoint that is not valid JSON of the expected shape, raises ``CorruptLog`` naming the file. A
reader never stops early at a gap (that would show an older table), and no commit is published on
top of a gap (that would fork the history).
"""
from __future__ import annotations

import json
import threading
from typing import Any

from tidelake.storage import Storage

from .errors import CorruptLog
from .metadata import LogEntry, TableMetadata

LOG_DIR = "_tidelake_log"
LAST_CHECKPOINT = "_last_checkpoint"
_CHECKPOINT_SUFFIX = ".checkpoint.json"


def entry_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}{_CHECKPOINT_SUFFIX}"


def _encoded(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def _decoded(path: str, raw: bytes, from_json, what: str, version: int):
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
    """Reads and publishes log entries and checkpoints of one table's storage."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self.dir = storage.location(LOG_DIR)

    # ------------------------------------------------------------ names
    @staticmethod
    def entry_key(v: int) -> str:
        """The entry's path in the table's storage."""
        return f"{LOG_DIR}/{entry_name(v)}"

    @staticmethod
    def checkpoint_key(v: int) -> str:
        return f"{LOG_DIR}/{checkpoint_name(v)}"

    pointer_key = f"{LOG_DIR}/{LAST_CHECKPOINT}"

    def entry_path(self, v: int) -> str:
        """The entry's full name (for messages)."""
        return self.storage.location(self.entry_key(v))

    def _names(self) -> list[str]:
        return [p[len(LOG_DIR) + 1:] for p in self.storage.list(LOG_DIR)]

    def exists(self) -> bool:
        return any(n.endswith(".json") for n in self._names())

    # ------------------------------------------------------------ entries
    def publish(self, entry: LogEntry) -> bool:
        """Publish ``entry`` as its version; False if another writer took that version first.
        Raises CorruptLog instead of filling a gap (a later version published, this one missing)."""
        v = entry.version
        # one listing from v on: v itself listed means taken (the caller's conflict handling applies),
        # a later version without v is a gap
        published = self.entry_versions(after=v - 1 if v > 0 else None)
        if v in published:
            return False
        if any(p > v for p in published):
            self._check_no_gap_at(v)
        return self.storage.create(self.entry_key(v), _encoded(entry.to_json()))

    def read_entry(self, v: int) -> LogEntry | None:
        try:
            raw = self.storage.read(self.entry_key(v))
        except FileNotFoundError:
            return None
        return _decoded(self.entry_path(v), raw, LogEntry.from_json, "log entry", v)

    def entries_after(self, version: int, *, list_for_gaps: bool = False) -> list[LogEntry]:
        """Every published entry after ``version``, in order. CorruptLog at a gap: the entry after
        the last one is always checked for (one lookup); ``list_for_gaps`` lists the log to find
        a gap of any width (on open, and before every publish)."""
        out = []
        while True:
            v = version + len(out) + 1
            e = self.read_entry(v)
            if e is None:
                if list_for_gaps:
                    self._check_no_gap_at(v)
                elif self.storage.exists(self.entry_key(v + 1)):
                    # v may have been published between the read and the lookup (concurrent writers publish
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
        # one listing of the names after v's (S3: StartAfter, however long the log is)
        later = self.entry_versions(after=v)
        if later and not self.storage.exists(self.entry_key(v)):   # v published meanwhile: no gap
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

    # ------------------------------------------------------------ checkpoints
    def read_checkpoint(self, version: int) -> TableMetadata:
        key = self.checkpoint_key(version)
        try:
            raw = self.storage.read(key)
        except FileNotFoundError as e:
            raise CorruptLog(self.storage.location(key), "missing (named by _last_checkpoint)") from e
        return _decoded(self.storage.location(key), raw, TableMetadata.from_json, "checkpoint", version)

    def read_pointer(self) -> int | None:
        """The version ``_last_checkpoint`` names; None if there is no pointer. CorruptLog if unreadable."""
        try:
            raw = self.storage.read(self.pointer_key)
        except FileNotFoundError:
            return None
        try:
            return int(json.loads(raw)["version"])
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptLog(self.storage.location(self.pointer_key),
                             f"not a valid checkpoint pointer ({type(e).__name__}: {e})") from e

    def latest_checkpoint(self) -> TableMetadata | None:
        """The newest checkpoint: the one ``_last_checkpoint`` names, else the newest by listing.
        A damaged one is an error, not skipped: entries older than it may have been expired, so an
        older checkpoint could show an older table."""
        named = self.read_pointer()
        listed = self.checkpoint_versions()
        newest = max([v for v in (named,) if v is not None] + listed, default=None)
        return None if newest is None else self.read_checkpoint(newest)

    def write_checkpoint(self, state: TableMetadata, *, update_pointer: bool = True) -> None:
        # replaced, not created exclusively: expire/purge rewrite the same version's checkpoint with
        # a later horizon. Readers see the old or the new file whole.
        self.storage.write(self.checkpoint_key(state.version), _encoded(state.to_json()))
        if update_pointer:
            self.write_pointer(state.version)

    def write_pointer(self, version: int) -> None:
        """Point ``_last_checkpoint`` at the checkpoint of ``version``."""
        self.storage.write(self.pointer_key, json.dumps({"version": version}).encode())

    def checkpoint_versions(self) -> list[int]:
        return sorted(int(n.split(".")[0]) for n in self._names() if n.endswith(_CHECKPOINT_SUFFIX))

    def entry_versions(self, *, after: int | None = None) -> list[int]:
        """Versions of the published entries (``after``: only later ones)."""
        names = (self._names() if after is None else
                 [p[len(LOG_DIR) + 1:] for p in self.storage.list(LOG_DIR, after=self.entry_key(after))])
        return sorted(int(n[:-5]) for n in names
                      if n.endswith(".json") and not n.endswith(_CHECKPOINT_SUFFIX) and n[0].isdigit())


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
