"""An immutable handle on one version of a table, for reading it and writing against it elsewhere.

``Table.snapshot(version)`` pins what that version needs (its live files, schema, properties), so the
handle pickles small and its copy in another process (a Spark task) plans, reads buckets and stages
files without opening the table's metadata log::

    snap = Table.open(path).snapshot()               # driver: the log is read once, here
    ...                                              # ship ``snap`` to tasks (pickle)
    snap.scan(buckets={3}, filter=[("id", ">", 10)]) # task: one bucket of that version
    files = snap.stage_files(rows, op="upsert")      # task: staged files for the driver's commit
"""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from tidelake.storage import Storage

from .errors import SchemaError
from .files import DataFile, FilePlan
from .metadata import TableMetadata
from .reader import MergeOnReadReader
from .scan import ScanFilter, ScanPlanner, file_plans
from .engine_commit import engine_of
from .writer import DeltaWriter


class Snapshot:
    """One version of a table: plan, read (whole or some buckets), stage files. Never changes."""

    def __init__(self, storage: Storage, metadata: TableMetadata, version: int):
        self.storage = storage
        self.metadata = metadata
        self.version = version

    @property
    def schema(self) -> pa.Schema:
        return self.metadata.schema_at(self.version)

    @property
    def visible_schema(self) -> pa.Schema:
        """The schema without the ``columns.hidden`` columns."""
        return self.metadata.visible_schema_at(self.version)

    @property
    def primary_key(self) -> list[str]:
        return list(self.metadata.primary_key)

    @property
    def timestamp_ms(self) -> int:
        return self.metadata.timestamp(self.version)

    def plan(self, filter: Any = None, buckets: set[int] | None = None) -> list[FilePlan]:
        """The files a read with this filter touches, by bucket."""
        plans = ScanPlanner(self.metadata).snapshot(self.version, ScanFilter.parse(filter), buckets)
        return file_plans([fe for p in plans for fe in p.files])

    def scan(self, filter: Any = None, columns: Sequence[str] | None = None,
             buckets: set[int] | None = None, include_hidden: bool = False) -> pa.Table:
        """The rows of this version (one per key); ``buckets`` reads only those buckets (a Spark task
        reading its partition). ``filter`` as in ``Table.scan``; the ``columns.hidden`` columns only when
        named in ``columns`` or ``include_hidden``."""
        f = ScanFilter.parse(filter)
        schema = self.schema
        if columns is not None:
            wanted = list(columns)
        else:
            wanted = (schema if include_hidden else self.visible_schema).names
        for c in wanted:
            if c not in schema.names:
                raise SchemaError(f"no column {c!r} (columns: {schema.names})")
        plans = ScanPlanner(self.metadata).snapshot(self.version, f, buckets)
        reader = MergeOnReadReader(self.storage, self.metadata.primary_key)
        return reader.read_snapshot(plans, schema, wanted, f.expression, f.on_key(self.metadata.primary_key))

    def stage_files(self, data: Any, *, op: str = "upsert") -> list[DataFile]:
        """Bucketed, key-sorted L0 delta files of ``data`` in this version's schema, not yet visible:
        give them to ``Table.commit_staged`` (``read_version=snapshot.version``). ``op`` as in
        ``Table.stage_files`` (including 'changes')."""
        writer = DeltaWriter(self.storage, self.metadata.primary_key, self.metadata.bucket_num,
                             every_change=engine_of(self.metadata).resolves_on_commit)
        return writer.stage_files(data, op, self.schema)

    def __repr__(self) -> str:
        return f"Snapshot({self.storage.url!r}, version={self.version})"
