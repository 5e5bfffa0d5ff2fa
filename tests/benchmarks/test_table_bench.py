"""The before-images benchmark (benchmarks/table_bench.py --only images, issue 24's 6(c)) still runs on its
workload and reads the rows it should: every change of the last upsert, its updates as preimage + postimage,
from stored images and looked up alike; and it times the upserts with and without stored images and delta-rs's."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import table_bench as bench  # noqa: E402


def test_before_images_benchmark_runs_on_a_small_workload(tmp_path):
    lines = bench.bench_before_images(str(tmp_path), 2_000, 200, 5, 20, np.random.default_rng(42), repeat=1)
    assert lines[2].startswith("| stored images (`changelog.producer=lookup`), first call in the process |")
    assert lines[4].startswith("| looked up when read (`changelog.producer=none`), median of 1, alternated |")
    assert lines[6].startswith("Rows: 200 changes; 300 with before-images (100 inserts, 100 updates")
    assert [line.split(" |")[0] for line in lines[-5:-2]] == [
        "| tidelake, `changelog.producer=none`", "| tidelake, `changelog.producer=lookup`",
        "| delta-rs MERGE (change data feed on)"]
