"""A Table object reads the metadata log only in open, ``refresh()`` and its commits: its accessors and reads
between those see the version it last loaded, and ``refresh()`` sees another writer's commits."""
from __future__ import annotations

import pyarrow as pa

from tidelake.storage import Storage, open_storage
from tidelake.table import Table
from tidelake.table.log import LOG_DIR

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


class CountingStorage(Storage):
    """A real store, every operation on it recorded as (operation, path)."""

    def __init__(self, inner: Storage):
        self.inner, self.url, self.options = inner, inner.url, inner.options
        self.calls: list[tuple[str, str]] = []

    def _count(self, op: str, path: str) -> None:
        self.calls.append((op, path))

    def read(self, path):
        self._count("read", path)
        return self.inner.read(path)

    def write(self, path, data):
        self._count("write", path)
        self.inner.write(path, data)

    def create(self, path, data):
        self._count("create", path)
        return self.inner.create(path, data)

    def exists(self, path):
        self._count("exists", path)
        return self.inner.exists(path)

    def size(self, path):
        self._count("size", path)
        return self.inner.size(path)

    def list_info(self, prefix="", *, after=None):
        self._count("list", prefix)
        return self.inner.list_info(prefix, after=after)

    def delete(self, path):
        self._count("delete", path)
        return self.inner.delete(path)

    def written(self, path):
        self.inner.written(path)

    def local_path(self, path):
        self._count("local_path", path)
        return self.inner.local_path(path)

    def log_calls(self) -> list[tuple[str, str]]:
        return [c for c in self.calls if c[1].startswith(LOG_DIR)]


def rows(ids, name="n"):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{name}{i}" for i in ids]})


def test_accessors_and_reads_do_no_log_io_between_refreshes_and_refresh_sees_another_writer(tmp_path):
    path = str(tmp_path / "t")
    writer = Table.create(path, SCHEMA, ["id"], {"write.bucket.num": "2", "clustering.auto": "false",
                                                  "retention.auto": "false"})
    writer.upsert(rows([1, 2]))
    storage = CountingStorage(open_storage(path))
    reader = Table.open(storage)
    assert storage.log_calls()                       # open reads the log
    writer.upsert(rows([3], "new"))                  # another writer commits version 2
    writer.set_properties({"user.owner": "ops"})     # and version 3
    storage.calls.clear()

    md = reader.metadata
    assert (reader.version, md.version) == (1, 1)
    assert reader.schema.names == ["id", "name"] and "user.owner" not in reader.properties
    assert [h["version"] for h in reader.history()] == [0, 1] and reader.app_state("app") is None
    assert reader.latest_version() == 1 and reader.snapshot().version == 1
    assert storage.calls == []                       # none of these touched the store
    assert sorted(reader.scan().column("id").to_pylist()) == [1, 2]
    assert {f.path for f in reader.plan()} and reader.changes(start_version=0).num_rows == 2
    assert storage.log_calls() == []                 # reads touch data files only

    assert reader.refresh() == 3 and storage.log_calls()
    storage.calls.clear()
    assert reader.version == 3 and reader.properties["user.owner"] == "ops"
    assert sorted(reader.scan().column("id").to_pylist()) == [1, 2, 3]
    assert storage.log_calls() == []


def test_a_write_from_a_stale_object_starts_from_the_newest_version(tmp_path):
    path = str(tmp_path / "t")
    writer = Table.create(path, SCHEMA, ["id"], {"write.bucket.num": "2", "clustering.auto": "false"})
    stale = Table.open(path)
    writer.upsert(rows([1, 2]))
    assert stale.version == 0
    assert stale.delete([1]) == 2                    # the delete sees row 1, committed after the object loaded
    assert stale.version == 2 and stale.scan().column("id").to_pylist() == [2]
    writer.refresh()
    assert writer.scan().column("id").to_pylist() == [2]
