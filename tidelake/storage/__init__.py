"""Storage: the files of one table on a local disk, an object store (S3) or in memory, by relative path.

Built on obstore (Rust's object_store): ``file://`` or a bare path, ``s3://bucket/prefix``, ``memory://``.
The one operation a table's commit needs beyond reads and writes is ``create``: put-if-absent, which
exactly one of several racing writers wins — a hard link from a temporary file on a local disk, and
``If-None-Match: *`` on S3 (honoured by AWS, MinIO, GCS and R2), so no lock service is needed.

Not yet used by ``tidelake.table``: the table still writes through the local filesystem (its commit
relies on ``os.link``); moving it onto this interface is the next step of the object-storage work.
"""
from __future__ import annotations

from .storage import Storage, open_storage

__all__ = ["Storage", "open_storage"]
