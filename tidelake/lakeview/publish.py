"""Publishing the read-optimized view of a table in open formats, and reading back what was published.

``publish(table, formats)`` builds the view of a version (default: the latest) and commits it as a
Delta table and/or an Iceberg table, then ``_lakeview/view.json``. It is the one entry point: the
``tidelake table publish`` command calls it, and so does the table's maintenance after each compaction
when the table property ``view.formats`` names formats (``publish_after_compaction``).

Publishers of a table on a local disk are serialized by an flock on ``_lakeview/.lock`` (on an object
store, Delta's and Iceberg's own commits decide between racing publishers); a view never moves back: a
format that already shows this version or a newer one is left as it is.
"""
from __future__ import annotations

import fcntl
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from tidelake.storage import Storage
from tidelake.table import Snapshot, Table
from tidelake.table.metadata import TableMetadata
from tidelake.table.properties import VIEW_FORMATS

from .view import VIEW_DIR, LakeviewError, ReadView, ViewFile, build_view, read_view_file, write_view_file

log = logging.getLogger(__name__)

FORMATS = VIEW_FORMATS.choices
FORMATS_PROPERTY = VIEW_FORMATS.name


def parse_formats(text: str, where: str = FORMATS_PROPERTY) -> tuple[str, ...]:
    """``"delta,iceberg"`` -> ("delta", "iceberg"); an unknown name is a LakeviewError."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        raise LakeviewError(f"{where}: unknown view format {', '.join(unknown)} (known: {', '.join(FORMATS)})")
    return names


@dataclass(frozen=True)
class Published:
    """What one publish did: the source version shown, the formats it committed (the others already
    showed it or a newer one), the view's files and how many of them it had to write (merged)."""
    source_version: int
    formats: tuple[str, ...]
    skipped: tuple[str, ...]
    files: int
    merged: int


def source_versions(table: Table | Storage) -> dict[str, int | None]:
    """The tidelake version each format's view shows (None: not published)."""
    from .delta import delta_source_version
    from .iceberg import iceberg_source_version
    storage = table.storage if isinstance(table, Table) else table
    return {"delta": delta_source_version(storage), "iceberg": iceberg_source_version(storage)}


@contextmanager
def _publish_lock(storage: Storage) -> Iterator[None]:
    lock = storage.local_path(f"{VIEW_DIR}/.lock")
    if lock is None:
        yield
        return
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _view_from_file(snapshot: Snapshot, d: dict) -> ReadView:
    return ReadView(snapshot.storage, snapshot.version, snapshot.timestamp_ms, snapshot.visible_schema,
                    tuple(snapshot.primary_key), tuple(ViewFile(**f) for f in d["files"]))


def publish_snapshot(snapshot: Snapshot, formats: tuple[str, ...]) -> Published:
    """Publish the view of ``snapshot``'s version in ``formats`` (see the module docstring)."""
    from .delta import delta_source_version, publish_delta
    from .iceberg import iceberg_source_version, publish_iceberg
    publishers = {"delta": (delta_source_version, publish_delta), "iceberg": (iceberg_source_version, publish_iceberg)}
    storage, version = snapshot.storage, snapshot.version
    with _publish_lock(storage):
        todo = []
        for name in formats:
            shown = publishers[name][0](storage)
            if shown is None or shown < version:
                todo.append(name)
        previous = read_view_file(storage)
        shown_list = previous.get("source_version") if previous else None
        if not todo and shown_list is not None and shown_list >= version:
            return Published(version, (), formats, len(previous["files"]), 0)
        if previous is not None and shown_list == version:
            view, merged = _view_from_file(snapshot, previous), 0
        else:
            view = build_view(snapshot)
            merged = sum(1 for f in view.files if f.kind == "merged")
        for name in todo:
            publishers[name][1](view)
        if shown_list is None or shown_list < version:
            write_view_file(view, previous)
        return Published(version, tuple(todo), tuple(n for n in formats if n not in todo), len(view.files), merged)


def publish(table: Table | str, formats: tuple[str, ...] | str | None = None, version: int | None = None) -> Published:
    """Publish the view of ``version`` (default: the latest) of ``table`` (a Table or a path) in
    ``formats`` (default: the table property ``view.formats``)."""
    t = table if isinstance(table, Table) else Table.open(table, maintenance="inline")
    if formats is None:
        names = t.metadata.setting(VIEW_FORMATS)
    else:
        names = parse_formats(formats if isinstance(formats, str) else ",".join(formats), "formats")
    if not names:
        raise LakeviewError(f"{t.path}: no view format given and the table property {FORMATS_PROPERTY} is not set")
    return publish_snapshot(t.snapshot(version), names)


def publish_after_compaction(storage: Storage, metadata: TableMetadata, version: int) -> Published | None:
    """The maintenance hook: after the compaction that committed ``version``, publish its view in the
    formats the table property ``view.formats`` names (nothing when it is empty)."""
    names = metadata.setting(VIEW_FORMATS)
    if not names:
        return None
    published = publish_snapshot(Snapshot(storage, metadata, version), names)
    log.info("%s: view of version %d published as %s", storage.url, version,
             ", ".join(published.formats) or "(up to date)")
    return published
