"""TEMPORARY bridges to table API that tidelake.table is adding; delete each one when it lands.

* :func:`stage_changes`: stage changes whose operation is per row (the ``_op`` column, the table's int8
  encoding), so that the table's own last-change-per-key rule is the only de-duplication; until
  ``Table.stage_files`` takes such data.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tidelake.table import DataFile, Table
from tidelake.table.files import OP, OP_DELETE, check_keys, conform


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
    return table.writer.stage(rows)
