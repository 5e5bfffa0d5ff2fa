"""The pipeline benchmark's baseline job (benchmarks/pipeline_throughput.py) still runs against the
pipeline's own parse task, and writes every event it read, parsed."""
from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.dataset as ds

from spark_fixtures import spark  # noqa: F401  (fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import pipeline_throughput as bench  # noqa: E402


def test_baseline_parses_every_benchmark_event(tmp_path, spark):  # noqa: F811
    records, keys = 40, 20
    values = [bench.event(i, keys, 0) for i in range(records)]
    parts = [(i % keys) % bench.PARTITIONS for i in range(records)]
    offsets, seen = [], [0] * bench.PARTITIONS
    for p in parts:
        offsets.append(seen[p])
        seen[p] += 1
    seconds, batches = bench.run_baseline(spark, (values, parts, offsets), tmp_path, "t", batch=1000)
    assert batches == 1 and seconds > 0
    out = ds.dataset(str(tmp_path / "t-baseline-out"), format="parquet").to_table()
    assert sorted(out.column("id").to_pylist()) == sorted(list(range(keys)) * 2)   # every event, parsed
