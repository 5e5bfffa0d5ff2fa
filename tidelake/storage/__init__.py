"""Storage: the files of one table on a local disk, an object store (S3) or in memory, by relative path.

``open_storage(url, options)`` picks the implementation from the URL:

- a bare path or ``file://``: ``LocalStorage`` (plain files; fsynced writes; pyarrow reads and writes
  Parquet on the real files through ``local_path``);
- ``s3://bucket/prefix``: ``ObjectStorage`` over obstore (Rust's object_store), endpoint, region and
  credentials from ``options`` or AWS's environment variables;
- ``memory://name``: ``ObjectStorage`` in this process's memory, for tests.

The interface (``Storage``) is eight calls: ``read``, ``write`` (whole-file replace), ``create``
(put-if-absent), ``exists``, ``size``, ``list`` / ``list_info``, ``delete``; plus ``local_path`` (None off a
local disk) and ``location`` (a file's full name, for messages). ``create`` is the one operation a
table's commit needs beyond reads and writes: exactly one of several racing writers wins a path — a
hard link from a temporary file on a local disk, ``If-None-Match: *`` on S3 — so no lock service is
needed. Errors of a store are ``StorageError`` (an OSError), one line naming the file.
"""
from __future__ import annotations

from .opening import is_local, open_storage
from .storage import FileInfo, Storage, StorageError

__all__ = ["Storage", "StorageError", "FileInfo", "open_storage", "is_local"]
