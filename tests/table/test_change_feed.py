"""Table.changes(before_images=True): Delta's change data feed (insert / update_preimage / update_postimage /
delete) with the images looked up in the table as of the range start."""
from __future__ import annotations

import pyarrow as pa
import pytest

from tidelake.table import Table, VersionExpired
from tidelake.table.change_feed import CHANGE_TYPES
from tests.table.manual_clock import HOUR, ManualClock

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.int64())])


def make(tmp_path, schema=SCHEMA, pk=("id",), clock=None, **props) -> Table:
    p = {"write.bucket.num": "4", "clustering.auto": "false", "maintenance.mode": "inline"}
    p.update({k.replace("_", "."): str(v) for k, v in props.items()})
    return Table.create(str(tmp_path / "t"), schema, list(pk), p, clock=clock)


def data(ids, amount=0, name="n"):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{name}{i}" for i in ids],
                     "amount": pa.array([amount] * len(ids), pa.int64())})


def feed(t: Table, start: int, end: int | None = None, **kw) -> list[tuple]:
    ch = t.changes(start, end, before_images=True, **kw)
    return [(r["_commit_version"], r["id"], r["_op"], r.get("name"), r.get("amount")) for r in ch.to_pylist()]


def test_insert_update_delete_carry_their_images(tmp_path):
    t = make(tmp_path)
    v1 = t.upsert(data([1, 2, 3], 10))
    v2 = t.upsert(data([2, 4], 20, name="m"))          # 2 existed, 4 is new
    v3 = t.delete([3])
    assert feed(t, v1 - 1, v1) == [(v1, 1, "insert", "n1", 10), (v1, 2, "insert", "n2", 10),
                                   (v1, 3, "insert", "n3", 10)]
    assert feed(t, v1, v2) == [(v2, 2, "update_preimage", "n2", 10), (v2, 2, "update_postimage", "m2", 20),
                               (v2, 4, "insert", "m4", 20)]
    assert feed(t, v2, v3) == [(v3, 3, "delete", "n3", 10)]      # the row the delete removed, not a bare key
    ch = t.changes(v1, v3, before_images=True)
    assert ch.column_names == ["id", "name", "amount", "_op", "_commit_version", "_commit_time"]
    assert ch.schema.field("_op").type == pa.string()
    assert set(ch.column("_op").to_pylist()) <= set(CHANGE_TYPES)
    # the same range without before-images is unchanged
    assert [(r["id"], r["_op"]) for r in t.changes(v1, v3).to_pylist()] == [(2, "upsert"), (4, "upsert"),
                                                                            (3, "delete")]


@pytest.mark.parametrize("producer", ["none", "lookup"])   # (images looked up when read / stored)
def test_several_changes_of_a_key_in_one_range_chain_their_images(tmp_path, producer):
    t = make(tmp_path, changelog_producer=producer)
    v0 = t.upsert(data([1], 1))
    t.upsert(data([1], 2))
    t.delete([1])
    v3 = t.upsert(data([1], 3))
    assert [(op, amount) for _, _, op, _, amount in feed(t, v0, v3)] == [
        ("update_preimage", 1), ("update_postimage", 2), ("delete", 2), ("insert", 3)]
    # from the creation: the first change is an insert (version 0 is the empty table)
    assert [op for _, _, op, _, _ in feed(t, 0, v3)] == ["insert", "update_preimage", "update_postimage", "delete",
                                                         "insert"]


def test_delete_of_a_missing_key_yields_nothing(tmp_path):
    t = make(tmp_path)
    v1 = t.upsert(data([1], 1))
    with t.transaction() as tx:            # a blind delete: key 2 never existed
        tx.delete([1, 2])
    assert feed(t, v1, tx.version) == [(tx.version, 1, "delete", "n1", 1)]
    assert sorted(r["id"] for r in t.changes(v1, tx.version).to_pylist()) == [1, 2]


def test_images_come_from_compacted_and_clustered_state(tmp_path):
    t = make(tmp_path)
    for i in range(4):
        t.upsert(data(list(range(i * 10, i * 10 + 20)), i))
    t.cluster()
    t.compact([0, 1])
    t.upsert(data(list(range(5, 15)), 1))
    v = t.upsert(data(list(range(0, 60, 3)), 100))
    start = v - 1
    before = {r["id"]: r for r in t.scan(version=start).to_pylist()}
    after = {r["id"]: r for r in t.scan(version=v).to_pylist()}
    got = feed(t, start, v)
    expected = []
    for k in range(0, 60, 3):
        if k in before:
            expected += [(v, k, "update_preimage", before[k]["name"], before[k]["amount"]),
                         (v, k, "update_postimage", after[k]["name"], after[k]["amount"])]
        else:
            expected.append((v, k, "insert", after[k]["name"], after[k]["amount"]))
    assert got == expected
    # compaction and clustering versions carry no changes
    maintenance = [h["version"] for h in t.history() if h["operation"] in ("cluster", "compact")]
    assert maintenance and all(feed(t, m - 1, m) == [] for m in maintenance)


@pytest.mark.parametrize("producer", ["none", "lookup"])   # (images looked up when read / stored)
def test_composite_string_key_columns_and_filter(tmp_path, producer):
    schema = pa.schema([("region", pa.string()), ("id", pa.int32()), ("amount", pa.int64())])
    t = make(tmp_path, schema=schema, pk=("region", "id"), changelog_producer=producer)
    v1 = t.upsert(pa.table({"region": ["eu", "eu", "us"], "id": pa.array([1, 2, 1], pa.int32()),
                            "amount": [1, 2, 3]}))
    v2 = t.upsert(pa.table({"region": ["eu", "us", "us"], "id": pa.array([2, 1, 2], pa.int32()),
                            "amount": [20, 30, 40]}))
    ch = t.changes(v1, v2, before_images=True, columns=["region", "id", "amount"])
    assert [(r["region"], r["id"], r["_op"], r["amount"]) for r in ch.to_pylist()] == [
        ("eu", 2, "update_preimage", 2), ("eu", 2, "update_postimage", 20),
        ("us", 1, "update_preimage", 3), ("us", 1, "update_postimage", 30), ("us", 2, "insert", 40)]
    # a filter on a value column keeps the images it matches (a preimage may match where its postimage does not)
    ch = t.changes(v1, v2, before_images=True, filter=[("amount", "<", 10)])
    assert [(r["region"], r["id"], r["_op"]) for r in ch.to_pylist()] == [("eu", 2, "update_preimage"),
                                                                         ("us", 1, "update_preimage")]
    # a filter on the key prunes
    ch = t.changes(v1, v2, before_images=True, filter=[("region", "=", "us"), ("id", "=", 1)])
    assert [r["_op"] for r in ch.to_pylist()] == ["update_preimage", "update_postimage"]


@pytest.mark.parametrize("producer", ["none", "lookup"])   # (images looked up when read / stored)
def test_column_added_in_the_range_reads_null_in_older_images(tmp_path, producer):
    t = make(tmp_path, changelog_producer=producer)
    v1 = t.upsert(data([1], 1))
    t.add_column("note", pa.string())
    v3 = t.upsert(pa.table({"id": [1], "name": ["x"], "amount": [2], "note": ["hi"]}))
    rows = t.changes(v1, v3, before_images=True).to_pylist()
    assert [(r["_op"], r["note"]) for r in rows] == [("update_preimage", None), ("update_postimage", "hi")]


def test_start_version_expired_by_retention_names_the_property(tmp_path):
    clock = ManualClock(10 * HOUR)
    t = make(tmp_path, clock=clock, acid_data_retain_hours=1, retention_auto="false")
    t.upsert(data([1], 1))
    clock.now += HOUR
    t.upsert(data([1], 2))
    v = t.upsert(data([1], 3))
    clock.now += 2 * HOUR
    t.upsert(data([1], 4))
    t.expire()
    horizon = t.history()[0]["version"]
    with pytest.raises(VersionExpired, match="acid.data.retain.hours"):
        t.changes(horizon - 1, before_images=True)
    assert [op for _, _, op, _, _ in feed(t, horizon)] == ["update_preimage", "update_postimage"]
    assert horizon > v - 1


@pytest.mark.parametrize("producer", ["none", "lookup"])   # (images looked up when read / stored)
def test_overwrite_and_restore_read_as_the_changes_they_are(tmp_path, producer):
    t = make(tmp_path, changelog_producer=producer)
    v1 = t.upsert(data([1, 2], 1))
    v2 = t.insert_overwrite(data([2, 3], 5))
    assert [(k, op) for _, k, op, _, _ in feed(t, v1, v2)] == [
        (1, "delete"), (2, "update_preimage"), (2, "update_postimage"), (3, "insert")]
    v3 = t.restore(v1)
    assert [(k, op, amount) for _, k, op, _, amount in feed(t, v2, v3)] == [
        (1, "insert", 1), (2, "update_preimage", 5), (2, "update_postimage", 1), (3, "delete", 5)]


def test_changes_of_a_string_key_are_ordered_by_it(tmp_path):
    # (a string key column was read dictionary-encoded, which Arrow's sort refuses)
    schema = pa.schema([("region", pa.string()), ("amount", pa.int64())])
    t = make(tmp_path, schema=schema, pk=("region",))
    v1 = t.upsert(pa.table({"region": ["us", "eu", "ap"], "amount": [1, 2, 3]}))
    assert t.changes(v1 - 1, v1).column("region").to_pylist() == ["ap", "eu", "us"]


def test_changes_bucket_by_bucket_add_up_to_the_whole(tmp_path):
    t = make(tmp_path)
    v1 = t.upsert(data(list(range(40)), 1))
    t.delete(list(range(0, 40, 4)))
    v3 = t.upsert(data(list(range(20, 60)), 2))
    for before_images in (False, True):
        whole = t.changes(v1, v3, before_images=before_images)
        parts = [t.changes(v1, v3, before_images=before_images, buckets={b}) for b in range(t.bucket_num)]
        assert all(p.num_rows for p in parts)
        key = lambda r: (r["_commit_version"], r["id"], r["_op"])   # noqa: E731
        assert sorted((r for p in parts for r in p.to_pylist()), key=key) == sorted(whole.to_pylist(), key=key)


def expected_feed(t: Table, start: int, end: int) -> list[tuple]:
    """The change feed of (start, end] worked out from snapshots (the merge-on-read path): each version's
    changes against the table as of the version before it."""
    out = []
    for v in range(start + 1, end + 1):
        before = {r["id"]: r for r in t.scan(version=v - 1).to_pylist()}
        for r in t.changes(v - 1, v).to_pylist():
            old = before.get(r["id"])
            if r["_op"] == "delete":
                if old is not None:
                    out.append((v, r["id"], "delete", old["name"], old["amount"]))
            elif old is None:
                out.append((v, r["id"], "insert", r["name"], r["amount"]))
            else:
                out += [(v, r["id"], "update_preimage", old["name"], old["amount"]),
                        (v, r["id"], "update_postimage", r["name"], r["amount"])]
    return out


def test_random_history_matches_the_feed_worked_out_from_snapshots(tmp_path):
    import numpy as np
    rng = np.random.default_rng(7)
    t = make(tmp_path)
    for step in range(14):
        with t.transaction() as tx:
            tx.upsert(data(sorted(rng.choice(200, 30, replace=False).tolist()), step, name=f"s{step}-"))
            tx.delete(sorted(rng.choice(220, 10, replace=False).tolist()))   # some never existed
        if step == 6:
            t.compact([0, 2])             # base files in some buckets, deltas on top of them later
    end = t.version
    for start in (0, 3, 7, end - 1):
        assert feed(t, start, end) == expected_feed(t, start, end), start


def test_follow_yields_each_increment_with_its_images(tmp_path):
    t = make(tmp_path)
    v1 = t.upsert(data([1, 2], 1))
    v2 = t.upsert(data([2], 2))
    got = [(s, e, ch.column("_op").to_pylist())
           for s, e, ch in t.follow(v1 - 1, idle_timeout=0, poll_seconds=0, before_images=True)]
    assert got == [(v1 - 1, v2, ["insert", "insert", "update_preimage", "update_postimage"])]


# ---------------------------------------------------------------- changelog.producer=lookup: stored images

def change_files_on_disk(t: Table) -> set[str]:
    root = tmp = t.path
    return {str(p.relative_to(root)) for p in __import__("pathlib").Path(tmp).glob("data/*/change-*.parquet")}


def data_commit_deltas(t: Table) -> list:
    md = t.metadata
    return [fe.file for fe in md.files.values() if fe.file.kind == "delta" and fe.file.level == 0]


def test_stored_images_give_the_feed_worked_out_from_snapshots_over_a_random_history(tmp_path):
    import numpy as np
    tables = {producer: make(tmp_path / producer, changelog_producer=producer) for producer in ("none", "lookup")}
    for t in tables.values():
        rng = np.random.default_rng(11)
        for step in range(12):
            with t.transaction() as tx:
                tx.upsert(data(sorted(rng.choice(200, 30, replace=False).tolist()), step, name=f"s{step}-"))
                tx.delete(sorted(rng.choice(220, 10, replace=False).tolist()))   # some never existed
            if step == 4:
                t.compact([0, 2])
            if step == 8:
                t.cluster()
        t.update(data([5, 6, 7], 99))
        t.delete(where=pa.compute.field("amount") == 3)
        t.insert_overwrite(data(list(range(0, 120, 2)), 50, name="o"))   # rows and tombstones: 2 deltas a bucket
        t.upsert(data([1, 2, 3], 51))
        t.restore(t.version - 3)
    plain, stored = tables["none"], tables["lookup"]
    # every data commit of the property's table wrote its images; none of the other's did
    assert all(f.changes for f in data_commit_deltas(stored)) and data_commit_deltas(stored)
    assert not any(f.changes for f in data_commit_deltas(plain))
    assert change_files_on_disk(stored) == {f.changes for f in data_commit_deltas(stored)}
    end = stored.version
    assert plain.version == end
    for start in (0, 3, 7, end - 1):
        assert feed(stored, start, end) == feed(plain, start, end) == expected_feed(stored, start, end), start
    for b in range(stored.bucket_num):
        assert feed(stored, 2, end, buckets={b}) == feed(plain, 2, end, buckets={b})
    kw = dict(filter=[("id", "<", 50)], columns=["id", "amount"])
    assert (stored.changes(3, end, before_images=True, **kw).drop_columns(["_commit_time"]) ==
            plain.changes(3, end, before_images=True, **kw).drop_columns(["_commit_time"]))   # (two clocks)


def test_versions_without_stored_images_fall_back_to_the_lookup(tmp_path):
    t = make(tmp_path)
    t.upsert(data([1, 2, 3], 1))
    t.upsert(data([2, 4], 2))
    t.set_properties({"changelog.producer": "lookup"})
    t.upsert(data([3, 4, 5], 3))
    t.delete([1, 9])
    t.set_properties({"changelog.producer": "none"})
    t.upsert(data([5, 6], 4))
    t.set_properties({"changelog.producer": "lookup"})
    end = t.upsert(data([6, 2], 5))
    with_images = sorted({f.min_version for f in data_commit_deltas(t) if f.changes})
    assert with_images == [4, 5, 9]   # (versions 3, 6, 8 set the property)
    for start in range(0, end):
        assert feed(t, start, end) == expected_feed(t, start, end), start


def test_a_commit_that_loses_its_version_looks_its_images_up_again(tmp_path, monkeypatch):
    a = make(tmp_path, changelog_producer="lookup")
    b = Table.open(a.path, maintenance="inline")      # another writer (its own committer, as another process)
    v1 = a.upsert(data([1, 2, 3], 1))
    writer = a.committer.change_files
    write = writer.write
    attempts = []

    def racing_write(md, adds):
        out = write(md, adds)
        attempts.append(md.version)
        if len(attempts) == 1:   # the other writer takes this version while this attempt's images are written
            b.upsert(data([2, 3], 2, name="b"))
        return out
    monkeypatch.setattr(writer, "write", racing_write)
    with a.transaction() as tx:                       # a blind upsert read at v1: no conflict, a retry
        tx.upsert(data([2, 4], 3, name="a"))
    assert attempts == [v1, v1 + 1] and tx.version == v1 + 2
    # the preimage of key 2 is the other writer's row (the state published on), not the one read at v1
    assert feed(a, v1 + 1, tx.version) == [(tx.version, 2, "update_preimage", "b2", 2),
                                           (tx.version, 2, "update_postimage", "a2", 3),
                                           (tx.version, 4, "insert", "a4", 3)]
    assert feed(a, 0, tx.version) == expected_feed(a, 0, tx.version)
    # the losing attempt's change files were deleted
    assert change_files_on_disk(a) == {f.changes for f in data_commit_deltas(a)}
    b.close()


def test_retention_deletes_change_files_with_their_deltas(tmp_path):
    clock = ManualClock(10 * HOUR)
    t = make(tmp_path, clock=clock, changelog_producer="lookup", acid_data_retain_hours=1, retention_auto="false")
    for i in range(3):
        t.upsert(data([1, 2, i + 3], i))
        clock.now += 60_000
    old = {f.changes for f in data_commit_deltas(t)}
    t.compact()
    clock.now += 60_000
    last = t.upsert(data([2], 9))
    clock.now += 2 * HOUR          # the compaction is past the horizon; the upsert after it is the latest
    t.expire()
    left = change_files_on_disk(t)
    assert not (left & old)        # gone with the deltas the compaction replaced
    assert left == {f.changes for f in data_commit_deltas(t)} and len(left) == 1   # kept: not an orphan
    after = t.upsert(data([2], 10))
    assert feed(t, last, after) == [(after, 2, "update_preimage", "n2", 9), (after, 2, "update_postimage", "n2", 10)]


def test_a_bad_changelog_property_is_refused_naming_it(tmp_path):
    from tidelake.table import TableError
    with pytest.raises(TableError, match="changelog.producer: 'input'"):
        make(tmp_path, changelog_producer="input")
    t = make(tmp_path / "ok")
    with pytest.raises(TableError, match="changelog.producer: 'full-compaction'"):
        t.set_properties({"changelog.producer": "full-compaction"})
    with pytest.raises(TableError, match="changelog.lookup.cache.bytes: '1GB'"):
        t.set_properties({"changelog.lookup.cache.bytes": "1GB"})


def test_decoded_files_keep_the_most_recently_used_within_their_limit():
    from tidelake.table.key_lookup import DecodedFiles
    t = pa.table({"id": pa.array(range(100), pa.int64())})       # 800 bytes
    cache = DecodedFiles(2_000)
    reads = []

    def read(name):
        return lambda: reads.append(name) or t
    for name in ("a", "b", "a", "c", "a", "b"):                 # c evicts b (a was used more recently)
        assert cache.get((name,), read(name)) is t
    assert reads == ["a", "b", "c", "b"]
    cache.get(("big",), lambda: pa.table({"id": pa.array(range(300), pa.int64())}))   # over the limit: not kept
    assert cache.get(("a",), read("a")) is t and reads == ["a", "b", "c", "b"]
    cache.resize(1_000)                                         # room for one: the least recently used goes
    assert cache.get(("a",), read("a")) is t and cache.get(("b",), read("b")) is t
    assert reads == ["a", "b", "c", "b", "b"]
