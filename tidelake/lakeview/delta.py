"""The view as a Delta table: ``_delta_log/`` at the table root, its add actions naming the view's
files by their path relative to the root (no copy), written with delta-rs.

Each publish is one Delta commit that replaces every file (``mode=overwrite``; a schema change
is carried by it too). The tidelake version it shows is recorded twice: as the Delta transaction
version of the application id ``tidelake`` (``DeltaTable.transaction_version("tidelake")``) and in the
commit info (``tidelake.sourceVersion``).
"""
from __future__ import annotations

import json
import os

from deltalake import DeltaTable, Schema
from deltalake.transaction import AddAction, CommitProperties, Transaction, create_table_with_add_actions

from .view import ReadView

APP_ID = "tidelake"
CHECKPOINT_EVERY = 10   # Delta versions between log checkpoints (readers replay at most this many JSON files)


def delta_source_version(root: str) -> int | None:
    """The tidelake version the Delta view at ``root`` shows (None: no Delta view yet)."""
    if not DeltaTable.is_deltatable(root):
        return None
    return DeltaTable(root).transaction_version(APP_ID)


def publish_delta(view: ReadView) -> int:
    """Commit ``view`` as the Delta table's new content; returns the Delta version."""
    actions = [AddAction(f.path, f.bytes, {}, int(os.path.getmtime(os.path.join(view.root, f.path)) * 1000), True,
                         json.dumps({"numRecords": f.rows})) for f in view.files]
    props = CommitProperties(custom_metadata={"tidelake.sourceVersion": str(view.source_version)},
                             app_transactions=[Transaction(APP_ID, view.source_version)])
    if not DeltaTable.is_deltatable(view.root):
        create_table_with_add_actions(view.root, Schema.from_arrow(view.schema), actions, mode="error",
                                      name=os.path.basename(view.root), commit_properties=props)
        return 0
    dt = DeltaTable(view.root)
    dt.create_write_transaction(actions, mode="overwrite", schema=view.schema, commit_properties=props)
    dt.update_incremental()
    version = dt.version()
    if version % CHECKPOINT_EVERY == 0:
        dt.create_checkpoint()
    return version
