"""The table on S3 versus on a local disk (issue 13): upsert and snapshot-read throughput, commit latency.

    .venv/bin/python benchmarks/table_storage_bench.py [--rows 400000] [--no-write]

Runs the same workload on a local directory and on an S3 server: by default moto's standalone server,
started here on 127.0.0.1 and stopped by its pid (a Python server: it measures the table's request
pattern, not AWS's latency); ``--endpoint URL`` uses another S3-compatible server instead (bucket
``--bucket``, credentials from AWS's environment variables). Workload: a table of ``--rows`` rows
(16 buckets, compacted), 5 upserts of rows/10 rows (half updates), a snapshot read after them (base +
5 deltas per bucket), then ``--commits`` small upserts of 100 rows, each timed (commit latency: stage 16
files, refresh, publish the log entry with put-if-absent). Writes the "Table storage" section of
benchmarks/RESULTS.md unless --no-write.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tidelake.table import Table  # noqa: E402
from results_file import replace_heading  # noqa: E402  (beside this script)
from s3_server import start_moto  # noqa: E402  (beside this script)

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("price", pa.float64()), ("category", pa.string())])
CATEGORIES = np.array([f"cat-{i:02d}" for i in range(32)], dtype=object)
PROPS = {"write.bucket.num": "16", "clustering.auto": "false", "retention.auto": "false"}


def rows(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "amount": pa.array(rng.integers(0, 1_000_000, n)),
                     "price": pa.array(rng.random(n) * 100), "category": pa.array(CATEGORIES[rng.integers(0, 32, n)])},
                    schema=SCHEMA)


def run(url: str, options: dict | None, table_rows: int, commits: int) -> dict[str, float]:
    """The workload on one store; returns its figures."""
    rng = np.random.default_rng(7)
    t = Table.create(url, SCHEMA, ["id"], PROPS, storage_options=options, maintenance="inline")
    t.insert_into(rows(np.arange(table_rows, dtype=np.int64), rng))
    t.compact()
    batch = table_rows // 10
    upsert_s = []
    next_id = table_rows
    for _ in range(5):
        half = batch // 2
        ids = np.concatenate([rng.choice(next_id, half, replace=False), np.arange(next_id, next_id + batch - half)])
        next_id += batch - half
        data = rows(rng.permutation(ids), rng)
        t0 = time.perf_counter()
        t.upsert(data)
        upsert_s.append(time.perf_counter() - t0)
    scan_s = []
    for _ in range(3):
        t0 = time.perf_counter()
        n = t.scan().num_rows
        scan_s.append(time.perf_counter() - t0)
    assert n == next_id, (n, next_id)
    lat = []
    for i in range(commits):
        data = rows(rng.choice(next_id, 100, replace=False), rng)
        t0 = time.perf_counter()
        t.upsert(data)
        lat.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    reopened = Table.open(url, storage_options=options)
    open_ms = (time.perf_counter() - t0) * 1000
    assert reopened.version == t.version
    return {"upsert_rows_s": batch / statistics.median(upsert_s), "scan_rows_s": n / statistics.median(scan_s),
            "scan_rows": n, "p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99)),
            "open_ms": open_ms, "version": t.version}



def write_results(section: str) -> None:
    replace_heading("Table storage: S3 vs local disk", section)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=400_000, help="rows in the table before the upserts")
    ap.add_argument("--commits", type=int, default=60, help="small commits timed for the latency figures")
    ap.add_argument("--rounds", type=int, default=2, help="local then S3, this many times; figures are medians")
    ap.add_argument("--endpoint", default=None, help="an S3-compatible server instead of moto's (bucket must exist)")
    ap.add_argument("--bucket", default="lake")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    moto = None
    work = tempfile.mkdtemp(prefix="tidelake-storage-bench-")
    try:
        if args.endpoint is None:
            moto, endpoint = start_moto()
            options = {"endpoint": endpoint, "region": "us-east-1", "access_key_id": "bench",
                       "secret_access_key": "bench"}
            import boto3
            boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                         aws_secret_access_key="bench").create_bucket(Bucket=args.bucket)
            server = "moto_server (Python, on this machine)"
        else:
            options, server = {"endpoint": args.endpoint}, args.endpoint
        runs: dict[str, list[dict]] = {"local": [], "s3": []}
        for r in range(args.rounds):   # alternately, so both see the same moments of a shared machine
            runs["local"].append(run(f"{work}/t{r}", None, args.rows, args.commits))
            runs["s3"].append(run(f"s3://{args.bucket}/bench-{uuid.uuid4().hex[:8]}", options, args.rows, args.commits))
        local, s3 = ({k: statistics.median(x[k] for x in runs[side]) for k in runs[side][0]} for side in ("local", "s3"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if moto is not None:
            moto.terminate()
            try:
                moto.wait(10)
            except subprocess.TimeoutExpired:
                moto.kill()
    batch = args.rows // 10
    lines = [
        f"Command: `.venv/bin/python benchmarks/table_storage_bench.py --rows {args.rows} --commits {args.commits} "
        f"--rounds {args.rounds}` (2-core machine shared with other jobs; local and S3 run alternately, {args.rounds} "
        f"rounds, medians). S3 server: {server}. Table: `id int64 (PK), amount int64, "
        f"price float64, category string`, 16 buckets, {args.rows:,} rows compacted, then 5 upserts of {batch:,} rows "
        f"(half updates), a snapshot read of {int(local['scan_rows']):,} rows (base + 5 deltas per bucket), then "
        f"{args.commits} upserts of 100 rows timed one by one (each: 16 delta files, refresh, put-if-absent log entry).",
        "",
        "| measurement | local disk | S3 | S3 / local |",
        "|---|---:|---:|---:|",
        f"| upsert {batch:,} rows, rows/s (median of 5) | {local['upsert_rows_s']:,.0f} | {s3['upsert_rows_s']:,.0f} | "
        f"{s3['upsert_rows_s'] / local['upsert_rows_s']:.2f}x |",
        f"| snapshot read, rows/s (median of 3) | {local['scan_rows_s']:,.0f} | {s3['scan_rows_s']:,.0f} | "
        f"{s3['scan_rows_s'] / local['scan_rows_s']:.2f}x |",
        f"| commit latency p50, ms (100-row upsert) | {local['p50']:.1f} | {s3['p50']:.1f} | {s3['p50'] / local['p50']:.1f}x |",
        f"| commit latency p99, ms | {local['p99']:.1f} | {s3['p99']:.1f} | {s3['p99'] / local['p99']:.1f}x |",
        f"| open the table (checkpoint + entries after it), ms | {local['open_ms']:.1f} | {s3['open_ms']:.1f} | "
        f"{s3['open_ms'] / local['open_ms']:.1f}x |",
    ]
    section = "\n".join(lines)
    print(section)
    if not args.no_write:
        write_results(section)


if __name__ == "__main__":
    main()
