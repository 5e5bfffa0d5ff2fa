"""The first ``changes(before_images=True)`` of a process against the first ``changes()`` (issue 24 item 6c).

    .venv/bin/python benchmarks/chain_first_call.py [--processes 9]

The workload of ``table_bench.py --only images``: a 2,000,000-row table, 16 buckets, ``changelog.producer=lookup``,
5 upserts of 200,000 rows (half updates), then 20,000 deletes; the read is the last upsert, (v-1, v]. Each call
is the FIRST call of a fresh process (``python -c``: import, ``Table.open``, one timed call), the two kinds
alternated ``--processes`` times each, so both pay the same start-up (imports, the compute kernels' first use,
the files' first read) and neither inherits the other's. Printed: the median wall and CPU time of each, the
ratio, and every run. (``table_bench.py`` measures its "first call" as before-images first, then ``changes()``,
in one process: the second call then finds what the first warmed up.)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table_bench import SCHEMA, rows  # noqa: E402  (the same rows as the images section)
from tidelake.table import Table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONE_CALL = """
import json, sys, time
sys.path.insert(0, {root!r})
from tidelake.table import Table
t = Table.open({path!r})
c0, t0 = time.process_time(), time.perf_counter()
out = t.changes(start_version={v} - 1, end_version={v}, before_images={images})
print(json.dumps({{"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "rows": out.num_rows}}))
"""


def build(path: str, load_rows: int, upsert_rows: int, upserts: int, deletes: int) -> int:
    rng = np.random.default_rng(7)
    t = Table.create(path, SCHEMA, ["id"], {"write.bucket.num": "16", "clustering.auto": "false",
                                            "changelog.producer": "lookup"})
    t.insert_into(rows(np.arange(load_rows, dtype=np.int64), rng))
    next_id = version = load_rows
    for _ in range(upserts):
        half = upsert_rows // 2
        ids = np.concatenate([rng.choice(next_id, half, replace=False),
                              np.arange(next_id, next_id + upsert_rows - half)])
        next_id += upsert_rows - half
        version = t.upsert(rows(rng.permutation(ids), rng))
    t.delete(rows(rng.choice(next_id, deletes, replace=False), rng).select(["id"]))
    t.maintenance.wait()
    return version


def first_call(path: str, version: int, images: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", ONE_CALL.format(root=ROOT, path=path, v=version, images=images)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=9, help="fresh processes per kind of call")
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    s = args.scale
    with tempfile.TemporaryDirectory(prefix="chain-first-call-") as work:
        path = os.path.join(work, "t")
        version = build(path, int(2_000_000 * s), int(200_000 * s), 5, int(20_000 * s))
        runs: dict[bool, list[dict]] = {False: [], True: []}
        for i in range(args.processes):
            for images in ((False, True) if i % 2 == 0 else (True, False)):
                runs[images].append(first_call(path, version, images))
    m = statistics.median
    plain, images = runs[False], runs[True]
    pw, pc_ = m(r["wall"] for r in plain), m(r["cpu"] for r in plain)
    iw, ic = m(r["wall"] for r in images), m(r["cpu"] for r in images)
    print(f"first call of a fresh process, median of {args.processes} each (alternated): changes() {pw:.3f}s wall "
          f"{pc_:.3f}s CPU ({plain[0]['rows']:,} rows); changes(before_images=True) {iw:.3f}s wall {ic:.3f}s CPU "
          f"({images[0]['rows']:,} rows); ratio {iw / pw:.2f}x wall, {ic / pc_:.2f}x CPU")
    print("runs, wall/CPU s: changes() " + ", ".join(f"{r['wall']:.3f}/{r['cpu']:.3f}" for r in plain))
    print("runs, wall/CPU s: before-images " + ", ".join(f"{r['wall']:.3f}/{r['cpu']:.3f}" for r in images))


if __name__ == "__main__":
    main()
