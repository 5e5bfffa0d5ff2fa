"""``Storage``, the interface every store implements, and ``open_storage``, which picks one from a URL."""
from __future__ import annotations

import os
from typing import Mapping, NamedTuple
from urllib.parse import urlparse


class StorageError(OSError):
    """A store refused or failed an operation (unreachable endpoint, bad credentials, missing bucket):
    one line naming the file and the store's reason."""


class FileInfo(NamedTuple):
    path: str            # relative to the storage root
    size: int            # bytes
    modified_ms: int     # last modification, ms since the epoch


class Storage:
    """Files under one root, addressed by '/'-separated paths relative to it
    ('_tidelake_log/00000000000000000001.json', 'data/bucket-00003/base-<uuid>.parquet').

    ``url``: the root as given (a local root is an absolute path). A Storage pickles as its URL and the
    options it was opened with, and opens again where it is unpickled (a Spark task); a memory store is
    shared only inside one process."""

    url: str
    options: dict[str, str]

    def read(self, path: str) -> bytes:
        """The whole file; FileNotFoundError if there is none."""
        raise NotImplementedError

    def write(self, path: str, data: bytes) -> None:
        """Create or replace the file, whole (readers see the old or the new content, never a mix)."""
        raise NotImplementedError

    def create(self, path: str, data: bytes) -> bool:
        """Put-if-absent: True if this call created the file, False if it already existed. Of several
        writers racing for one path (threads, processes, machines) with different data exactly one gets
        True. A file already holding exactly ``data`` also answers True: an object-store client retries a
        PUT whose response was lost, and the retry is refused because the first attempt succeeded; this
        rule keeps that writer the winner (writers of identical bytes cannot be told apart)."""
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def size(self, path: str) -> int:
        """Bytes; FileNotFoundError if there is no such file."""
        raise NotImplementedError

    def list(self, prefix: str = "", *, after: str | None = None) -> list[str]:
        """Every file path under the folder ``prefix`` (recursive), sorted; ``after``: only paths
        sorting after this one (S3's StartAfter: one request however long the folder is)."""
        return [f.path for f in self.list_info(prefix, after=after)]

    def list_info(self, prefix: str = "", *, after: str | None = None) -> list[FileInfo]:
        """``list`` with each file's size and modification time."""
        raise NotImplementedError

    def delete(self, path: str) -> bool:
        """Remove the file; a missing one is not an error (deletes are retried by retention). True if
        a file was removed (an object store cannot tell: True)."""
        raise NotImplementedError

    def written(self, path: str) -> None:
        """A file just written through ``local_path`` (by pyarrow) is made as durable as ``write``
        makes its files, before a commit names it. An object store's PUT already is: nothing to do."""

    def local_path(self, path: str) -> str | None:
        """The file's path on a local disk, for readers and writers that are faster on a real file
        (pyarrow's Parquet I/O); None on an object store or in memory."""
        return None

    def location(self, path: str) -> str:
        """The full name of a file, for messages: '<url>/<path>' (a local path on a local disk)."""
        return f"{self.url}/{path}" if path else self.url

    def __reduce__(self):
        return (open_storage, (self.url, self.options or None))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


def is_local(url: str) -> bool:
    """A bare path or file:// (not an object store, not memory)."""
    return _scheme(url) in ("", "file")


def _scheme(url: str) -> str:
    """'s3' of 's3://...', '' of a path (not urlparse: a path may hold anything, e.g. brackets)."""
    head, sep, _ = url.partition("://")
    return head.lower() if sep and head.isalnum() else ""


def open_storage(url: "str | Storage", options: Mapping[str, str] | None = None) -> Storage:
    """The storage at ``url``:

    - a bare path or ``file://``: files on a local disk (``LocalStorage``); option ``fsync`` (default
      true; false keeps written files in the page cache only, as object_store's local store does by
      default: a power loss can then lose committed versions);
    - ``s3://bucket[/prefix]``: S3 or an S3-compatible server; ``options`` (endpoint, region,
      access_key_id, secret_access_key, session_token, allow_http) win over AWS's environment
      variables (AWS_ENDPOINT_URL, AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, ...);
    - ``memory://name``: in this process's memory (tests); the same name is the same store.

    A Storage passed in is returned as is."""
    if isinstance(url, Storage):
        return url
    options = {str(k): str(v) for k, v in (options or {}).items()}
    scheme = _scheme(url)
    if scheme in ("", "file"):
        from .local import LocalStorage
        fsync = options.pop("fsync", "true").lower()
        if options:
            raise ValueError(f"storage options {sorted(options)} given for the local path {url!r} (a local disk "
                             "takes only fsync; the others are for s3://)")
        if fsync not in ("true", "false"):
            raise ValueError(f"storage option fsync={fsync!r} for {url!r}: expected true or false")
        return LocalStorage(os.path.abspath(urlparse(url).path if scheme == "file" else url), fsync=fsync == "true")
    from .objects import memory_storage, s3_storage
    if scheme == "s3":
        return s3_storage(url, options)
    if scheme == "memory":
        return memory_storage(url)
    raise ValueError(f"unsupported storage URL {url!r} (use a path, file://, s3:// or memory://)")
