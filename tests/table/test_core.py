"""Table API behaviour: writes, reads, pruning, clustering, compaction, schema evolution, retention."""
from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidelake.table import (CommitConflict, DataFile, SchemaError, Table, TableExists, TableNotFound,
                            VersionExpired, VersionNotFound, bucket_ids)
from tests.table.manual_clock import HOUR, ManualClock

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.int64())])


def make(tmp_path, clock=None, **props) -> Table:
    p = {"write.bucket.num": "4", "clustering.auto": "false"}
    p.update({k.replace("_", "."): str(v) for k, v in props.items()})
    return Table.create(str(tmp_path / "t"), SCHEMA, ["id"], p, clock=clock)


def data(ids, amount=0, name="n"):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{name}{i}" for i in ids],
                     "amount": pa.array([amount] * len(ids), pa.int64())})


def as_dict(t: pa.Table) -> dict:
    return {r["id"]: (r["name"], r["amount"]) for r in t.to_pylist()}


def test_create_open_and_properties(tmp_path):
    t = make(tmp_path)
    assert t.version == 0 and t.primary_key == ["id"]
    assert t.properties["transactional"] == "true" and t.properties["write.bucket.num"] == "4"
    with pytest.raises(TableExists):
        make(tmp_path)
    with pytest.raises(TableNotFound):
        Table.open(str(tmp_path / "missing"))
    with pytest.raises(SchemaError):
        Table.create(str(tmp_path / "x"), SCHEMA, ["nope"])
    assert Table.open(t.path).schema.field("id").nullable is False


def test_transaction_atomic_last_wins_and_rollback(tmp_path):
    t = make(tmp_path)
    with t.transaction() as tx:
        tx.upsert(data([1, 2, 3], 1))
        tx.upsert(data([2], 2))           # same key twice: last wins
        tx.delete([3])
    assert as_dict(t.scan()) == {1: ("n1", 1), 2: ("n2", 2)}
    assert t.version == 1
    with pytest.raises(RuntimeError):
        with t.transaction() as tx:
            tx.upsert(data([9], 9))
            raise RuntimeError("boom")
    assert t.version == 1 and 9 not in as_dict(t.scan())
    # a batch with one key twice resolves the same way
    t.insert_into(pa.table({"id": [5, 5, 5], "name": ["a", "b", "c"], "amount": [1, 2, 3]}))
    assert as_dict(t.scan())[5] == ("c", 3)
    with pytest.raises(SchemaError):
        t.upsert(pa.table({"id": [None], "name": ["x"], "amount": [1]}, schema=SCHEMA.remove(0).insert(0, pa.field("id", pa.int64()))))
    with pytest.raises(SchemaError):
        t.upsert(pa.table({"name": ["x"]}))


def test_files_are_plain_sorted_bucketed_parquet(tmp_path):
    t = make(tmp_path)
    t.upsert(data(list(range(100, 0, -1))))
    for f in t.plan():
        path = os.path.join(t.path, f.path)
        pf = pq.ParquetFile(path)
        assert pf.metadata.row_group(0).column(0).compression == "LZ4"
        tbl = pf.read()
        ids = tbl.column("id").to_pylist()
        assert ids == sorted(ids)
        assert set(tbl.column("_op").to_pylist()) == {0}
        assert set(bucket_ids(tbl, ["id"], 4).tolist()) == {f.bucket}
        assert f"bucket-{f.bucket:05d}" in f.path and f.kind == "delta" and f.level == 0
    # deletes keep the key, with _op = 1
    t.delete([5])
    f = [x for x in t.plan() if x.min_version == t.version][0]
    assert pq.read_table(os.path.join(t.path, f.path)).to_pylist() == [{"id": 5, "name": None, "amount": None, "_op": 1}]


def test_columns_without_nulls_are_stored_required(tmp_path):
    """A file's column holding no null is a REQUIRED Parquet column (cheaper to write and decode);
    one holding nulls stays OPTIONAL. Reads mix both and return the table's own schema."""
    t = make(tmp_path)
    t.insert_into(data([1, 2, 3]))
    t.upsert(pa.table({"id": pa.array([2], pa.int64()), "name": pa.array([None], pa.string()),
                       "amount": pa.array([7], pa.int64())}))
    seen = {}
    for f in t.plan():
        columns = pq.read_metadata(os.path.join(t.path, f.path)).schema
        for i in range(len(columns)):
            seen.setdefault((f.min_version, columns[i].name), set()).add(columns[i].max_definition_level)
    assert seen[(1, "name")] == {0} and seen[(1, "amount")] == {0} and seen[(1, "id")] == {0}
    assert seen[(2, "name")] == {1} and seen[(2, "amount")] == {0}
    assert as_dict(t.scan()) == {1: ("n1", 0), 2: (None, 7), 3: ("n3", 0)}
    assert t.scan().schema == pa.schema([SCHEMA.field("id").with_nullable(False), SCHEMA.field("name"),
                                         SCHEMA.field("amount")])
    t.compact()
    assert as_dict(t.scan()) == {1: ("n1", 0), 2: (None, 7), 3: ("n3", 0)}


def test_batch_writes_insert_overwrite_update_delete(tmp_path):
    t = make(tmp_path)
    t.insert_into(data([1, 2, 3, 4], 10))
    t.update(pa.table({"id": [2, 99], "amount": [20, 99]}))       # partial update; 99 does not exist
    assert as_dict(t.scan()) == {1: ("n1", 10), 2: ("n2", 20), 3: ("n3", 10), 4: ("n4", 10)}
    t.update(where=[("amount", "=", 10)], set={"name": "ten"})
    assert as_dict(t.scan()) == {1: ("ten", 10), 2: ("n2", 20), 3: ("ten", 10), 4: ("ten", 10)}
    t.delete(where=[("id", ">=", 3)])
    t.delete([1, 77])
    assert as_dict(t.scan()) == {2: ("n2", 20)}
    v = t.insert_overwrite(data([7, 8], 1))
    assert as_dict(t.scan()) == {7: ("n7", 1), 8: ("n8", 1)}
    ch = t.changes(v - 1, v)
    assert sorted((r["id"], r["_op"]) for r in ch.to_pylist()) == [(2, "delete"), (7, "upsert"), (8, "upsert")]
    ops = [h["operation"] for h in t.history()]
    assert ops == ["create", "insert", "update", "update", "delete", "delete", "overwrite"]


def test_snapshot_isolation_and_time_travel(tmp_path):
    t = make(tmp_path)
    t.upsert(data([1, 2], 1))
    v1 = t.version
    reader = Table.open(t.path)
    t.upsert(data([2, 3], 2))
    t.delete([1])
    assert as_dict(reader.scan(version=v1)) == {1: ("n1", 1), 2: ("n2", 1)}
    assert as_dict(reader.scan()) == {1: ("n1", 1), 2: ("n2", 1)}       # the version it loaded, until
    reader.refresh()                                                     # it looks for newer ones
    assert as_dict(reader.scan()) == {2: ("n2", 2), 3: ("n3", 2)}
    with pytest.raises(VersionNotFound):
        t.scan(version=99)
    with pytest.raises(VersionNotFound):
        t.scan(timestamp=1)
    v = t.restore(v1)
    assert as_dict(t.scan()) == {1: ("n1", 1), 2: ("n2", 1)}
    assert sorted((r["id"], r["_op"]) for r in t.changes(v - 1, v).to_pylist()) == [(1, "upsert"), (2, "upsert"), (3, "delete")]


def test_pruning_pk_equality_reads_one_bucket_and_minmax_skips(tmp_path):
    t = make(tmp_path, write_bucket_num=8)
    for i in range(5):
        t.upsert(data(list(range(i * 100, i * 100 + 100))))
    plan = t.plan(filter={"id": 250})
    assert len({f.bucket for f in plan}) == 1
    # min/max: within that bucket only the file holding ids 200..299 can match
    assert len(plan) == 1 and plan[0].min_version == 3
    assert t.scan(filter={"id": 250}).to_pylist() == [{"id": 250, "name": "n250", "amount": 0}]
    assert t.scan(filter=[("id", "in", [5, 405])]).num_rows == 2
    rng = t.plan(filter=[("id", ">=", 400)])
    assert {f.min_version for f in rng} == {5}
    assert t.scan(filter=[("id", ">=", 400)]).num_rows == 100
    assert len(t.plan()) > len(rng)
    # non-key filters are applied after the merge (a newer version must hide an older match)
    t.upsert(pa.table({"id": [1], "name": ["x"], "amount": [5]}))
    assert t.scan(filter=[("amount", "=", 0), ("id", "=", 1)]).num_rows == 0
    import pyarrow.compute as pc
    assert t.scan(filter=pc.field("amount") == 5, columns=["id"]).to_pylist() == [{"id": 1}]


def test_clustering_levels_keep_every_state(tmp_path):
    t = make(tmp_path, write_bucket_num=1, clustering_l0_num=3, clustering_l1_num=2)
    version_of = {}
    for i in range(3):
        version_of[i] = t.upsert(data([1, 2], i))
    assert [f.level for f in t.plan()] == [0, 0, 0]
    assert t.cluster(force=False) is not None            # 3 L0 files -> L1
    assert [f.level for f in t.plan()] == [1]
    l1 = pq.read_table(os.path.join(t.path, t.plan()[0].path))
    assert l1.num_rows == 6 and "_commit_version" in l1.column_names    # every intermediate state kept
    for i in range(3, 6):
        version_of[i] = t.upsert(data([1, 2], i))
    t.cluster(force=False)
    assert sorted(f.level for f in t.plan()) == [1, 1]
    t.cluster(force=False)                              # two L1 -> L2
    assert [f.level for f in t.plan()] == [2]
    assert as_dict(t.scan()) == {1: ("n1", 5), 2: ("n2", 5)}
    for i, v in version_of.items():                     # every old version still reads right
        assert as_dict(t.scan(version=v)) == {1: ("n1", i), 2: ("n2", i)}
    assert t.changes(0).num_rows == 12                  # increments ignore the clustered files


def test_clustering_skips_big_and_long_spanning_files(tmp_path):
    clock = ManualClock(10 * HOUR)
    t = make(tmp_path, clock, write_bucket_num=1, clustering_max_time_span_hours=1)
    t.upsert(data([1]))
    clock.now += 2 * HOUR
    t.upsert(data([2]))
    clock.now += 1
    t.upsert(data([3]))
    v = t.cluster()
    assert v is not None
    levels = sorted((f.level, f.rows) for f in t.plan())
    assert levels == [(0, 1), (1, 2)]                   # the file 2 h older is not merged with them
    # files at or above clustering.max.file.bytes are isolated
    big = make(tmp_path / "b", None, write_bucket_num=1, clustering_max_file_bytes=1)
    big.upsert(data([1]))
    big.upsert(data([2]))
    assert big.cluster() is None


def test_compaction_manual_and_automatic(tmp_path):
    t = make(tmp_path, compaction_delta_num=3, write_bucket_num=2)
    t.upsert(data([1, 2, 3, 4], 1))
    t.upsert(data([1, 2, 3, 4], 2))
    t.maintenance.wait()
    assert all(f.kind == "delta" for f in t.plan())
    t.upsert(data([1, 2, 3, 4], 3))                     # third delta per bucket: auto compaction
    t.maintenance.wait()                                # (in the background, after the commit)
    assert {f.kind for f in t.plan()} == {"base"}
    assert t.history()[-1]["operation"] == "compact"
    assert as_dict(t.scan()) == {i: (f"n{i}", 3) for i in (1, 2, 3, 4)}
    t.delete([1, 2, 3, 4])
    t.compact()
    assert t.scan().num_rows == 0 and all(f.rows == 0 for f in t.plan())
    assert t.compact() is None                          # nothing left to do
    t2 = make(tmp_path / "c", compaction_commit_num=2)
    t2.upsert(data([1]))
    t2.upsert(data([2]))
    t2.maintenance.wait()
    assert t2.history()[-1]["operation"] == "compact"


def test_schema_evolution_add_column(tmp_path):
    t = make(tmp_path)
    t.upsert(data([1, 2]))
    v_old = t.version
    t.add_column("note", pa.string())
    t.upsert(pa.table({"id": [3], "name": ["c"], "amount": [1], "note": ["hi"]}))
    got = {r["id"]: r["note"] for r in t.scan().to_pylist()}
    assert got == {1: None, 2: None, 3: "hi"}
    assert t.scan(version=v_old).column_names == ["id", "name", "amount"]
    t.compact()
    assert {r["id"]: r["note"] for r in t.scan().to_pylist()} == got
    with pytest.raises(SchemaError):
        t.add_column("note", pa.string())
    assert "note" in Table.open(t.path).schema.names


def test_stage_commit_idempotent_app_state(tmp_path):
    t = make(tmp_path)
    files = t.stage_files(data([1, 2]), op="upsert")
    assert t.version == 0 and t.scan().num_rows == 0     # staged files are invisible
    payload = json.loads(json.dumps([f.to_dict() for f in files]))
    v = t.commit_staged([DataFile.from_dict(d) for d in payload], operation="upsert",
                        app_id="q1", batch_id=0, app_extra={"offsets": {"0": 10}})
    assert t.app_state("q1") == {"batch_id": 0, "extra": {"offsets": {"0": 10}}, "version": v}
    again = t.stage_files(data([1, 2], 5))
    assert t.commit_staged(again, operation="upsert", app_id="q1", batch_id=0) == v   # replayed batch
    assert t.version == v and as_dict(t.scan())[1] == ("n1", 0)
    dels = t.stage_files(pa.table({"id": [1]}), op="delete")
    v2 = t.commit_staged(dels, operation="upsert", app_id="q1", batch_id=1, app_extra={"offsets": {"0": 12}})
    assert Table.open(t.path).app_state("q1")["extra"] == {"offsets": {"0": 12}}
    assert t.app_state("nobody") is None and v2 == v + 1 and 1 not in as_dict(t.scan())


def test_retention_expire_and_purge(tmp_path):
    clock = ManualClock(10 * HOUR)
    t = make(tmp_path, clock, acid_data_retain_hours=24, retention_auto="false")
    for h in range(30):                                  # one commit per hour
        clock.now = 10 * HOUR + h * HOUR
        t.upsert(data([h % 3], h))
        if h % 10 == 9:
            t.compact()
    clock.now = 10 * HOUR + 40 * HOUR                   # 24 h horizon = hour 16
    latest = as_dict(t.scan())
    v_old = t.history()[3]["version"]
    with pytest.raises(VersionExpired, match="retention horizon"):  # refused even before cleanup
        t.scan(version=v_old)
    n_files = sum(len(fs) for _, _, fs in os.walk(os.path.join(t.path, "data")))
    stats = t.expire()
    assert stats["files_removed"] > 0 and stats["log_entries_removed"] > 0
    assert sum(len(fs) for _, _, fs in os.walk(os.path.join(t.path, "data"))) < n_files
    with pytest.raises(VersionExpired):
        t.scan(version=v_old)
    with pytest.raises(VersionExpired):
        t.changes(start_version=v_old)
    h = stats["horizon"]
    reopened = Table.open(t.path, clock=clock)
    assert as_dict(reopened.scan()) == latest
    assert reopened.scan(version=h).num_rows > 0            # the horizon version is still readable
    assert reopened.changes(start_version=h - 1).num_rows > 0
    assert min(x["version"] for x in reopened.history()) == h
    reopened.purge()
    assert as_dict(reopened.scan()) == latest
    with pytest.raises(VersionExpired):
        reopened.scan(version=reopened.version - 1)
    live = {f.path for f in reopened.plan()}
    on_disk = {os.path.relpath(os.path.join(d, f), t.path) for d, _, fs in os.walk(os.path.join(t.path, "data")) for f in fs}
    assert on_disk == live


def test_automatic_retention(tmp_path):
    clock = ManualClock(10 * HOUR)
    t = make(tmp_path, clock, acid_data_retain_hours=1, write_bucket_num=1, retention_check_commit_num=1)
    t.upsert(data([1], 1))
    t.upsert(data([1], 2))
    t.compact()
    clock.now += 2 * HOUR
    t.upsert(data([1], 3))                               # triggers automatic cleanup
    t.maintenance.wait()
    assert len(os.listdir(os.path.join(t.path, "data", "bucket-00000"))) == 2
    with pytest.raises(VersionExpired):
        t.scan(version=1)
    assert as_dict(t.scan()) == {1: ("n1", 3)}


def test_checkpoints_reopen(tmp_path):
    t = make(tmp_path, checkpoint_interval=3)
    for i in range(10):
        t.upsert(data([i], i))
    assert any(n.endswith(".checkpoint.json") for n in os.listdir(os.path.join(t.path, "_tidelake_log")))
    r = Table.open(t.path)
    assert r.version == 10 and as_dict(r.scan()) == as_dict(t.scan())
    assert as_dict(r.scan(version=4)) == {i: (f"n{i}", i) for i in range(4)}


def test_bucket_hash_is_stable():
    """Existing tables depend on it: a change of the hash would put keys in the wrong bucket."""
    assert bucket_ids(pa.table({"id": pa.array([0, 1, 2, 3, -1, 10**12], pa.int64())}), ["id"], 16).tolist() == [0, 2, 8, 12, 13, 1]
    assert bucket_ids(pa.table({"id": pa.array([0, 1, 2, 3], pa.int32())}), ["id"], 16).tolist() == [0, 2, 8, 12]
    assert bucket_ids(pa.table({"s": ["a", "b", "tidelake"]}), ["s"], 16).tolist() == [6, 12, 7]
    assert bucket_ids(pa.table({"a": [1, 2, 3], "b": [7, 7, 9]}), ["a", "b"], 10).tolist() == [3, 9, 7]
    assert bucket_ids(pa.table({"r": ["eu", "us", "eu"], "d": pa.array([19723, 19724, 19724], pa.int32()).cast(pa.date32())}),
                      ["r", "d"], 8).tolist() == [2, 6, 5]


def test_map_in_groups_keeps_the_order_of_the_items():
    from concurrent.futures import ThreadPoolExecutor
    from tidelake.table.files import map_in_groups
    with ThreadPoolExecutor(3) as pool:
        for n, groups in [(16, 2), (7, 3), (2, 5), (1, 2), (0, 2), (5, 1)]:
            assert map_in_groups(lambda x: x * 10, list(range(n)), pool, groups) == [x * 10 for x in range(n)]


def test_map_in_groups_raises_the_first_failure_and_stops_claiming():
    from concurrent.futures import ThreadPoolExecutor
    from tidelake.table.files import map_in_groups
    seen = []

    def fn(x):
        seen.append(x)
        if x == 3:
            raise ValueError("item 3")
        return x
    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(ValueError, match="item 3"):
            map_in_groups(fn, list(range(1000)), pool, 2)
    assert len(seen) < 1000     # the other thread stopped claiming once one failed


def test_map_in_groups_runs_on_the_caller_when_the_pool_is_busy():
    """With every pool thread busy, the caller maps every item itself and does not wait for the
    queued helper task (which would deadlock a caller that is itself on the pool)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from tidelake.table.files import map_in_groups
    release = threading.Event()
    result = []
    with ThreadPoolExecutor(1) as pool:
        pool.submit(release.wait, 120)
        caller = threading.Thread(target=lambda: result.append(map_in_groups(lambda x: x + 1, [1, 2, 3], pool, 2)))
        caller.start()
        caller.join(20)          # a bound on the wait, not a timing: it finishes at once or never
        finished = not caller.is_alive()
        release.set()
        caller.join()
    assert finished, "map_in_groups waited for a helper task queued behind a busy pool"
    assert result == [[2, 3, 4]]


def _fmix(h):
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint64(33))
        h = h * np.uint64(0xFF51AFD7ED558CCD)
        h = h ^ (h >> np.uint64(33))
        h = h * np.uint64(0xC4CEB9FE1A85EC53)
        return h ^ (h >> np.uint64(33))


def test_bucket_hash_matches_the_whole_array_formula_across_blocks():
    """bucket_ids works block by block; on 40,000 rows (several blocks) it gives what the formula
    h = fmix(h * 31 + fmix(int64 value)) computed on whole arrays gives, in any integer dtype."""
    rng = np.random.default_rng(7)
    n = 40_000
    t = pa.table({"a": pa.array(rng.integers(-10**12, 10**12, n)), "b": pa.array(rng.integers(0, 100, n).astype(np.int16))})
    with np.errstate(over="ignore"):
        h = _fmix(_fmix(t.column("a").to_numpy().view(np.uint64)))
        h = _fmix(h * np.uint64(31) + _fmix(t.column("b").to_numpy().astype(np.int64).view(np.uint64)))
    for buckets in (7, 16, 300):
        expected = (h % np.uint64(buckets)).astype(np.int64)
        assert (bucket_ids(t, ["a", "b"], buckets).astype(np.int64) == expected).all()
        counts = np.zeros(buckets, np.int64)
        assert (bucket_ids(t, ["a", "b"], buckets, np.uint16, counts).astype(np.int64) == expected).all()
        assert (counts == np.bincount(expected, minlength=buckets)).all()


@pytest.mark.parametrize("ids", [list(range(0, 3000, 3)), list(range(3000, 0, -1)), [1, 2, 2, 3] * 200 + [4],
                                 sorted([5, 1, 3] * 50)])
def test_staged_files_are_key_sorted_and_unique_whatever_the_arrival_order(tmp_path, ids):
    """Keys arriving in strictly increasing order are written as they come; any other order (or a
    repeated key) is sorted and deduplicated per bucket. Both give the same files' contents."""
    t = make(tmp_path)
    t.insert_into(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in range(len(ids))],
                            "amount": pa.array(range(len(ids)), pa.int64())}))
    last = {k: i for i, k in enumerate(ids)}
    seen = []
    for f in t.plan():
        tbl = pq.read_table(os.path.join(t.path, f.path))
        keys = tbl.column("id").to_pylist()
        assert keys == sorted(set(keys))
        assert set(bucket_ids(tbl, ["id"], 4).tolist()) == {f.bucket}
        assert tbl.column("amount").to_pylist() == [last[k] for k in keys]   # the last row of each key
        seen += keys
    assert sorted(seen) == sorted(last)


def test_composite_key_string_and_date(tmp_path):
    import datetime
    schema = pa.schema([("region", pa.string()), ("day", pa.date32()), ("total", pa.int64())])
    t = Table.create(str(tmp_path / "c"), schema, ["region", "day"], {"write.bucket.num": "8", "clustering.auto": "false"})
    d1, d2 = datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)
    t.upsert([{"region": r, "day": d, "total": 1} for r in ("eu", "us", "apac") for d in (d1, d2)])
    with t.transaction() as tx:
        tx.upsert([{"region": "eu", "day": d1, "total": 5}])
        tx.delete([("us", d2)])
    got = {(r["region"], r["day"]): r["total"] for r in t.scan().to_pylist()}
    assert got == {("eu", d1): 5, ("eu", d2): 1, ("us", d1): 1, ("apac", d1): 1, ("apac", d2): 1}
    plan = t.plan(filter=[("region", "=", "eu"), ("day", "=", d1)])
    assert len({f.bucket for f in plan}) == 1
    assert t.scan(filter=[("region", "=", "eu"), ("day", "=", d1)]).to_pylist() == [{"region": "eu", "day": d1, "total": 5}]
    t.compact()
    assert {(r["region"], r["day"]): r["total"] for r in t.scan().to_pylist()} == got


def test_follow_reads_each_new_increment_once(tmp_path):
    """SPEC T13: a downstream job driven by new commits reads exactly the new increments."""
    import threading
    t = make(tmp_path)
    done = threading.Event()

    def writer():
        w = Table.open(t.path)
        for i in range(6):
            w.upsert(data([i, 100 + i], i))
        done.set()
    th = threading.Thread(target=writer)
    th.start()
    seen, ranges = [], []
    for start, end, ch in t.follow(0, poll_seconds=0.01, stop=lambda: done.is_set() and t.refresh() == (ranges[-1][1] if ranges else -1)):
        ranges.append((start, end))
        seen += [(r["_commit_version"], r["id"]) for r in ch.to_pylist()]
        assert len(ranges) < 100
    th.join(60)
    assert ranges[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert sorted(seen) == sorted((i + 1, k) for i in range(6) for k in (i, 100 + i))
