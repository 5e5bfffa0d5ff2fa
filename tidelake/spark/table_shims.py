"""TEMPORARY bridges to table API that tidelake.table is adding; delete each one when it lands.

* Pickling: the Spark code opens a table once on the driver and ships the ``Table`` object to its tasks.
  Until ``Table`` pickles itself cheaply (with its replayed state), it pickles here as its path and is
  reopened where it is unpickled. Delete the ``copyreg`` registration when ``Table`` pickles: a class's
  own ``__reduce__`` is ignored while a ``copyreg`` reducer is registered for it.
* :func:`scan_bucket`: one bucket of a snapshot, until ``Table.scan(..., buckets={b})`` is public.
* :func:`stage_changes`: stage changes whose operation is per row (the ``_op`` column, the table's int8
  encoding), so that the table's own last-change-per-key rule is the only de-duplication; until
  ``Table.stage_files`` takes such data.
"""
from __future__ import annotations

import copyreg
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tidelake.table import DataFile, Table
from tidelake.table.files import OP, OP_DELETE, check_keys, conform


def _reopen(table: Table) -> tuple:
    return Table.open, (table.path,)


copyreg.pickle(Table, _reopen)


def scan_bucket(table: Table, version: int, filter: Any, bucket: int) -> pa.Table:
    """The rows of one bucket of the snapshot at ``version`` (becomes ``table.scan(version=version,
    filter=filter, buckets={bucket})``)."""
    return table._read_snapshot(version, filter=filter, buckets={bucket})


def stage_changes(table: Table, changes: pa.Table) -> list[DataFile]:
    """Stage rows of the table's columns plus ``_op`` (0 upsert, 1 delete), in the order they happened, as
    L0 delta files for ``commit_staged``; the last change of each key wins. A delete keeps only its key."""
    table.refresh()
    primary_key = table.primary_key
    check_keys(changes, primary_key)
    rows = conform(changes, table.schema, extra=[pa.field(OP, pa.int8())])
    is_delete = pc.equal(rows.column(OP), OP_DELETE)
    if pc.any(is_delete).as_py():
        for i, field in enumerate(rows.schema):
            if field.name not in primary_key and field.name != OP:
                rows = rows.set_column(i, field, pc.if_else(is_delete, pa.scalar(None, field.type), rows.column(i)))
    return table._stage(rows)
