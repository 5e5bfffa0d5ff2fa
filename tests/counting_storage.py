"""A real store whose every operation on the driver is recorded, to count a component's storage I/O."""
from __future__ import annotations

from tidelake.storage import Storage
from tidelake.table.log import LOG_DIR


class CountingStorage(Storage):
    """``inner`` with every operation recorded as (operation, path). Pickled (to Spark's executors) it is ``inner``
    itself: only the process that made it counts."""

    def __init__(self, inner: Storage):
        self.inner, self.url, self.options = inner, inner.url, inner.options
        self.calls: list[tuple[str, str]] = []

    def __reduce__(self):
        return self.inner.__reduce__()

    def read(self, path):
        self.calls.append(("read", path))
        return self.inner.read(path)

    def read_range(self, path, start, length):
        self.calls.append(("read_range", path))
        return self.inner.read_range(path, start, length)

    def write(self, path, data):
        self.calls.append(("write", path))
        self.inner.write(path, data)

    def write_file(self, path, local_file):
        self.calls.append(("write", path))
        self.inner.write_file(path, local_file)

    def create(self, path, data):
        self.calls.append(("create", path))
        return self.inner.create(path, data)

    def exists(self, path):
        self.calls.append(("exists", path))
        return self.inner.exists(path)

    def size(self, path):
        self.calls.append(("size", path))
        return self.inner.size(path)

    def list_info(self, prefix="", *, after=None):
        self.calls.append(("list", prefix))
        return self.inner.list_info(prefix, after=after)

    def delete(self, path):
        self.calls.append(("delete", path))
        return self.inner.delete(path)

    def written(self, path):
        self.inner.written(path)

    def local_path(self, path):
        self.calls.append(("local_path", path))   # a local file is opened by path, not read through read()
        return self.inner.local_path(path)

    def location(self, path):
        return self.inner.location(path)


def log_reads(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The reads of a table's metadata log among ``calls`` (its writes, create and checkpoint, left out)."""
    return [(op, path) for op, path in calls if path.startswith(LOG_DIR) and op in ("read", "exists", "list")]
