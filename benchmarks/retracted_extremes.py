"""An aggregate step whose change deletes every group's min and max row (issue 34 item 1): step time and groups
recomputed from the snapshot, with few groups.

    .venv/bin/python benchmarks/retracted_extremes.py [--rows 1000000] [--change 0.01] [--rounds 3]

An upstream of ``rows`` orders (id, grp among 5, amount), the pipeline ``SELECT grp, count(*), sum(amount),
min(amount), max(amount) FROM source GROUP BY grp`` backfilled; then each round one commit of ``change`` x rows
changes: a delete of each group's min and max row, half the rest updates moving existing orders between groups
(some amounts set to NULL), the other half new orders. The step's seconds and recomputed groups are printed per
round; the sink is checked equal to the expected aggregate (numpy over the same rows) after every round. Runs
against whichever tidelake is first on PYTHONPATH (before/after: the same script over two checkouts).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

ROOT = os.environ.get("TIDELAKE_ROOT", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
from spark_fixtures import get_spark  # noqa: E402  (the tests' local[2] session settings)
from tidelake.spark.pipeline_config import PipelineConfig  # noqa: E402
from tidelake.spark.table_pipeline import TablePipeline  # noqa: E402
from tidelake.table import Table  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("grp", pa.string()), ("amount", pa.int64())])
GROUPS = np.array([f"g{i}" for i in range(5)], dtype=object)
QUERY = ("SELECT grp, count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi FROM source "
         "GROUP BY grp")


class Orders:
    """The upstream's rows, mirrored in numpy (to pick each group's extremes and to check the sink)."""

    def __init__(self, rows: int, rng: np.random.Generator):
        self.rng = rng
        self.grp = rng.integers(0, 5, rows)
        self.amount = rng.integers(0, 10**9, rows)
        self.valid = np.ones(rows, dtype=bool)   # amount not NULL
        self.live = np.ones(rows, dtype=bool)

    def table(self, ids: np.ndarray) -> pa.Table:
        return pa.table({"id": ids, "grp": GROUPS[self.grp[ids]],
                         "amount": pa.array(self.amount[ids], mask=~self.valid[ids])}, schema=SCHEMA)

    def extremes(self) -> list[int]:
        out = []
        for g in range(5):
            idx = np.flatnonzero(self.live & self.valid & (self.grp == g))
            out += [int(idx[np.argmin(self.amount[idx])]), int(idx[np.argmax(self.amount[idx])])]
        return sorted(set(out))

    def change(self, table: Table, count: int) -> None:
        gone = np.array(self.extremes())
        self.live[gone] = False
        table.delete(pa.table({"id": gone}))
        live = np.flatnonzero(self.live)
        moved = self.rng.choice(live, (count - len(gone)) // 2, replace=False)
        self.grp[moved] = self.rng.integers(0, 5, len(moved))
        self.amount[moved] = self.rng.integers(0, 10**9, len(moved))
        self.valid[moved] = self.rng.random(len(moved)) > 0.05
        start = len(self.live)
        new = count - len(gone) - len(moved)
        self.grp = np.concatenate([self.grp, self.rng.integers(0, 5, new)])
        self.amount = np.concatenate([self.amount, self.rng.integers(0, 10**9, new)])
        self.valid = np.concatenate([self.valid, np.ones(new, dtype=bool)])
        self.live = np.concatenate([self.live, np.ones(new, dtype=bool)])
        table.upsert(self.table(np.concatenate([moved, np.arange(start, start + new)])))

    def expected(self) -> list[dict]:
        out = []
        for g in range(5):
            rows = self.live & (self.grp == g)
            valued = rows & self.valid
            out.append({"grp": GROUPS[g], "n": int(rows.sum()), "total": int(self.amount[valued].sum()),
                        "lo": int(self.amount[valued].min()), "hi": int(self.amount[valued].max())})
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--change", type=float, default=0.01)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    spark = get_spark()
    with tempfile.TemporaryDirectory() as d:
        orders = Orders(args.rows, np.random.default_rng(34))
        table = Table.create(os.path.join(d, "orders"), SCHEMA, ["id"],
                             {"write.bucket.num": "4", "changelog.producer": "lookup",
                              "maintenance.mode": "inline"})
        for lo in range(0, args.rows, 250_000):
            table.upsert(orders.table(np.arange(lo, min(args.rows, lo + 250_000))))
        cfg = PipelineConfig.from_dict({"source": {"table": "orders"}, "transform": QUERY,
                                        "sink": {"table": "by_grp", "buckets": 1}}, base_dir=d)
        p = TablePipeline(cfg, spark=spark)
        began = time.monotonic()
        p.step()
        print(f"backfill of {args.rows:,} rows: {time.monotonic() - began:.2f} s", flush=True)
        for r in range(args.rounds):
            orders.change(table, int(args.rows * args.change))
            result = p.step()
            got = sorted(p.results().select(["grp", "n", "total", "lo", "hi"]).to_pylist(), key=lambda x: x["grp"])
            assert got == orders.expected(), (got, orders.expected())
            print(f"round {r + 1}: {result.changes:,} change rows, step {result.seconds:.2f} s, "
                  f"{result.recomputed_groups} groups recomputed (equal)", flush=True)
        table.close()
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
