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

import base64
import json
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tidelake.fsutil import fsync_dir

from .files import DataFile

LOG_DIR = "_tidelake_log"
LAST_CHECKPOINT = "_last_checkpoint"


def entry_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.json"


def schema_to_json(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_json(s: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(s)))


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


@dataclass
class FileEntry:
    """A data file and the version intervals [added, removed) during which it is live."""
    file: DataFile
    intervals: list[list[int | None]] = field(default_factory=list)
    commit_seq: int = 0   # position in the add list of the commit that first published it

    def live_at(self, v: int) -> bool:
        return any(a <= v and (r is None or v < r) for a, r in self.intervals)

    def live_since(self, v: int) -> bool:
        """Live at some version >= v."""
        return any(r is None or r > v for _, r in self.intervals)

    @property
    def live(self) -> bool:
        return bool(self.intervals) and self.intervals[-1][1] is None


class TableState:
    """Everything the log says, replayed: versions, files with their live intervals, schemas,
    properties, application (exactly-once) states."""

    def __init__(self) -> None:
        self.version = -1
        self.horizon = 0                       # versions below were expired (their files may be gone)
        self.primary_key: list[str] = []
        self.versions: dict[int, dict[str, Any]] = {}   # version -> entry without add/remove lists
        # commit time of every version still referenced (outlives ``versions`` entries that expire
        # while a restored or clustered file still holds rows of that version)
        self.timestamps: dict[int, int] = {}
        self.files: dict[str, FileEntry] = {}
        self.schemas: list[tuple[int, pa.Schema]] = []
        self.properties: list[tuple[int, dict[str, str]]] = []
        self.apps: dict[str, list[list[Any]]] = {}       # app_id -> [[batch_id, version, extra], ...]

    # ------------------------------------------------------------ replay
    def apply(self, e: dict[str, Any]) -> None:
        v = e["version"]
        assert v == self.version + 1, f"log gap: have {self.version}, got {v}"
        for path in e.get("remove", []):
            fe = self.files.get(path)
            if fe is not None and fe.live:
                fe.intervals[-1][1] = v
        for i, d in enumerate(e.get("add", [])):
            fe = self.files.get(d["path"])
            if fe is None:
                self.files[d["path"]] = FileEntry(DataFile.from_dict(d), [[v, None]], i)
            elif not fe.live:
                fe.intervals.append([v, None])
        if "primary_key" in e:
            self.primary_key = list(e["primary_key"])
        if "schema" in e:
            self.schemas.append((v, schema_from_json(e["schema"])))
        if "properties" in e:
            self.properties.append((v, dict(e["properties"])))
        app = e.get("app")
        if app:
            self.apps.setdefault(app["app_id"], []).append([app["batch_id"], v, app.get("extra")])
        self.versions[v] = {k: e[k] for k in e if k not in ("add", "remove", "schema")}
        self.versions[v]["added"] = len(e.get("add", []))
        self.versions[v]["removed"] = len(e.get("remove", []))
        self.timestamps[v] = e["timestamp_ms"]
        self.version = v

    # ------------------------------------------------------------ queries
    def timestamp(self, v: int) -> int:
        return self.timestamps[v]

    def live_files(self, v: int) -> list[FileEntry]:
        return [fe for fe in self.files.values() if fe.live_at(v)]

    def schema_at(self, v: int) -> pa.Schema:
        s = self.schemas[0][1]
        for sv, sch in self.schemas:
            if sv <= v:
                s = sch
        return s

    def properties_at(self, v: int) -> dict[str, str]:
        p = self.properties[0][1]
        for pv, props in self.properties:
            if pv <= v:
                p = props
        return p

    # ------------------------------------------------------------ checkpoint (de)serialisation
    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version, "horizon": self.horizon, "primary_key": self.primary_key,
            "versions": [self.versions[v] for v in sorted(self.versions)],
            "files": [{"file": fe.file.to_dict(), "intervals": fe.intervals, "commit_seq": fe.commit_seq}
                      for fe in self.files.values()],
            "schemas": [[v, schema_to_json(s)] for v, s in self.schemas],
            "properties": [[v, p] for v, p in self.properties],
            "apps": self.apps,
            "timestamps": [[v, ts] for v, ts in sorted(self.timestamps.items())],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TableState":
        st = cls()
        st.version, st.horizon, st.primary_key = d["version"], d["horizon"], d["primary_key"]
        st.versions = {x["version"]: x for x in d["versions"]}
        st.files = {f["file"]["path"]: FileEntry(DataFile.from_dict(f["file"]), f["intervals"], f["commit_seq"])
                    for f in d["files"]}
        st.schemas = [(v, schema_from_json(s)) for v, s in d["schemas"]]
        st.properties = [(v, p) for v, p in d["properties"]]
        st.apps = d["apps"]
        st.timestamps = {v: ts for v, ts in d["timestamps"]}
        return st


class MetadataLog:
    """Reads and publishes log entries and checkpoints of one table directory."""

    def __init__(self, root: str):
        self.root = root
        self.dir = os.path.join(root, LOG_DIR)

    def exists(self) -> bool:
        return os.path.isdir(self.dir) and any(n.endswith(".json") for n in os.listdir(self.dir))

    def entry_path(self, v: int) -> str:
        return os.path.join(self.dir, entry_name(v))

    def publish(self, v: int, entry: dict[str, Any]) -> bool:
        return write_exclusive(self.entry_path(v), entry)

    def read_entry(self, v: int) -> dict[str, Any] | None:
        try:
            with open(self.entry_path(v)) as fh:
                return json.load(fh)
        except FileNotFoundError:
            return None

    def catch_up(self, state: TableState) -> int:
        """Apply every entry after state.version; returns how many were applied."""
        n = 0
        while True:
            e = self.read_entry(state.version + 1)
            if e is None:
                return n
            state.apply(e)
            n += 1

    def load(self) -> TableState:
        cp = self._latest_checkpoint()
        state = TableState.from_json(cp) if cp is not None else TableState()
        if cp is None:
            # no checkpoint yet: the log starts at version 0 (expire always writes a checkpoint first)
            pass
        self.catch_up(state)
        return state

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

    def write_checkpoint(self, state: TableState) -> None:
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
