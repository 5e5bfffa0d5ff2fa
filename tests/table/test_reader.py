"""The merge-on-read helpers on their own: which rows of an older file survive newer keys."""
import numpy as np
import pyarrow as pa

from tidelake.table import Table
from tidelake.table.reader import without_keys


def _ids(t: pa.Table) -> list[int]:
    return t.column("id").to_pylist()


def test_without_keys_drops_exactly_the_named_keys_in_any_order():
    older = pa.table({"id": pa.array([1, 3, 5, 7, 9], pa.int64()), "v": ["a", "b", "c", "d", "e"]})
    for keys in [[3, 9, 20], [20, 9, 0, 3], [], [0, 2, 4], [1, 3, 5, 7, 9]]:
        newer = pa.table({"id": pa.array(keys, pa.int64())})
        kept = without_keys(older, newer, ["id"])
        assert _ids(kept) == [k for k in [1, 3, 5, 7, 9] if k not in keys], keys
        assert kept.column("v").to_pylist() == [v for k, v in zip([1, 3, 5, 7, 9], "abcde") if k not in keys]


def test_without_keys_on_an_unsorted_older_part_and_string_keys():
    older = pa.table({"id": pa.array([9, 1, 5], pa.int64())})
    assert _ids(without_keys(older, pa.table({"id": pa.array([5, 2], pa.int64())}), ["id"])) == [9, 1]
    s = pa.table({"k": ["b", "a", "c"]})
    assert without_keys(s, pa.table({"k": ["c", "x"]}), ["k"]).column("k").to_pylist() == ["b", "a"]
    rng = np.random.default_rng(5)
    mine = np.sort(rng.choice(10_000, 3_000, replace=False))
    theirs = rng.choice(20_000, 2_000, replace=False)   # half of them beyond the older part's range
    kept = without_keys(pa.table({"id": mine}), pa.table({"id": np.sort(theirs)}), ["id"])
    assert _ids(kept) == [k for k in mine.tolist() if k not in set(theirs.tolist())]


def test_the_key_range_bitmap_and_the_key_merge_read_the_same_rows(tmp_path):
    """A base and L0 deltas (upserts, deletes, keys beyond the base's range): merged by the bitmap over the
    key range (dense keys), and by sort and search (the same changes on keys spread too far for a bitmap)."""
    rng = np.random.default_rng(11)
    for spread in (1, 10**9):
        t = Table.create(str(tmp_path / f"t{spread}"), pa.schema([("id", pa.int64()), ("v", pa.int64())]), ["id"],
                         {"write.bucket.num": "2", "clustering.auto": "false"})
        want = {}
        t.upsert(pa.table({"id": np.arange(200) * spread, "v": np.zeros(200, np.int64)}))
        want.update({k * spread: 0 for k in range(200)})
        t.compact()
        for step in range(1, 6):
            ids = rng.choice(260, 40, replace=False)
            t.upsert(pa.table({"id": ids * spread, "v": np.full(40, step)}))
            want.update({int(k) * spread: step for k in ids})
            gone = rng.choice(260, 10, replace=False)
            t.delete((gone * spread).tolist())
            for k in gone:
                want.pop(int(k) * spread, None)
        assert len(t.plan()) > 2   # (a base and deltas: merged on read)
        assert sorted((r["id"], r["v"]) for r in t.scan().to_pylist()) == sorted(want.items())
        assert sorted(r["id"] for r in t.scan(filter=[("id", "<", 100 * spread)]).to_pylist()) == \
            sorted(k for k in want if k < 100 * spread)
        t.close()
