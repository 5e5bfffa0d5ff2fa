"""The table on an object store: S3 (moto's server on 127.0.0.1, which enforces If-None-Match) and
memory://. Data files, log entries, checkpoints and the checkpoint pointer all live in the store;
everything the table does on a local disk works the same there."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from tidelake.storage import open_storage
from tidelake.table import Snapshot, Table, VersionExpired
from tidelake.table.check import check_table
from tidelake.table.log import LOG_DIR
from tests.table.manual_clock import HOUR, ManualClock

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.int64())])


def rows(ids, amount, name="n"):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{name}{i}" for i in ids],
                     "amount": pa.array([amount] * len(ids), pa.int64())})


def as_dict(t):
    return {r["id"]: (r["name"], r["amount"]) for r in t.to_pylist()}


@pytest.fixture(params=["s3", "memory"])
def location(request):
    """(url, storage options) of a fresh table location."""
    if request.param == "memory":
        return f"memory://{request.node.name}", None
    server = request.getfixturevalue("s3_server")
    return server.url("table"), server.options


def test_lifecycle(location):
    url, options = location
    clock = ManualClock(1_000 * HOUR, step=1)   # every commit a distinct time
    t = Table.create(url, SCHEMA, ["id"], {"write.bucket.num": "2", "clustering.auto": "false",
                                           "checkpoint.interval": "3", "acid.data.retain.hours": "1"},
                     clock=clock, maintenance="inline", storage_options=options)
    assert t.path == url and Table.exists(url, storage_options=options)
    t.insert_into(rows(range(10), 1))                          # v1
    t.upsert(rows([0, 1, 20], 2))                               # v2
    t.delete([3, 4])                                            # v3 (checkpoint)
    t.update(pa.table({"id": pa.array([5], pa.int64()), "amount": pa.array([9], pa.int64())}))   # v4
    want = {i: (f"n{i}", 1) for i in range(10)}
    want.update({0: ("n0", 2), 1: ("n1", 2), 20: ("n20", 2), 5: ("n5", 9)})
    del want[3], want[4]
    assert as_dict(t.scan()) == want
    assert as_dict(t.scan(version=1)) == {i: (f"n{i}", 1) for i in range(10)}          # time travel
    assert as_dict(t.scan(timestamp=t.latest_timestamp(3))) == as_dict(t.scan(version=2))
    assert as_dict(t.scan(filter={"id": 20})) == {20: ("n20", 2)}                       # bucket pruning
    changes = t.changes(start_version=2, end_version=3).to_pylist()
    assert [(c["id"], c["_op"], c["_commit_version"]) for c in changes] == [(3, "delete", 3), (4, "delete", 3)]

    # everything is in the store: the log (entries, checkpoint, pointer) and the data files
    storage = open_storage(url, options)
    names = storage.list(LOG_DIR)
    assert f"{LOG_DIR}/{4:020d}.json" in names and f"{LOG_DIR}/{3:020d}.checkpoint.json" in names
    assert f"{LOG_DIR}/_last_checkpoint" in names
    assert {f.path for f in t.plan()} <= set(storage.list("data"))

    # another client opens it from the store (checkpoint 3 + entry 4)
    other = Table.open(url, storage_options=options)
    assert other.version == 4 and as_dict(other.scan()) == want

    assert t.compact() == 5                                     # base files written to the store
    assert {f.kind for f in t.plan()} == {"base"} and as_dict(t.scan()) == want
    t.upsert(rows(range(30, 40), 3))                            # both upserts write a file to both buckets
    t.upsert(rows(range(40, 50), 3))
    assert t.cluster() == 8 and {f.level for f in t.plan() if f.kind == "delta"} == {1}
    want.update({i: (f"n{i}", 3) for i in range(30, 50)})
    assert other.refresh() == 8 and as_dict(other.scan()) == want   # the other client catches up
    assert t.restore(4) == 9 and as_dict(t.scan()) == as_dict(t.scan(version=4))

    clock.now += 2 * HOUR                          # versions before 9 (current two hours ago) expire
    t.upsert(rows([60], 4))
    done = t.expire()
    assert done["horizon"] == 9 and done["files_removed"] > 0 and done["log_entries_removed"] == 9
    with pytest.raises(VersionExpired):
        t.scan(version=4)
    live = {f.path for v in (9, 10) for f in t.plan(version=v)}
    assert set(storage.list("data")) == live                    # dead files deleted from the store
    entries = [n for n in storage.list(LOG_DIR) if n.endswith(".json") and "checkpoint" not in n]
    assert entries == [f"{LOG_DIR}/{9:020d}.json", f"{LOG_DIR}/{10:020d}.json"]
    reopened = Table.open(url, storage_options=options)
    assert as_dict(reopened.scan()) == as_dict(t.scan()) and reopened.version == 10
    assert check_table(url, storage_options=options).ok


def test_table_and_snapshot_pickle_with_their_storage(location):
    """What a Spark task gets: the table's store is opened again from its URL and options."""
    url, options = location
    t = Table.create(url, SCHEMA, ["id"], {"write.bucket.num": "4"}, storage_options=options)
    t.upsert(rows(range(20), 1))
    snap = pickle.loads(pickle.dumps(t.snapshot()))
    assert as_dict(snap.scan(buckets={0, 1, 2, 3})) == as_dict(t.scan())
    staged = snap.stage_files(rows([100, 101], 5))
    task_table = pickle.loads(pickle.dumps(t))
    assert task_table.path == url and task_table.version == 1
    assert t.commit_staged(staged, read_version=snap.version) == 2
    assert as_dict(t.scan())[100] == ("n100", 5)


def test_check_finds_damage_in_the_store(location):
    url, options = location
    t = Table.create(url, SCHEMA, ["id"], {"write.bucket.num": "1", "checkpoint.interval": "2"},
                     storage_options=options, maintenance="inline")
    for v in range(3):
        t.upsert(rows([v], v))
    storage = t.storage
    assert check_table(storage).ok
    storage.write(f"{LOG_DIR}/{2:020d}.checkpoint.json", b"{not json")      # a damaged checkpoint
    truncated = t.plan()[0].path
    storage.write(truncated, storage.read(truncated)[:20])                    # a truncated data file
    report = check_table(storage, repair=True)
    assert report.repaired and report.repaired[0].startswith(f"rebuilt {url}/{LOG_DIR}/{2:020d}.checkpoint.json")
    assert [(p.path, p.repairable) for p in report.problems] == [(f"{url}/{truncated}", False)]
    assert "size" in report.problems[0].problem
    assert Table.open(url, storage_options=options).version == 3


def test_a_missing_table_in_the_store(location):
    url, options = location
    assert not Table.exists(url, storage_options=options)
    with pytest.raises(Exception, match="no tidelake table"):
        Table.open(url, storage_options=options)


def test_a_failing_store_is_a_storage_error_not_a_corrupt_file(s3_server):
    """A read the store cannot serve (here: an endpoint nobody listens on) names the store's failure;
    it is not reported as a damaged or expired data file."""
    from conftest import free_port
    from tidelake.storage import StorageError
    url = s3_server.url("unreachable")
    t = Table.create(url, SCHEMA, ["id"], {"write.bucket.num": "1"}, storage_options=s3_server.options)
    t.upsert(rows([1, 2], 1))
    gone = open_storage(url, {**s3_server.options, "endpoint": f"http://127.0.0.1:{free_port()}"})
    snap = t.snapshot()
    with pytest.raises(StorageError, match=f"^{url}/data/bucket-00000/"):
        Snapshot(gone, snap.metadata, snap.version).scan()   # the data files only (no log read)
