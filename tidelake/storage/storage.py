"""``Storage``, the interface every store implements (``opening.py`` picks one from a URL)."""
from __future__ import annotations

from typing import NamedTuple


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
    options it was opened with, and opens again where it is unpickled (a Spark task; each implementation's
    ``__reduce__``); a memory store is shared only inside one process."""

    url: str
    options: dict[str, str]

    def read(self, path: str) -> bytes:
        """The whole file; FileNotFoundError if there is none."""
        raise NotImplementedError

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes of the file from byte ``start`` (a ranged GET on an object store; the range must
        lie inside the file); FileNotFoundError if there is none."""
        raise NotImplementedError

    def write(self, path: str, data: bytes) -> None:
        """Create or replace the file, whole (readers see the old or the new content, never a mix)."""
        raise NotImplementedError

    def write_file(self, path: str, local_file: str) -> None:
        """``write`` of a local file's content, streamed (an object store uploads a large one in parts, so a
        file of a gigabyte is never in memory whole)."""
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

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"
