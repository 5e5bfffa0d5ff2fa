"""Incremental refresh vs full recompute of an aggregate table pipeline (issue 24 item 6a).

    .venv/bin/python benchmarks/chain_refresh.py [--sizes 500000 5000000] [--change 0.01] [--runs 3]
        [--producer lookup|none]

For each upstream size: an orders table of N rows (id, region among 100, amount), the pipeline
``SELECT region, count(*), sum(amount), avg(amount) FROM source GROUP BY region`` backfilled; then a change of ``change`` x N rows (half updates of existing orders, half new ones) committed
upstream, and side by side on the same Spark session: the incremental step (read the increment, look up the
changed keys' before-images, retract/add, write the touched groups) and the full recompute of the same query
over the snapshot at the same version. Both results must be identical. Repeated ``runs`` times (a new change
each time); the median is printed with the ratio. Each size also takes the same change (``--same-change`` rows,
by default 1 % of the largest size): the incremental time's growth from the smallest to the largest upstream for
that same change, beside the full recompute's. ``--producer``: the upstream's ``changelog.producer`` (``lookup``,
the default: its commits write the change feed's before-images, so the step reads them; ``none``: the step looks
them up in the upstream's files).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from spark_fixtures import get_spark  # noqa: E402  (the tests' local[2] session settings)
from tidelake.spark.pipeline_config import PipelineConfig  # noqa: E402
from tidelake.spark.table_pipeline import TablePipeline  # noqa: E402
from tidelake.table import Table  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.int64())])
REGIONS = np.array([f"region-{i:03d}" for i in range(100)], dtype=object)
# sum / count / avg: maintained by retraction alone. (A min/max whose extreme is retracted re-reads its group from
# the snapshot, a cost that follows the table: see README, "Table -> table pipelines".)
QUERY = "SELECT region, count(*) AS orders, sum(amount) AS revenue, avg(amount) AS mean FROM source GROUP BY region"


def orders(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    return pa.table({"id": pa.array(ids), "region": pa.array(REGIONS[rng.integers(0, len(REGIONS), len(ids))]),
                     "amount": pa.array(rng.integers(1, 10_000, len(ids)))}, schema=SCHEMA)


def _sorted(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: r["region"])


def measure(size: int, changes: list[int], runs: int, spark, workdir: str, producer: str) -> list[dict]:
    """For each change size (rows) in ``changes``, ``runs`` times: a change upstream, the incremental step, the
    full recompute; one upstream table of ``size`` rows."""
    rng = np.random.default_rng(size)
    path = os.path.join(workdir, f"orders-{size}")
    table = Table.create(path, SCHEMA, ["id"], {"write.bucket.num": "4", "clustering.auto": "false",
                                                "changelog.producer": producer}, storage_options={"fsync": "false"})
    for start in range(0, size, 1_000_000):
        table.insert_into(orders(np.arange(start, min(size, start + 1_000_000)), rng))
    table.compact()
    pipeline = TablePipeline(PipelineConfig.from_dict({"source": {"table": path}, "transform": QUERY,
                                                       "sink": {"table": os.path.join(workdir, f"by-region-{size}"),
                                                                "buckets": 1}}), spark=spark)
    pipeline.step()   # backfill
    next_id = size
    out = []
    for n in changes:
        incremental, full = [], []
        for _ in range(runs):
            next_id = _one_run(size, n, table, pipeline, rng, next_id, incremental, full)
        out.append({"size": size, "change_rows": n, "incremental": statistics.median(incremental),
                    "full": statistics.median(full), "all_incremental": incremental, "all_full": full})
    return out


def _one_run(size: int, n: int, table: Table, pipeline: TablePipeline, rng, next_id: int, incremental: list,
             full: list) -> int:
    """One change of ``n`` rows (half updates, half new orders), the step and the recompute timed; the next id."""
    updated = rng.choice(next_id, n // 2, replace=False)
    table.upsert(orders(np.concatenate([updated, np.arange(next_id, next_id + n - n // 2)]), rng))
    t0 = time.perf_counter()
    step = pipeline.step()
    incremental.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    want = pipeline.recompute(step.to_version)
    full.append(time.perf_counter() - t0)
    got = pipeline.results()
    if _sorted(got) != _sorted(want.select(got.column_names)):
        raise SystemExit(f"{size} rows: the incremental result differs from the full recompute at version "
                         f"{step.to_version}")
    return next_id + n - n // 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500_000, 5_000_000])
    ap.add_argument("--change", type=float, default=0.01, help="the change at each size, a fraction of it")
    ap.add_argument("--same-change", type=int, default=None,
                    help="rows of the change made at every size for the growth (default: --change of the largest)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--producer", choices=["lookup", "none"], default="lookup")
    args = ap.parse_args()
    same = args.same_change or int(max(args.sizes) * args.change)
    spark = get_spark()
    by_change: dict[int, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="chain-refresh-") as workdir:
        for size in args.sizes:
            for r in measure(size, sorted({int(size * args.change), same}), args.runs, spark, workdir, args.producer):
                by_change.setdefault(r["change_rows"], []).append(r)
                print(f"upstream {size:>10,} rows, change {r['change_rows']:>8,} rows "
                      f"({r['change_rows'] / size:.1%}): incremental {r['incremental']:6.2f}s   full recompute "
                      f"{r['full']:6.2f}s   full/incremental {r['full'] / r['incremental']:5.1f}x   (runs: incremental "
                      f"{', '.join(f'{x:.2f}' for x in r['all_incremental'])}; full "
                      f"{', '.join(f'{x:.2f}' for x in r['all_full'])}); identical results", flush=True)
    same_runs = by_change[same]
    if len(same_runs) > 1:
        small, large = same_runs[0], same_runs[-1]
        print(f"the same change of {same:,} rows, upstream {small['size']:,} -> {large['size']:,} rows: incremental "
              f"{large['incremental'] / small['incremental']:.2f}x, full recompute {large['full'] / small['full']:.2f}x")


if __name__ == "__main__":
    main()
