"""The view as an Apache Iceberg table, written with pyiceberg: a SQLite catalog
(``_lakeview/iceberg/catalog.db``, namespace ``tidelake``, table ``view``) and the table's metadata
under ``_lakeview/iceberg/view/metadata/`` (with ``version-hint.text``, so the metadata files alone
are enough: ``StaticTable.from_metadata(<root>/_lakeview/iceberg/view)``). Data files are the view's
Parquet files in place, by absolute path, matched to columns by name (Iceberg's name mapping: the
files carry no field ids).

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


def iceberg_catalog(root: str) -> SqlCatalog:
    """The SQLite catalog holding the view of the table at ``root``."""
    base = os.path.join(root, ICEBERG_DIR)
    os.makedirs(base, exist_ok=True)
    return SqlCatalog(NAMESPACE, uri=f"sqlite:///{base}/catalog.db", warehouse=f"file://{base}")


def iceberg_location(root: str) -> str:
    """The Iceberg table location (its ``metadata/`` folder holds every metadata file)."""
    return os.path.join(root, ICEBERG_DIR, TABLE_NAME)


def _load(root: str) -> IcebergTable | None:
    if not os.path.exists(os.path.join(root, ICEBERG_DIR, "catalog.db")):
        return None
    try:
        return iceberg_catalog(root).load_table(f"{NAMESPACE}.{TABLE_NAME}")
    except NoSuchTableError:
        return None


def iceberg_source_version(root: str) -> int | None:
    """The tidelake version the Iceberg view at ``root`` shows (None: no Iceberg view yet)."""
    t = _load(root)
    v = t.properties.get(SOURCE_VERSION) if t is not None else None
    return int(v) if v is not None else None


def publish_iceberg(view: ReadView) -> str:
    """Commit ``view`` as the Iceberg table's new snapshot; returns the new metadata file."""
    table = _load(view.root)
    if table is None:
        catalog = iceberg_catalog(view.root)
        catalog.create_namespace_if_not_exists(NAMESPACE)
        table = catalog.create_table(f"{NAMESPACE}.{TABLE_NAME}", schema=view.schema,
                                     location=iceberg_location(view.root))
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
    hint = os.path.join(iceberg_location(view.root), "metadata", "version-hint.text")
    tmp = f"{hint}.tmp"
    with open(tmp, "w") as f:
        f.write(os.path.basename(table.metadata_location))
    os.replace(tmp, hint)
    return table.metadata_location
