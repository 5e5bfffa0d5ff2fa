"""``LocalStorage``: a table's files as plain files on a local disk.

Written with the operating system's calls, not an object-store client, for two reasons: a whole-file
write and a put-if-absent are fsynced (the temporary file, then its directory after the rename or
link), and so is a data file pyarrow wrote (``written``), so a commit survives a power loss (unless
opened with the storage option ``fsync=false``, for throwaway tables); and pyarrow reads and writes Parquet on the real files
(``local_path``), which is faster than going through bytes in memory.
"""
from __future__ import annotations

import os
import shutil
import uuid

from tidelake.fsutil import fsync_dir, fsync_file

from .storage import FileInfo, Storage

TMP_PREFIX = ".tmp-"      # a write in progress (or abandoned by a killed process): never listed


class LocalStorage(Storage):
    def __init__(self, root: str, *, fsync: bool = True):
        self.url = root
        self.fsync = fsync
        self.options = {} if fsync else {"fsync": "false"}

    def __reduce__(self):
        return (_reopen, (self.url, self.fsync))

    def written(self, path: str) -> None:
        if not self.fsync:
            return
        full = self.local_path(path)
        fsync_file(full)
        # its directory (the new name) and that directory's parent (a bucket folder may be new too)
        fsync_dir(os.path.dirname(full))
        fsync_dir(os.path.dirname(os.path.dirname(full)))

    def local_path(self, path: str) -> str:
        return os.path.join(self.url, path)

    def location(self, path: str) -> str:
        return self.local_path(path) if path else self.url

    def read(self, path: str) -> bytes:
        with open(self.local_path(path), "rb") as fh:
            return fh.read()

    def read_range(self, path: str, start: int, length: int) -> bytes:
        with open(self.local_path(path), "rb") as fh:
            return os.pread(fh.fileno(), length, start)

    def _staged(self, path: str, data: bytes) -> tuple[str, str]:
        """``data`` fsynced in a temporary file beside ``path``: (its directory, the temporary file)."""
        full = self.local_path(path)
        d = os.path.dirname(full)
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f"{TMP_PREFIX}{uuid.uuid4().hex}")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
        return d, tmp

    def write(self, path: str, data: bytes) -> None:
        d, tmp = self._staged(path, data)
        os.replace(tmp, self.local_path(path))   # atomic: the old or the new file, whole
        if self.fsync:
            fsync_dir(d)

    def write_file(self, path: str, local_file: str) -> None:
        full = self.local_path(path)
        d = os.path.dirname(full)
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f"{TMP_PREFIX}{uuid.uuid4().hex}")
        shutil.copyfile(local_file, tmp)
        if self.fsync:
            fsync_file(tmp)
        os.replace(tmp, full)
        if self.fsync:
            fsync_dir(d)

    def create(self, path: str, data: bytes) -> bool:
        d, tmp = self._staged(path, data)
        try:
            os.link(tmp, self.local_path(path))   # fails if the name exists: one racing writer wins
            won = True
        except FileExistsError:
            won = False
        finally:
            os.unlink(tmp)
        if won:
            if self.fsync:
                fsync_dir(d)
            return True
        try:
            return self.read(path) == bytes(data)   # the interface's rule for a retried create (see Storage)
        except FileNotFoundError:
            return False

    def exists(self, path: str) -> bool:
        return os.path.exists(self.local_path(path))

    def size(self, path: str) -> int:
        return os.path.getsize(self.local_path(path))

    def _entries(self, prefix: str, after: str | None):
        """(relative path, os.DirEntry) of every file under ``prefix`` (scandir: no stat per file)."""
        prefix = prefix.strip("/")
        stack = [(self.local_path(prefix) if prefix else self.url, prefix)]
        while stack:
            folder, rel_folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for e in entries:
                rel = f"{rel_folder}/{e.name}" if rel_folder else e.name
                if e.is_dir(follow_symlinks=False):
                    stack.append((e.path, rel))
                elif not e.name.startswith(TMP_PREFIX) and (after is None or rel > after):
                    yield rel, e

    def list(self, prefix: str = "", *, after: str | None = None) -> list[str]:
        return sorted(rel for rel, _ in self._entries(prefix, after))

    def list_info(self, prefix: str = "", *, after: str | None = None) -> list[FileInfo]:
        out = []
        for rel, e in self._entries(prefix, after):
            try:
                st = e.stat()
            except FileNotFoundError:   # deleted while listing
                continue
            out.append(FileInfo(rel, st.st_size, int(st.st_mtime * 1000)))
        return sorted(out)

    def delete(self, path: str) -> bool:
        try:
            os.unlink(self.local_path(path))
            return True
        except FileNotFoundError:
            return False


def _reopen(root: str, fsync: bool) -> LocalStorage:
    """Unpickling (a Spark task): the same directory with the same fsync choice."""
    return LocalStorage(root, fsync=fsync)
