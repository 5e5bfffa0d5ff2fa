"""The table at scale (issue 28): tidelake, delta-rs and pyiceberg on the same generated data, same run.

    .venv/bin/python benchmarks/table_scale.py --rows 10000000 [--work DIR]   # load, upsert, read, changes, point
    .venv/bin/python benchmarks/table_scale.py --pending --rows 2000000        # merge on read vs compacted
    .venv/bin/python benchmarks/table_scale.py --engines --rows 1000000 --upsert 100000 --repeat 3

Default: a table of ``--rows`` rows (16 buckets for tidelake), loaded in chunks of 2,000,000; then an upsert of
``--upsert`` rows (half updates of existing keys, half new keys); a snapshot read of the whole table; the change
feed of the upsert; a point lookup. Every step of every system runs in a fresh process of its own, so its peak
RSS (``ru_maxrss``) is that step's (plus the interpreter and pyarrow, ~100 MB, printed as the ``baseline`` row).
pyiceberg's upsert is sampled at ``--iceberg-upsert`` rows (it takes ~1,000 s for 1,000,000) and says so; it has
no change feed.

``--pending``: a snapshot read with 10 pending upsert commits of 10 % of the keys each, vs the same read after a
full compaction (their ratio), vs reading the same files without merging them, the same read of tables given the
same 10 upserts with deletion vectors (``deletion-vectors.enabled``: read by position, no merge by key) with
clustering off, on (the default a table is created with) and on with ``clustering.keep.every.row=false``, and
delta-rs's read of a table given the same 10 upserts by MERGE. Each tidelake read's files and stored rows are
printed. Wall and CPU seconds (the process's, all threads: delta-rs runs in it too); the machine is
shared, so the load average is printed and CPU time is the figure to trust. Also each system's upsert commits.
``--key-stride K`` spaces the keys K apart (key = row number * K): a key range too sparse for the reader's bitmap
merge (``reader._merge_dense``), so merge on read sorts and searches keys, as it does for any key that is not a
dense integer.

``--engines``: one upsert per merge engine into the same table, the cost of folding rows on commit.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tidelake.table import Table  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("price", pa.float64()), ("category", pa.string())])
CATEGORIES = np.array([f"cat-{i:02d}" for i in range(32)], dtype=object)
CHUNK = 2_000_000
BUCKETS = 16


def rows(ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "amount": pa.array(rng.integers(0, 1_000_000, n)),
                     "price": pa.array(rng.random(n) * 100), "category": pa.array(CATEGORIES[rng.integers(0, 32, n)])},
                    schema=SCHEMA)


def upsert_ids(table_rows: int, n: int) -> np.ndarray:
    """Half existing keys (spread over the table), half new ones."""
    rng = np.random.default_rng(7)
    old = rng.choice(table_rows, n // 2, replace=False)
    return np.sort(np.concatenate([old, np.arange(table_rows, table_rows + n - n // 2)]))


# ---------------------------------------------------------------- one step, in a process of its own
def step_tidelake(step: str, path: str, a: argparse.Namespace) -> dict:
    if step == "load":
        t = Table.create(path, SCHEMA, ["id"], {"write.bucket.num": str(BUCKETS), "clustering.auto": "false"})
        for start in range(0, a.rows, CHUNK):
            t.insert_into(rows(np.arange(start, min(a.rows, start + CHUNK), dtype=np.int64), start))
        t.compact()
        t.close()
        return {}
    t = Table.open(path)
    if step == "upsert":
        t.upsert(rows(upsert_ids(a.rows, a.upsert), 1))
        t.maintenance.wait()
        return {}
    if step == "read":
        return {"rows": t.scan().num_rows}
    if step == "changes":
        v = t.version
        return {"rows": t.changes(start_version=v - 1, end_version=v).num_rows}
    if step == "point":
        return {"rows": t.scan(filter=[("id", "=", a.rows // 3)]).num_rows}
    raise ValueError(step)


def step_delta(step: str, path: str, a: argparse.Namespace) -> dict:
    from deltalake import DeltaTable, write_deltalake
    if step == "load":
        for start in range(0, a.rows, CHUNK):
            write_deltalake(path, rows(np.arange(start, min(a.rows, start + CHUNK), dtype=np.int64), start),
                            mode="append", configuration={"delta.enableChangeDataFeed": "true"})
        return {}
    dt = DeltaTable(path)
    if step == "upsert":
        (dt.merge(rows(upsert_ids(a.rows, a.upsert), 1), "t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
        return {}
    if step == "read":
        return {"rows": dt.to_pyarrow_table().num_rows}
    if step == "changes":
        v = dt.version()
        return {"rows": dt.load_cdf(starting_version=v, ending_version=v).read_all().num_rows}
    if step == "point":
        return {"rows": dt.to_pyarrow_table(filters=[("id", "=", a.rows // 3)]).num_rows}
    raise ValueError(step)


def step_iceberg(step: str, path: str, a: argparse.Namespace) -> dict:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo
    os.makedirs(path, exist_ok=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{path}/catalog.db", warehouse=f"file://{path}")
    if step == "load":
        catalog.create_namespace("b")
        schema = pa.schema([f.with_nullable(f.name != "id") for f in SCHEMA])
        t = catalog.create_table("b.t", schema=schema)
        t = catalog.load_table("b.t")
        with t.update_schema() as u:   # the key pyiceberg's upsert joins on
            u.set_identifier_fields("id")
        for start in range(0, a.rows, CHUNK):
            t.append(rows(np.arange(start, min(a.rows, start + CHUNK), dtype=np.int64), start).cast(schema))
        return {}
    t = catalog.load_table("b.t")
    if step == "upsert":
        data = rows(upsert_ids(a.rows, a.iceberg_upsert), 1)
        t.upsert(data.cast(t.schema().as_arrow()))
        return {"sampled_rows": a.iceberg_upsert}
    if step == "read":
        return {"rows": t.scan().to_arrow().num_rows}
    if step == "changes":
        return {"na": "no change feed"}
    if step == "point":
        return {"rows": t.scan(row_filter=EqualTo("id", a.rows // 3)).to_arrow().num_rows}
    raise ValueError(step)


STEPS = {"tidelake": step_tidelake, "delta-rs": step_delta, "pyiceberg": step_iceberg}


def child(a: argparse.Namespace) -> None:
    system, step = a.child
    t0 = time.perf_counter()
    out = {} if system == "baseline" else STEPS[system](step, os.path.join(a.work, system), a)
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def run_child(a: argparse.Namespace, system: str, step: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", system, step, "--work", a.work, "--rows",
           str(a.rows), "--upsert", str(a.upsert), "--iceberg-upsert", str(a.iceberg_upsert)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def scale(a: argparse.Namespace) -> None:
    systems = [s for s in ("tidelake", "delta-rs", "pyiceberg") if s not in a.skip]
    base = run_child(a, "baseline", "-")
    print(f"rows {a.rows:,}, upsert {a.upsert:,} (50 % updates), {BUCKETS} buckets (tidelake), work {a.work}")
    print(f"baseline (interpreter + imports): peak RSS {base['peak_rss_mb']:.0f} MB\n")
    print("| step | " + " | ".join(f"{s} s | {s} peak RSS MB" for s in systems) + " |")
    print("|---|" + "---:|---:|" * len(systems))
    results = {}
    for step in ("load", "upsert", "read", "changes", "point"):
        cells = []
        for s in systems:
            r = run_child(a, s, step)
            results[(s, step)] = r
            if "error" in r:
                cells += [f"failed: {r['error']}", ""]
            elif "na" in r:
                cells += [r["na"], ""]
            else:
                note = f" ({r['sampled_rows']:,} rows)" if "sampled_rows" in r else ""
                cells += [f"{r['seconds']:.2f}{note}", f"{r['peak_rss_mb']:.0f}"]
        print(f"| {step} | " + " | ".join(cells) + " |", flush=True)
    tl, dl = results.get(("tidelake", "upsert"), {}), results.get(("delta-rs", "upsert"), {})
    if "seconds" in tl and "seconds" in dl:
        print(f"\nupsert: delta-rs MERGE / tidelake = {dl['seconds'] / tl['seconds']:.1f}x")


def pending(a: argparse.Namespace) -> None:
    from deltalake import DeltaTable, write_deltalake
    from tidelake.table.scan import ScanPlanner
    n = a.rows
    off = {"write.bucket.num": str(BUCKETS), "clustering.auto": "false"}
    dv = {"write.bucket.num": str(BUCKETS), "deletion-vectors.enabled": "true"}
    tables = {"pending": off, "dv": {**off, **dv}, "dv-default": dv,   # (dv-default: clustering on, as created)
              "dv-newest": {**dv, "clustering.keep.every.row": "false"}}
    made = {name: Table.create(f"{a.work}/{name}", SCHEMA, ["id"], props) for name, props in tables.items()}
    t, v = made["pending"], made["dv"]
    keys = np.arange(n, dtype=np.int64) * a.key_stride
    for x in made.values():
        x.insert_into(rows(keys, 0))
        x.compact()
    write_deltalake(f"{a.work}/pending-delta", rows(keys, 0))
    dt = DeltaTable(f"{a.work}/pending-delta")
    rng = np.random.default_rng(3)
    commits = {name: [] for name in (*made, "delta-rs")}

    def timed(name, fn):
        t0 = time.perf_counter()
        fn()
        commits[name].append(time.perf_counter() - t0)
    for i in range(10):
        batch = rows(keys[np.sort(rng.choice(n, n // 10, replace=False))], 100 + i)
        for name, x in made.items():
            timed(name, lambda: x.upsert(batch))
            x.maintenance.wait()   # (clustering, where on, done before the next commit: the same files every run)
        timed("delta-rs", lambda: dt.merge(batch, "t.id = s.id", source_alias="s", target_alias="t")
              .when_matched_update_all().when_not_matched_insert_all().execute())
    md = t.metadata
    plans = ScanPlanner(md).snapshot(md.version)

    def unmerged():   # every planned file read, nothing merged: the floor of any merge on read
        return t.reader.map_files(lambda fe: t.reader.read_file(fe.file, SCHEMA.names, md.schema, ops=False),
                                  [fe for p in plans for fe in p.files], sum(fe.file.rows for p in plans for fe in p.files))
    shutil.copytree(t.path, f"{a.work}/pending-compacted")
    c = Table.open(f"{a.work}/pending-compacted")
    c.compact()
    made["compacted"] = c
    met = {}   # what each tidelake read meets: files, stored rows, buckets read by their deletion vectors
    for name, x in made.items():
        ps = ScanPlanner(x.metadata).snapshot(x.metadata.version)
        met[name] = {"files": sum(len(p.files) for p in ps), "rows": sum(fe.file.rows for p in ps for fe in p.files),
                     "by vectors": sum(p.vectors is not None for p in ps)}
    met["unmerged"] = {**met["pending"], "by vectors": 0}
    dt = DeltaTable(f"{a.work}/pending-delta")
    calls = {**{name: x.scan for name, x in made.items()}, "unmerged": unmerged, "delta-rs": dt.to_pyarrow_table}
    wall = {name: [] for name in calls}
    cpu = {name: [] for name in calls}
    results = {name: fn() for name, fn in calls.items()}   # (warm: every file in the page cache)
    for name in ("dv", "dv-default", "dv-newest"):
        assert results[name].sort_by("id").equals(results["pending"].sort_by("id")), f"{name} and pending differ"
    load = os.getloadavg()
    for _ in range(a.repeat):   # alternately, so a busy moment of the machine hits every one alike
        for name, fn in calls.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    w = {k: float(np.median(x)) for k, x in wall.items()}
    u = {k: float(np.median(x)) for k, x in cpu.items()}
    load = [max(x, y) for x, y in zip(load, os.getloadavg())]
    print(f"rows {n:,} (keys {a.key_stride} apart), {BUCKETS} buckets, 10 upsert commits of {n // 10:,} keys each; "
          f"median of {a.repeat}; "
          f"load average (1/5/15 min, the higher of before and after) {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("| read | files | stored rows | buckets by vectors | wall s | / compacted | CPU s | / compacted |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, label in (("pending", "tidelake, clustering off, merge on read by key"),
                        ("dv", "tidelake, clustering off, deletion vectors"),
                        ("dv-default", "tidelake, clustering on (default), deletion vectors"),
                        ("dv-newest", "tidelake, clustering on, clustering.keep.every.row=false, deletion vectors"),
                        ("compacted", "tidelake, after full compaction"),
                        ("unmerged", "tidelake's files read, not merged (clustering off; floor)"),
                        ("delta-rs", "delta-rs after the same 10 MERGEs")):
        m = met.get(name)
        print(f"| {label} | {m['files'] if m else ''} | {format(m['rows'], ',') if m else ''} | "
              f"{m['by vectors'] if m else ''} | "
              f"{w[name]:.3f} | {w[name] / w['compacted']:.2f}x | {u[name]:.3f} | {u[name] / u['compacted']:.2f}x |")
    print("\ndelta-rs / tidelake (CPU): " + ", ".join(f"{name} {u['delta-rs'] / u[name]:.2f}x" for name in
                                                     ("pending", "dv", "dv-default", "dv-newest", "compacted")))
    print("\n| upsert commit (median of the 10, clustering waited for apart) | wall s |\n|---|---:|")
    for name in commits:
        print(f"| {name} | {float(np.median(commits[name])):.3f} |")
    for x in made.values():
        x.close()


def engines(a: argparse.Namespace) -> None:
    """One upsert of ``--upsert`` rows (50 % updates) into a ``--rows``-row table per merge engine: the cost of
    folding on commit (deduplicate does not fold)."""
    props = {"deduplicate": {}, "partial-update": {"merge-engine": "partial-update"},
             "aggregation": {"merge-engine": "aggregation", "fields.amount.aggregate-function": "sum",
                             "fields.price.aggregate-function": "max"},
             "first-row": {"merge-engine": "first-row"}}
    print(f"rows {a.rows:,}, upsert {a.upsert:,} (50 % updates), {BUCKETS} buckets; median of {a.repeat}")
    print("| merge-engine | upsert s | / deduplicate |\n|---|---:|---:|")
    med = {}
    for name, extra in props.items():
        t = Table.create(f"{a.work}/engine-{name}", SCHEMA, ["id"],
                         {"write.bucket.num": str(BUCKETS), "clustering.auto": "false", **extra})
        t.insert_into(rows(np.arange(a.rows, dtype=np.int64), 0))
        t.compact()
        times = []
        for i in range(a.repeat):
            batch = rows(upsert_ids(a.rows + i * a.upsert, a.upsert), 10 + i)
            t0 = time.perf_counter()
            t.upsert(batch)
            times.append(time.perf_counter() - t0)
        med[name] = float(np.median(times))
        print(f"| {name} | {med[name]:.3f} | {med[name] / med['deduplicate']:.1f}x |", flush=True)
        t.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--upsert", type=int, default=1_000_000)
    p.add_argument("--iceberg-upsert", type=int, default=20_000)
    p.add_argument("--work")
    p.add_argument("--skip", nargs="*", default=[])
    p.add_argument("--pending", action="store_true")
    p.add_argument("--engines", action="store_true")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--key-stride", type=int, default=1)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--child", nargs=2)
    a = p.parse_args()
    if a.child:
        child(a)
        return
    own = a.work is None
    a.work = a.work or tempfile.mkdtemp(prefix="tidelake-scale-")
    try:
        pending(a) if a.pending else engines(a) if a.engines else scale(a)
    finally:
        if own:
            shutil.rmtree(a.work, ignore_errors=True)


if __name__ == "__main__":
    main()
