"""Read-optimized views of a table in open formats, so other engines read its latest state without tidelake.

A view is the files that hold exactly one table version's rows (``view.py``): the compacted base files
in place, plus one merged file per bucket that still had delta files. It is published as a Delta log at
the table root (``delta.py``, delta-rs) and/or an Iceberg table with a SQLite catalog and static metadata
(``iceberg.py``, pyiceberg), and listed in ``_lakeview/view.json`` for engines that read Parquet files
(DuckDB, polars); each records its source version. ``publish.py`` does it, from the ``tidelake table
publish`` command or from the table's maintenance after each compaction (table property ``view.formats``):
importing this package installs ``publish_after_compaction`` as the table's view publisher.
"""
from tidelake.table.maintenance import install_view_publisher

from .publish import FORMATS, FORMATS_PROPERTY, Published, parse_formats, publish, publish_after_compaction, \
    publish_snapshot, source_versions
from .view import VIEW_FILE, LakeviewError, ReadView, ViewFile, build_view, read_view_file

install_view_publisher(publish_after_compaction)

__all__ = ["FORMATS", "FORMATS_PROPERTY", "Published", "parse_formats", "publish", "publish_after_compaction",
           "publish_snapshot", "source_versions", "VIEW_FILE", "LakeviewError", "ReadView", "ViewFile", "build_view",
           "read_view_file"]
