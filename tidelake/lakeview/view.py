"""The read-optimized view of one table version: the Parquet files that hold exactly its rows.

A bucket whose state at the version is one base file (it was compacted and nothing was written to it
since) is that base file, referenced in place (no copy). A bucket with delta files newer than its
base is merged once into ``_lakeview/data/bucket-NNNNN/merged-<uuid>.parquet`` (latest row per key,
deletes dropped, user columns only). So after a compaction of every bucket the view is zero-copy, unless the
table has ``columns.hidden`` columns: its files are then copied without them, as the view's schema has none.

``_lakeview/view.json`` lists the view's files and its source version, for engines that read a list
of Parquet files (DuckDB, polars); the Delta log and the Iceberg metadata list the same files.
"""
from __future__ import annotations

import io
import json
import uuid
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from tidelake.storage import Storage
from tidelake.table import Snapshot
from tidelake.table.key_order import sort_indices_by_key
from tidelake.table.reader import MergeOnReadReader
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
    """The files holding exactly the rows of ``source_version`` of the table in ``storage``."""
    storage: Storage
    source_version: int
    source_timestamp_ms: int
    schema: pa.Schema
    primary_key: tuple[str, ...]
    files: tuple[ViewFile, ...]

    @property
    def root(self) -> str:
        """The table's URL (a local path on a local disk)."""
        return self.storage.url

    def full_paths(self) -> list[str]:
        """Each file's full name: a local path, or the object store's URL."""
        return [self.storage.location(f.path) for f in self.files]

    def to_json(self, previous_files: list[str]) -> dict:
        return {"source_version": self.source_version, "source_timestamp_ms": self.source_timestamp_ms,
                "primary_key": list(self.primary_key), "schema_fields": [f"{f.name} {f.type}" for f in self.schema],
                "files": [asdict(f) for f in self.files], "previous_files": previous_files}


def build_view(snapshot: Snapshot) -> ReadView:
    """The view of ``snapshot``'s version: base files in place, the other buckets merged into new files."""
    storage, schema, pk = snapshot.storage, snapshot.visible_schema, snapshot.primary_key
    in_place = schema == snapshot.schema   # a file holding hidden columns (columns.hidden) is copied without them
    reader = MergeOnReadReader(storage, pk)
    files = []
    for plan in _bucket_plans(snapshot):
        if plan.base is not None and not plan.deltas and in_place:
            f = plan.base.file
            files.append(ViewFile(f.path, f.rows, f.bytes, f.bucket, "base"))
            continue
        rows = reader.merge_bucket(plan, schema.names, schema)
        if rows.num_rows == 0:
            continue
        rows = rows.take(sort_indices_by_key(rows, pk))
        rel = f"{MERGED_DIR}/bucket-{plan.bucket:05d}/merged-{uuid.uuid4().hex}.parquet"
        buf = io.BytesIO()
        pq.write_table(rows.cast(schema), buf, compression="zstd")
        storage.write(rel, buf.getvalue())
        files.append(ViewFile(rel, rows.num_rows, buf.tell(), plan.bucket, "merged"))
    return ReadView(storage, snapshot.version, snapshot.timestamp_ms, schema, tuple(pk), tuple(files))


def _bucket_plans(snapshot: Snapshot) -> list[BucketPlan]:
    return [p for _, p in sorted(ScanPlanner(snapshot.metadata).buckets(snapshot.version).items())]


def read_view_file(storage: Storage) -> dict | None:
    """The last published ``view.json`` of the table in ``storage`` (None if there is none)."""
    try:
        return json.loads(storage.read(VIEW_FILE))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise LakeviewError(f"{storage.location(VIEW_FILE)}: unreadable view file: {e}") from None


def write_view_file(view: ReadView, previous: dict | None) -> None:
    """Publish ``view.json`` (a whole-file replace: a reader sees the old or the new list), then delete
    merged files that neither this view nor the previous one lists: a reader that just read the
    previous list can still open its files."""
    prev = [f["path"] for f in (previous or {}).get("files", [])]
    view.storage.write(VIEW_FILE, json.dumps(view.to_json(prev), indent=1).encode())
    keep = {f.path for f in view.files} | set(prev)
    for path in view.storage.list(MERGED_DIR):
        if path not in keep:
            view.storage.delete(path)
