"""Transactional primary-key table (seed 003's Transactional Table 2.0), pyarrow only (no Spark)."""
from .errors import (CommitConflict, SchemaError, TableError, TableExists, TableNotFound,
                     VersionExpired, VersionNotFound)
from .files import DataFile, FilePlan, bucket_ids
from .table import DEFAULT_PROPERTIES, Table, Transaction, conflict_rule

__all__ = ["Table", "Transaction", "DataFile", "FilePlan", "bucket_ids", "conflict_rule", "DEFAULT_PROPERTIES",
           "TableError", "TableExists", "TableNotFound", "CommitConflict", "VersionExpired",
           "VersionNotFound", "SchemaError"]
