"""The key ordering shared by the readers, the writer and compaction: the packed integer sort must
give exactly numpy's stable argsort, whatever the dtype and range of the keys."""
import numpy as np
import pyarrow as pa
import pytest

from tidelake.table.key_order import first_indices, first_of_each_key, sort_indices_by_key, stable_argsort

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_stable_argsort_is_numpys_stable_argsort(dtype):
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    ranges = [(info.min, info.max),                 # too wide to pack for 64-bit types: the fallback
              (0, 10), (info.min, info.min + 5), (info.max - 5, info.max), (-3 if info.min < 0 else 0, 3)]
    for n in (0, 1, 2, 3, 17, 1000, 70_000):
        for lo, hi in ranges:
            keys = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
            got = stable_argsort(keys)
            assert got.dtype == np.int64
            assert np.array_equal(got, np.argsort(keys, kind="stable")), (dtype, n, lo, hi)


def test_sorted_runs_with_repeats_keep_row_order_among_equal_keys():
    keys = np.array([5, 9, 12, 1, 5, 9, 5], dtype=np.int64)   # three sorted runs, 5 three times
    assert stable_argsort(keys).tolist() == [3, 0, 4, 6, 1, 5, 2]
    assert first_of_each_key(keys).tolist() == [3, 0, 1, 2]


def test_first_indices_and_key_order_for_integer_and_other_keys():
    t = pa.table({"id": pa.array([3, 1, 3, 2, 1], pa.int64())})
    assert np.asarray(first_indices(t, ["id"])).tolist() == [1, 3, 0]
    assert np.asarray(sort_indices_by_key(t, ["id"])).tolist() == [1, 4, 3, 0, 2]
    s = pa.table({"k": ["b", "a", "b", "c", "a"]})
    assert sorted(np.asarray(first_indices(s, ["k"])).tolist()) == [0, 1, 3]
    assert np.asarray(sort_indices_by_key(s, ["k"])).tolist() == [1, 4, 0, 2, 3]
