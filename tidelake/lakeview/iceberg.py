"""The view as an Apache Iceberg table, written with pyiceberg: the table's metadata under
``_lakeview/iceberg/view/metadata/`` (with ``version-hint.text``, so the metadata files alone are enough:
``StaticTable.from_metadata(<root>/_lakeview/iceberg/view)``) and, for a table on a local disk, a SQLite
catalog beside it (``_lakeview/iceberg/catalog.db``, namespace ``tidelake``, table ``view``). On an object
store (no SQLite there) the metadata files are the catalog: each publish registers the latest one in an
in-memory SQLite catalog and commits through it. Data files are the view's Parquet files in place, by full
name, matched to columns by name (Iceberg's name mapping: the files carry no field ids).

Each publish is one overwrite snapshot (every old file out, the view's files in); the tidelake
version it shows is the table property and the snapshot summary property ``tidelake.source-version``.
"""
from __future__ import annotations

import logging
import os

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table as IcebergTable
from pyiceberg.table import TableProperties, _parquet_files_to_data_files

from tidelake.storage import Storage, is_local

from .view import VIEW_DIR, ReadView

ICEBERG_DIR = f"{VIEW_DIR}/iceberg"
NAMESPACE = "tidelake"
TABLE_NAME = "view"
SOURCE_VERSION = "tidelake.source-version"


class _NoMissingStatistics(logging.Filter):
    """Base files keep statistics only for the primary key (what tidelake prunes on); pyiceberg
    warns once per other column and file when it adds them, which says nothing new."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "statistics missing" not in record.getMessage()


logging.getLogger("pyiceberg.io.pyarrow").addFilter(_NoMissingStatistics())


HINT = "metadata/version-hint.text"


def iceberg_location(storage: Storage) -> str:
    """The Iceberg table location (its ``metadata/`` folder holds every metadata file)."""
    return storage.location(f"{ICEBERG_DIR}/{TABLE_NAME}")


def _io_properties(storage: Storage) -> dict[str, str]:
    """pyiceberg's FileIO settings for the table's store (none on a local disk)."""
    if is_local(storage.url):
        return {}
    from tidelake.storage.objects import s3_options
    settings = s3_options(storage.options or {})
    names = {"endpoint": "s3.endpoint", "region": "s3.region", "access_key_id": "s3.access-key-id",
             "secret_access_key": "s3.secret-access-key", "session_token": "s3.session-token"}
    return {names[k]: v for k, v in settings.items() if k in names}


def iceberg_catalog(storage: Storage) -> SqlCatalog:
    """The catalog to commit through: the SQLite file beside a local table, else an in-memory one
    holding the latest metadata file (registered from ``version-hint.text``)."""
    props = _io_properties(storage)
    if is_local(storage.url):
        base = storage.location(ICEBERG_DIR)
        os.makedirs(base, exist_ok=True)
        return SqlCatalog(NAMESPACE, uri=f"sqlite:///{base}/catalog.db", warehouse=f"file://{base}", **props)
    catalog = SqlCatalog(NAMESPACE, uri="sqlite:///:memory:", warehouse=storage.location(ICEBERG_DIR), **props)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    try:
        latest = storage.read(f"{ICEBERG_DIR}/{TABLE_NAME}/{HINT}").decode().strip()
    except FileNotFoundError:
        return catalog
    catalog.register_table(f"{NAMESPACE}.{TABLE_NAME}", f"{iceberg_location(storage)}/metadata/{latest}")
    return catalog


def _load(storage: Storage) -> IcebergTable | None:
    if is_local(storage.url) and not storage.exists(f"{ICEBERG_DIR}/catalog.db"):
        return None
    try:
        return iceberg_catalog(storage).load_table(f"{NAMESPACE}.{TABLE_NAME}")
    except NoSuchTableError:
        return None


def iceberg_source_version(storage: Storage) -> int | None:
    """The tidelake version the Iceberg view of this table shows (None: no Iceberg view yet)."""
    t = _load(storage)
    v = t.properties.get(SOURCE_VERSION) if t is not None else None
    return int(v) if v is not None else None


def publish_iceberg(view: ReadView) -> str:
    """Commit ``view`` as the Iceberg table's new snapshot; returns the new metadata file."""
    table = _load(view.storage)
    if table is None:
        catalog = iceberg_catalog(view.storage)
        catalog.create_namespace_if_not_exists(NAMESPACE)
        table = catalog.create_table(f"{NAMESPACE}.{TABLE_NAME}", schema=view.schema,
                                     location=iceberg_location(view.storage))
    summary = {SOURCE_VERSION: str(view.source_version)}
    with table.transaction() as tx:
        if set(view.schema.names) - set(table.schema().column_names):
            with tx.update_schema() as update:   # columns added to the tidelake table
                update.union_by_name(view.schema)
        if tx.table_metadata.name_mapping() is None:
            tx.set_properties(**{TableProperties.DEFAULT_NAME_MAPPING:
                                 tx.table_metadata.schema().name_mapping.model_dump_json()})
        with tx.update_snapshot(snapshot_properties=summary).overwrite() as overwrite:
            for task in table.scan().plan_files():
                overwrite.delete_data_file(task.file)
            for data_file in _parquet_files_to_data_files(tx.table_metadata, view.full_paths(), table.io):
                overwrite.append_data_file(data_file)
        tx.set_properties(**summary)
    table = table.refresh()
    view.storage.write(f"{ICEBERG_DIR}/{TABLE_NAME}/{HINT}", table.metadata_location.rsplit("/", 1)[-1].encode())
    return table.metadata_location
