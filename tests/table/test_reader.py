"""The merge-on-read helpers on their own: which rows of an older file survive newer keys."""
import numpy as np
import pyarrow as pa

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
