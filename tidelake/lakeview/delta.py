"""The view as a Delta table: ``_delta_log/`` at the table root, its add actions naming the view's
files by their path relative to the root (no copy), written with delta-rs (local disk or S3).

Each publish is one Delta commit that replaces every file (``mode=overwrite``; a schema change
is carried by it too). The tidelake version it shows is recorded twice: as the Delta transaction
version of the application id ``tidelake`` (``DeltaTable.transaction_version("tidelake")``) and in the
commit info (``tidelake.sourceVersion``).
"""
from __future__ import annotations

import json

from deltalake import DeltaTable, Schema
from deltalake.transaction import AddAction, CommitProperties, Transaction, create_table_with_add_actions

from tidelake.storage import Storage, is_local

from .view import ReadView

APP_ID = "tidelake"
CHECKPOINT_EVERY = 10   # Delta versions between log checkpoints (readers replay at most this many JSON files)


def delta_options(storage: Storage) -> dict[str, str] | None:
    """delta-rs' storage options for the table's store (None on a local disk). Its commits on S3 are
    put-if-absent, as tidelake's own (``conditional_put``)."""
    if is_local(storage.url):
        return None
    from tidelake.storage.objects import s3_options
    names = {"endpoint": "AWS_ENDPOINT_URL", "region": "AWS_REGION", "access_key_id": "AWS_ACCESS_KEY_ID",
             "secret_access_key": "AWS_SECRET_ACCESS_KEY", "session_token": "AWS_SESSION_TOKEN",
             "allow_http": "AWS_ALLOW_HTTP"}
    settings = s3_options(storage.options or {})
    out = {names[k]: v for k, v in settings.items()}
    if settings.get("endpoint", "").startswith("http://"):
        out.setdefault("AWS_ALLOW_HTTP", "true")
    out["conditional_put"] = "etag"
    return out


def delta_source_version(storage: Storage) -> int | None:
    """The tidelake version the Delta view of this table shows (None: no Delta view yet)."""
    options = delta_options(storage)
    if not DeltaTable.is_deltatable(storage.url, options):
        return None
    return DeltaTable(storage.url, storage_options=options).transaction_version(APP_ID)


def publish_delta(view: ReadView) -> int:
    """Commit ``view`` as the Delta table's new content; returns the Delta version."""
    actions = [AddAction(f.path, f.bytes, {}, view.source_timestamp_ms, True, json.dumps({"numRecords": f.rows}))
               for f in view.files]
    props = CommitProperties(custom_metadata={"tidelake.sourceVersion": str(view.source_version)},
                             app_transactions=[Transaction(APP_ID, view.source_version)])
    options = delta_options(view.storage)
    if not DeltaTable.is_deltatable(view.root, options):
        create_table_with_add_actions(view.root, Schema.from_arrow(view.schema), actions, mode="error",
                                      name=view.root.rstrip("/").rsplit("/", 1)[-1], storage_options=options,
                                      commit_properties=props)
        return 0
    dt = DeltaTable(view.root, storage_options=options)
    dt.create_write_transaction(actions, mode="overwrite", schema=view.schema, commit_properties=props)
    dt.update_incremental()
    version = dt.version()
    if version % CHECKPOINT_EVERY == 0:
        dt.create_checkpoint()
    return version
