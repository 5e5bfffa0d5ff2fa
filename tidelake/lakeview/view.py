"""The read-optimized view of one table version: the Parquet files that hold exactly its rows.

A bucket whose state at the version is one base file (it was compacted and nothing was written to it
since) is that base file, referenced in place (no copy). A bucket with delta files newer than its
base is merged once into ``_lakeview/data/bucket-NNNNN/merged-<uuid>.parquet`` (latest row per key,
deletes dropped, user columns only). So after a compaction of every bucket the view is zero-copy.

``_lakeview/view.json`` lists the view's files and its source version, for engines that read a list
of Parquet files (DuckDB, polars); the Delta log and the Iceberg metadata list the same files.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from tidelake.table import Snapshot
from tidelake.table.reader import MergeOnReadReader, sort_indices_by_key
from tidelake.table.scan import BucketPlan, ScanPlanner

VIEW_DIR = "_lakeview"
VIEW_FILE = f"{VIEW_DIR}/view.json"
MERGED_DIR = f"{VIEW_DIR}/data"


class LakeviewError(Exception):
    """A view could not be published or read (one line: what and where)."""


@dataclass(frozen=True)
class ViewFile:
    """One Parquet file of the view, relative to the table root."""
    path: str
    rows: int
    bytes: int
    bucket: int
    kind: str        # 'base' (the table's own compacted file) | 'merged' (written for the view)


@dataclass(frozen=True)
class ReadView:
    """The files holding exactly the rows of ``source_version`` of the table at ``root``."""
    root: str
    source_version: int
    source_timestamp_ms: int
    schema: pa.Schema
    primary_key: tuple[str, ...]
    files: tuple[ViewFile, ...]

    def full_paths(self) -> list[str]:
        return [os.path.join(self.root, f.path) for f in self.files]

    def to_json(self, previous_files: list[str]) -> dict:
        return {"source_version": self.source_version, "source_timestamp_ms": self.source_timestamp_ms,
                "primary_key": list(self.primary_key), "schema_fields": [f"{f.name} {f.type}" for f in self.schema],
                "files": [asdict(f) for f in self.files], "previous_files": previous_files}


def build_view(snapshot: Snapshot) -> ReadView:
    """The view of ``snapshot``'s version: base files in place, the other buckets merged into new files."""
    root, schema, pk = snapshot.path, snapshot.schema, snapshot.primary_key
    reader = MergeOnReadReader(root, pk)
    files = []
    for plan in _bucket_plans(snapshot):
        if plan.base is not None and not plan.deltas:
            f = plan.base.file
            files.append(ViewFile(f.path, f.rows, f.bytes, f.bucket, "base"))
            continue
        rows = reader.merge_bucket(plan, schema.names, schema)
        if rows.num_rows == 0:
            continue
        rows = rows.take(sort_indices_by_key(rows, pk))
        rel = f"{MERGED_DIR}/bucket-{plan.bucket:05d}/merged-{uuid.uuid4().hex}.parquet"
        full = os.path.join(root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        pq.write_table(rows.cast(schema), full, compression="zstd")
        files.append(ViewFile(rel, rows.num_rows, os.path.getsize(full), plan.bucket, "merged"))
    return ReadView(root, snapshot.version, snapshot.timestamp_ms, schema, tuple(pk), tuple(files))


def _bucket_plans(snapshot: Snapshot) -> list[BucketPlan]:
    return [p for _, p in sorted(ScanPlanner(snapshot.metadata).buckets(snapshot.version).items())]


def read_view_file(root: str) -> dict | None:
    """The last published ``view.json`` of the table at ``root`` (None if there is none)."""
    path = os.path.join(root, VIEW_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise LakeviewError(f"{path}: unreadable view file: {e}") from None


def write_view_file(view: ReadView, previous: dict | None) -> None:
    """Publish ``view.json`` (atomically: a reader sees the old or the new list, never half of one),
    then delete merged files that neither this view nor the previous one lists: a reader that
    just read the previous list can still open its files."""
    prev = [f["path"] for f in (previous or {}).get("files", [])]
    path = os.path.join(view.root, VIEW_FILE)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        json.dump(view.to_json(prev), f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    keep = {f.path for f in view.files} | set(prev)
    merged_root = os.path.join(view.root, MERGED_DIR)
    for dirpath, _, names in os.walk(merged_root):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), view.root)
            if rel not in keep:
                try:
                    os.unlink(os.path.join(dirpath, n))
                except FileNotFoundError:
                    pass
