"""Incremental join aggregates vs the full refresh and DuckDB (issue 34 item 4).

    .venv/bin/python benchmarks/chain_incremental.py [--sizes 1000000 10000000] [--changes 0.01 0.001]
        [--producer lookup|none] [--zones 8] [--customers 100000]

An orders upstream (id, region among 200, customer, amount; written with Arrow, 1 M rows a commit, then
compacted) and a regions dimension (region -> zone). Two stages over the same upstream, each beside the same
query with ``refresh: full`` in the same Spark session:

- by zone (few groups): ``SELECT r.zone, count(*), sum(o.amount), min(o.amount), max(o.amount), avg(o.amount)
  FROM source o JOIN regions r ON o.region = r.region GROUP BY r.zone``
- by customer (many groups): the same, ``GROUP BY o.customer``.

Each round commits a change of ``change`` x N rows upstream — 40 % updates that move orders to another region
(so another zone) with a new amount, 10 % deletes, 50 % new orders; the updates and deletes include the rows
holding the smallest and largest amounts (they hit every group's extremes where groups are few) — then times
each stage's incremental step, its full refresh, and DuckDB recomputing the whole query from the same Parquet
files (the upstream compacted first, untimed: DuckDB reads its base files). The last round changes the
dimension instead (one region moved to another zone). The three results must be equal. Printed per step: the
seconds, the ratios, ``recomputed_groups`` (groups whose min/max lost its extreme, recomputed from the
snapshot), ``rejoined`` (upstream rows read again for a dimension change) and where the incremental step's time
went (``StepResult.phases``).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from spark_fixtures import get_spark  # noqa: E402  (the tests' local[2] session settings)
from tidelake.spark.pipeline_config import PipelineConfig  # noqa: E402
from tidelake.spark.table_pipeline import TablePipeline  # noqa: E402
from tidelake.table import Table  # noqa: E402

ORDERS = pa.schema([("id", pa.int64()), ("region", pa.string()), ("customer", pa.int64()), ("amount", pa.int64())])
REGIONS = pa.schema([("region", pa.string()), ("zone", pa.string())])
REGION_NAMES = np.array([f"region-{i:03d}" for i in range(200)], dtype=object)
AGGREGATES = "count(*) AS orders, sum(o.amount) AS revenue, min(o.amount) AS lo, max(o.amount) AS hi, avg(o.amount) AS mean"
STAGES = {
    "by_zone": f"SELECT r.zone, {AGGREGATES} FROM source o JOIN regions r ON o.region = r.region GROUP BY r.zone",
    "by_customer": f"SELECT o.customer, {AGGREGATES} FROM source o JOIN regions r ON o.region = r.region "
                   f"GROUP BY o.customer",
}
KEYS = {"by_zone": "zone", "by_customer": "customer"}


class Orders:
    """The upstream and what it holds (numpy, by id), to make changes that hit extremes."""

    def __init__(self, path: str, size: int, customers: int, producer: str, rng: np.random.Generator):
        self.rng, self.customers = rng, customers
        self.table = Table.create(path, ORDERS, ["id"], {"write.bucket.num": "4", "clustering.auto": "false",
                                                         "changelog.producer": producer},
                                  storage_options={"fsync": "false"})
        self.region = rng.integers(0, len(REGION_NAMES), size)
        self.amount = rng.integers(1, 10_000, size)
        self.live = np.ones(size, dtype=bool)
        for start in range(0, size, 1_000_000):
            stop = min(size, start + 1_000_000)
            self.table.insert_into(self._rows(np.arange(start, stop)))
        self.table.compact()

    def _rows(self, ids: np.ndarray) -> pa.Table:
        return pa.table({"id": pa.array(ids), "region": pa.array(REGION_NAMES[self.region[ids]]),
                         "customer": pa.array(ids % self.customers), "amount": pa.array(self.amount[ids])},
                        schema=ORDERS)

    def change(self, n: int) -> None:
        """One commit: 40 % updates (another region, a new amount), 10 % deletes, 50 % new orders; the rows holding
        the smallest and largest amounts among the updated and deleted."""
        live = np.flatnonzero(self.live)
        extremes = np.concatenate([live[np.argsort(self.amount[live])[:5]], live[np.argsort(-self.amount[live])[:5]]])
        touched = np.unique(np.concatenate([extremes, self.rng.choice(live, n // 2, replace=False)]))
        self.rng.shuffle(touched)
        deleted, updated = touched[: n // 10], touched[n // 10:]
        new = np.arange(len(self.live), len(self.live) + n - len(touched))
        self.region = np.concatenate([self.region, self.rng.integers(0, len(REGION_NAMES), len(new))])
        self.amount = np.concatenate([self.amount, self.rng.integers(1, 10_000, len(new))])
        self.live = np.concatenate([self.live, np.ones(len(new), dtype=bool)])
        self.region[updated] = (self.region[updated] + self.rng.integers(1, len(REGION_NAMES), len(updated))) % len(
            REGION_NAMES)
        self.amount[updated] = self.rng.integers(1, 10_000, len(updated))
        self.live[deleted] = False
        with self.table.transaction() as tx:
            tx.upsert(self._rows(np.sort(np.concatenate([updated, new]))))
            tx.delete(pa.table({"id": pa.array(np.sort(deleted))}))


def base_files(table: Table) -> list[str]:
    """The Parquet files of the table's latest version (compacted: base files only)."""
    root = table.storage.local_path("")
    plans = table.plan()
    if any(p.kind != "base" for p in plans):
        raise SystemExit(f"{table}: not compacted (delta files in the latest version)")
    return [os.path.join(root, p.path) for p in plans]


def duckdb_query(stage: str, orders: list[str], regions: list[str]) -> tuple[float, list[tuple]]:
    sql = STAGES[stage].replace("FROM source o", f"FROM read_parquet({orders!r}) o").replace(
        "JOIN regions r", f"JOIN read_parquet({regions!r}) r")
    began = time.perf_counter()
    rows = duckdb.sql(sql).fetchall()
    return time.perf_counter() - began, rows


def _same(a: list[tuple], b: list[tuple]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(sorted(a, key=lambda r: r[0]), sorted(b, key=lambda r: r[0])):
        for u, v in zip(x, y):
            if isinstance(u, float) or isinstance(v, float):
                if not math.isclose(u, v, rel_tol=1e-9):
                    return False
            elif u != v:
                return False
    return True


def _tuples(t: pa.Table, stage: str) -> list[tuple]:
    cols = [KEYS[stage], "orders", "revenue", "lo", "hi", "mean"]
    return [tuple(r[c] for c in cols) for r in t.select(cols).to_pylist()]


def _pipeline(workdir: str, size: int, stage: str, orders: str, regions: str, full: bool, spark) -> TablePipeline:
    sink = os.path.join(workdir, f"{stage}-{size}{'-full' if full else ''}")
    raw = {"source": {"table": orders, "tables": {"regions": regions}}, "transform": STAGES[stage],
           "sink": {"table": sink, "buckets": 4 if stage == "by_customer" else 1}}
    if full:
        raw["refresh"] = "full"
        raw["sink"]["primary_key"] = [KEYS[stage]]
    return TablePipeline(PipelineConfig.from_dict(raw), spark=spark)


def measure(size: int, fractions: list[float], args, spark, workdir: str) -> list[dict]:
    rng = np.random.default_rng(size)
    began = time.perf_counter()
    orders = Orders(os.path.join(workdir, f"orders-{size}"), size, args.customers, args.producer, rng)
    regions_path = os.path.join(workdir, f"regions-{size}")
    regions = Table.create(regions_path, REGIONS, ["region"], {"write.bucket.num": "1"})
    zone_of = {r: f"zone-{i % args.zones}" for i, r in enumerate(REGION_NAMES)}
    regions.upsert(pa.table({"region": list(zone_of), "zone": list(zone_of.values())}))
    regions.compact()
    print(f"upstream {size:,} rows written and compacted in {time.perf_counter() - began:.1f}s", flush=True)
    pipelines = {(stage, full): _pipeline(workdir, size, stage, orders.table.storage.url, regions_path, full, spark)
                 for stage in STAGES for full in (False, True)}
    for p in pipelines.values():
        p.step()   # backfill
    rounds = [("upstream", f) for f in fractions] + [("dimension", None)]
    out = []
    for what, fraction in rounds:
        if what == "upstream":
            n = int(size * fraction)
            orders.change(n)
            label = f"{n:,} rows ({fraction:.1%})"
        else:
            moved = REGION_NAMES[int(rng.integers(0, len(REGION_NAMES)))]
            zone_of[moved] = f"zone-{(int(zone_of[moved].split('-')[1]) + 1) % args.zones}"
            regions.upsert(pa.table({"region": [moved], "zone": [zone_of[moved]]}))
            label = f"dimension: {moved} -> {zone_of[moved]}"
        for stage in STAGES:
            t0 = time.perf_counter()
            step = pipelines[(stage, False)].step()
            incremental = time.perf_counter() - t0
            t0 = time.perf_counter()
            if pipelines[(stage, True)].step() is None:
                raise SystemExit(f"{size} rows, {stage}, {label}: the full refresh did not run")
            full = time.perf_counter() - t0
            got = _tuples(pipelines[(stage, False)].results(), stage)
            if not _same(got, _tuples(pipelines[(stage, True)].results(), stage)):
                raise SystemExit(f"{size} rows, {stage}, {label}: the incremental result differs from the full refresh")
            out.append({"size": size, "stage": stage, "change": label, "what": what, "fraction": fraction,
                        "incremental": incremental, "full": full, "kind": step.kind,
                        "recomputed_groups": step.recomputed_groups, "rejoined": step.rejoined,
                        "changes": step.changes, "phases": step.phases, "got": got})
        orders.table.compact()   # (untimed) DuckDB reads the base files; the pipelines see a version without data
        regions.compact()
        files, dim_files = base_files(orders.table), base_files(regions)
        for r in out[-len(STAGES):]:
            r["duckdb"], rows = duckdb_query(r["stage"], files, dim_files)
            if not _same(r.pop("got"), rows):
                raise SystemExit(f"{size} rows, {r['stage']}, {r['change']}: DuckDB's result differs")
            _print(r)
        for p in pipelines.values():   # consume the compaction's version (no data change) before the next round
            p.step()
    return out


def _print(r: dict) -> None:
    phases = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["phases"].items(), key=lambda kv: -kv[1]) if v >= 0.005)
    print(f"{r['size']:>10,} rows  {r['stage']:<11}  {r['change']:<30}  incremental {r['incremental']:6.2f}s  "
          f"full {r['full']:6.2f}s ({r['full'] / r['incremental']:5.1f}x)  duckdb {r['duckdb']:5.2f}s "
          f"({r['duckdb'] / r['incremental']:5.2f}x)  recomputed_groups {r['recomputed_groups']}  rejoined "
          f"{r['rejoined']:,}  [{phases}]", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--changes", type=float, nargs="+", default=[0.01, 0.001])
    ap.add_argument("--producer", choices=["lookup", "none"], default="lookup")
    ap.add_argument("--zones", type=int, default=8)
    ap.add_argument("--customers", type=int, default=100_000)
    args = ap.parse_args()
    spark = get_spark()
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="chain-incremental-") as workdir:
        for size in args.sizes:
            results += measure(size, args.changes, args, spark, workdir)
    print(f"load: {os.getloadavg()[0]:.1f} (1 min)")
    for stage in STAGES:   # the same change (rows) at two sizes: the incremental step's growth
        by_rows = {}
        for r in results:
            if r["stage"] == stage and r["what"] == "upstream":
                by_rows.setdefault(round(r["size"] * r["fraction"]), []).append(r)
        for n, rs in sorted(by_rows.items()):
            if len(rs) > 1:
                print(f"{stage}: the same change of {n:,} rows, upstream {rs[0]['size']:,} -> {rs[-1]['size']:,}: "
                      f"incremental {rs[-1]['incremental'] / rs[0]['incremental']:.2f}x, full "
                      f"{rs[-1]['full'] / rs[0]['full']:.2f}x")


if __name__ == "__main__":
    main()
