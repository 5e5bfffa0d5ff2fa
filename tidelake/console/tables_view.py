"""The tables the console shows: every table under ``--tables DIR`` (the directory itself, its children and
grandchildren) plus the sink table of each pipeline, read through ``tidelake.table``'s public API."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from tidelake.table import Table
from tidelake.table.summary import files_by_bucket, history_entry

PREVIEW_ROWS = 50


@dataclass(frozen=True)
class TableInfo:
    name: str
    path: str
    version: int
    last_commit_ms: int
    primary_key: list[str]
    schema: list[tuple[str, str]]
    properties: dict[str, str]
    files: list[dict[str, Any]]
    history: list[dict[str, Any]]   # newest first
    rows: int                       # the table's rows at this version (what a scan returns)

    @property
    def stored_rows(self) -> int:
        """Rows in the live data files: more than ``rows`` while deltas still hold the older images of updated
        rows and the deletes, which merge on read hides and compaction drops."""
        return sum(f["rows"] for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f["bytes"] for f in self.files)


class TableCatalog:
    def __init__(self, directory: str | None, more: Callable[[], list[str]] = list, depth: int = 2):
        self.directory = Path(directory).resolve() if directory else None
        self.more, self.depth = more, depth
        self._open: dict[str, Table] = {}
        self._row_counts: dict[tuple[str, int], int] = {}   # (path, version) -> rows: a version never changes
        self._lock = threading.Lock()

    def paths(self) -> dict[str, str]:
        """name -> path: names relative to --tables DIR, a pipeline's sink elsewhere by its folder name."""
        found: dict[str, str] = {}
        if self.directory is not None:
            for path in self._walk(self.directory, self.depth):
                rel = os.path.relpath(path, self.directory)
                found[self.directory.name if rel == "." else rel] = str(path)
        for p in self.more():
            path = str(Path(p).resolve())
            if path in found.values() or not Table.exists(path):
                continue
            name, n = Path(path).name, 2
            while name in found:
                name, n = f"{Path(path).name}-{n}", n + 1
            found[name] = path
        return dict(sorted(found.items()))

    @staticmethod
    def _walk(root: Path, depth: int) -> list[Path]:
        if Table.exists(str(root)):
            return [root]
        if depth == 0 or not root.is_dir():
            return []
        out = []
        for child in sorted(root.iterdir()):
            if child.is_dir() and not child.name.startswith((".", "_")):
                out.extend(TableCatalog._walk(child, depth - 1))
        return out

    def table(self, name: str) -> Table:
        path = self.paths().get(name)
        if path is None:
            raise KeyError(name)
        with self._lock:
            t = self._open.get(path)
            if t is None:
                t = self._open[path] = Table.open(path)
        t.refresh()
        return t

    def info(self, name: str, history_limit: int = 200) -> TableInfo:
        t = self.table(name)
        history = [history_entry(e) for e in reversed(t.history())][:history_limit]
        return TableInfo(name, t.path, t.version, t.latest_timestamp(), list(t.primary_key),
                         [(f.name, str(f.type)) for f in t.visible_schema_at()], dict(sorted(t.properties.items())),
                         files_by_bucket(t.plan()), history, self._row_count(t))

    def _row_count(self, t: Table) -> int:
        """The rows of the table's current version: a scan of its key columns, once per version."""
        version = t.version
        key = (t.path, version)
        with self._lock:
            known = self._row_counts.get(key)
        if known is None:
            known = t.scan(version=version, columns=list(t.primary_key)).num_rows
            with self._lock:
                self._row_counts = {k: n for k, n in self._row_counts.items() if k[0] != t.path}
                self._row_counts[key] = known
        return known

    def preview(self, name: str, version: int | None = None, timestamp_ms: int | None = None,
                limit: int = PREVIEW_ROWS) -> tuple[int, pa.Table, int]:
        """(version read, its first ``limit`` rows in key order, its row count): a time-travel read."""
        t = self.table(name)
        v = t.version_at(timestamp_ms) if timestamp_ms is not None else (t.version if version is None else version)
        rows = t.scan(version=v)
        return v, rows.sort_by([(k, "ascending") for k in t.primary_key]).slice(0, limit), rows.num_rows

    def changes(self, name: str, start: int, end: int, limit: int = 200) -> tuple[pa.Table, int]:
        """The changes of versions (start, end], at most ``limit`` of them, and how many there are."""
        out = self.table(name).changes(start_version=start, end_version=end)
        return out.slice(0, limit), out.num_rows

    def compact(self, name: str) -> int | None:
        """Compact the table now (an action): the new version, or None when there was nothing to do."""
        path = self.paths()[name]
        t = Table.open(path, maintenance="inline")
        try:
            return t.compact()
        finally:
            t.close()
