"""Table benchmarks (issue 3 item 12). Writes the "Table" section of benchmarks/RESULTS.md.

    .venv/bin/python benchmarks/table_bench.py [--scale 1.0] [--no-write]
    .venv/bin/python benchmarks/table_bench.py --runs 3     # only the side by side with delta-rs, 3 times

At --scale 1: upserts of 1M-row batches (50 % updates of existing keys, 50 % new keys) into a
10M-row table, tidelake vs deltalake (delta-rs) MERGE on the same data in the same run; snapshot
reads with 0 / 10 / 50 delta files per bucket vs after compaction; incremental read of a fixed
increment as the table grows 1M -> 10M rows; point lookup with bucket pruning vs a full scan.
--scale multiplies every row count (e.g. 0.1: 100k-row batches into a 1M-row table).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tidelake.table import Table  # noqa: E402
from results_file import replace_heading, replace_marked  # noqa: E402  (beside this script)

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("price", pa.float64()), ("category", pa.string())])
CATEGORIES = np.array([f"cat-{i:02d}" for i in range(32)], dtype=object)


def rows(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "amount": pa.array(rng.integers(0, 1_000_000, n)),
                     "price": pa.array(rng.random(n) * 100), "category": pa.array(CATEGORIES[rng.integers(0, 32, n)])},
                    schema=SCHEMA)


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    """Median wall time of ``repeat`` calls and the last result."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def timed_cpu(fn) -> tuple[float, float, object]:
    """Wall time and CPU time (every thread of this process, user + system) of one call, and its
    result. Both sides run in this process one after the other, so each one's CPU time is its own."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def fmt(n: float) -> str:
    return f"{n:,.0f}"


def bench_upsert(work: str, table_rows: int, batch_rows: int, batches: int, rng) -> list[str]:
    from deltalake import DeltaTable, write_deltalake
    base = rows(np.arange(table_rows, dtype=np.int64), rng)
    t = Table.create(f"{work}/tl", SCHEMA, ["id"], {"write.bucket.num": "16", "clustering.auto": "false"})
    t.insert_into(base)
    t.compact()
    write_deltalake(f"{work}/delta", base)
    del base
    dt = DeltaTable(f"{work}/delta")
    next_id = table_rows
    out = ["| batch | tidelake upsert s | tidelake rows/s | delta-rs MERGE s | delta-rs rows/s | ratio |",
           "|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    for b in range(batches):
        half = batch_rows // 2
        ids = np.concatenate([rng.choice(next_id, half, replace=False), np.arange(next_id, next_id + batch_rows - half)])
        next_id += batch_rows - half
        batch = rows(rng.permutation(ids), rng)
        tl_s, _ = timed(lambda: t.upsert(batch))
        dl_s, _ = timed(lambda: dt.merge(batch, predicate="t.id = s.id", source_alias="s", target_alias="t")
                        .when_matched_update_all().when_not_matched_insert_all().execute())
        ratios.append(dl_s / tl_s)
        out.append(f"| {b + 1} | {tl_s:.2f} | {fmt(batch_rows / tl_s)} | {dl_s:.2f} | {fmt(batch_rows / dl_s)} | {dl_s / tl_s:.1f}x |")
        print(out[-1], flush=True)
    # both tables hold the same rows afterwards
    assert t.scan(columns=["id"]).num_rows == DeltaTable(f"{work}/delta").to_pyarrow_table(columns=["id"]).num_rows
    out.append(f"\nUpsert throughput ratio tidelake / delta-rs: median {statistics.median(ratios):.1f}x "
               f"(goal >= 2x). Both tables were checked to hold the same number of rows afterwards.")
    return out


def bench_snapshot(work: str, table_rows: int, rng) -> list[str]:
    buckets = 8
    t = Table.create(f"{work}/snap", SCHEMA, ["id"], {"write.bucket.num": str(buckets), "clustering.auto": "false"})
    t.insert_into(rows(np.arange(table_rows, dtype=np.int64), rng))
    t.compact()
    delta_rows = max(1000, table_rows // 200)      # each delta commit: 0.5 % of the table, all buckets
    out = ["| delta files per bucket | live files | scan s (merge on read) | scan s after compaction | rows |",
           "|---:|---:|---:|---:|---:|"]
    done = 0
    for target in (0, 10, 50):
        while done < target:
            t.upsert(rows(rng.choice(table_rows, delta_rows, replace=False), rng))
            done += 1
        files = len(t.plan())
        s, res = timed(lambda: t.scan(), repeat=3)
        n = res.num_rows
        # compaction on a copy so the delta count keeps growing in the original
        shutil.copytree(t.path, f"{work}/snapc")
        c = Table.open(f"{work}/snapc")
        c.compact()
        cs, _ = timed(lambda: c.scan(), repeat=3)
        shutil.rmtree(f"{work}/snapc")
        out.append(f"| {target} | {files} | {s:.2f} | {cs:.2f} | {fmt(n)} |")
        print(out[-1], flush=True)
    return out


def bench_incremental(work: str, sizes: list[int], increment: int, rng) -> list[str]:
    t = Table.create(f"{work}/inc", SCHEMA, ["id"], {"write.bucket.num": "16", "clustering.auto": "false"})
    out = ["| table rows | versions | changes(v-1, v] s | rows read |", "|---:|---:|---:|---:|"]
    have = 0
    for size in sizes:
        chunk = 1_000_000
        while have < size:      # grow in commits of up to 1M rows, compacting as a real table would
            n = min(chunk, size - have)
            t.insert_into(rows(np.arange(have, have + n, dtype=np.int64), rng))
            have += n
        t.compact()
        v = t.upsert(rows(rng.choice(have, increment, replace=False), rng))
        s, res = timed(lambda: t.changes(start_version=v - 1, end_version=v), repeat=5)
        out.append(f"| {fmt(have)} | {v} | {s:.3f} | {fmt(res.num_rows)} |")
        print(out[-1], flush=True)
    return out


def bench_point(work: str, table_rows: int, rng) -> list[str]:
    t = Table.create(f"{work}/pt", SCHEMA, ["id"], {"write.bucket.num": "16", "clustering.auto": "false"})
    t.insert_into(rows(np.arange(table_rows, dtype=np.int64), rng))
    t.compact()
    for _ in range(5):
        t.upsert(rows(rng.choice(table_rows, max(1000, table_rows // 100), replace=False), rng))
    keys = rng.choice(table_rows, 20, replace=False).tolist()
    pruned, _ = timed(lambda: [t.scan(filter={"id": k}) for k in keys])
    files = len(t.plan(filter={"id": keys[0]}))
    full, _ = timed(lambda: [t.scan(filter=pc.field("id") == k) for k in keys[:3]])   # expression: no pruning
    per_pruned, per_full = pruned / len(keys), full / 3
    return ["| lookup | files read | ms per lookup |", "|---|---:|---:|",
            f"| `scan(filter={{'id': k}})` (bucket pruning + min/max) | {files} | {per_pruned * 1000:.1f} |",
            f"| `scan(filter=pc.field('id') == k)` (full scan, then filter) | {len(t.plan())} | {per_full * 1000:.1f} |",
            f"\nPoint lookup speed-up from pruning: {per_full / per_pruned:.0f}x on {fmt(table_rows)} rows "
            f"(base + 5 delta files per bucket, 16 buckets)."]


def alternate(a, b, repeat: int) -> tuple[float, float, object, object, float, float]:
    """Median wall times of ``a`` and ``b`` run alternately ``repeat`` times (so both see the same
    moments of a shared machine), their last results, and their median CPU times."""
    ta, tb, ca, cb, ra, rb = [], [], [], [], None, None
    for _ in range(repeat):
        s, c, ra = timed_cpu(a)
        ta.append(s)
        ca.append(c)
        s, c, rb = timed_cpu(b)
        tb.append(s)
        cb.append(c)
    m = statistics.median
    return m(ta), m(tb), ra, rb, m(ca), m(cb)


def fsync_tree(path: str) -> None:
    """fsync every file and folder under ``path``: what it takes for files left in the page cache to
    survive a power loss."""
    from tidelake.fsutil import fsync_dir, fsync_file
    for folder, _dirs, files in os.walk(path):
        for f in files:
            fsync_file(os.path.join(folder, f))
        fsync_dir(folder)


def bench_versus_delta(work: str, load_rows: int, upsert_rows: int, upserts: int, deletes: int,
                       rng) -> list[tuple[str, float, float, float | None, float | None]]:
    """Side by side with delta-rs on the same data, each step timed on both, alternately: initial
    load, upserts (50 % updates), deletes by key, a full snapshot read before any compaction, the
    change feed of the last upsert, point lookups. delta-rs runs with its defaults (snappy), its
    change data feed on. Returns (step, tidelake s, delta-rs s, tidelake CPU s, delta-rs CPU s) per
    step (CPU times for the alternated steps)."""
    from deltalake import DeltaTable, write_deltalake
    base = rows(np.arange(load_rows, dtype=np.int64), rng)
    results: list[tuple[str, float, float, float | None, float | None]] = []
    loads = iter(range(1000))

    def tl_load(options=None):
        t = Table.create(f"{work}/vs-tl-{next(loads)}", SCHEMA, ["id"], {"write.bucket.num": "16", "clustering.auto": "false"},
                         storage_options=options)
        t.insert_into(base)
        return t
    dl_paths = iter(range(1000))

    def dl_load(durable=False):
        path = f"{work}/vs-dl-{next(dl_paths)}"
        write_deltalake(path, base, configuration={"delta.enableChangeDataFeed": "true"})
        if durable:
            fsync_tree(path)
        return path
    # delta-rs (object_store's local store) leaves what it wrote in the page cache; tidelake fsyncs its
    # data files and log entry before a commit returns. Both ways side by side: in the page cache
    # (tidelake with the storage option fsync=false) and on disk (delta-rs's files fsynced after it).
    tl_s, dl_s, _, _, tl_c, dl_c = alternate(lambda: tl_load({"fsync": "false"}), dl_load, 3)
    results.append((f"load {fmt(load_rows)} rows into the page cache (tidelake fsync=false; median of 3)",
                    tl_s, dl_s, tl_c, dl_c))
    tl_s, dl_s, t, dl_path, tl_c, dl_c = alternate(tl_load, lambda: dl_load(durable=True), 3)
    results.append((f"load {fmt(load_rows)} rows onto the disk (tidelake as it commits; delta-rs + fsync of "
                    "its files; median of 3)", tl_s, dl_s, tl_c, dl_c))
    dt = DeltaTable(dl_path)
    next_id = load_rows
    up_tl, up_dl = [], []
    for _ in range(upserts):
        half = upsert_rows // 2
        ids = np.concatenate([rng.choice(next_id, half, replace=False),
                              np.arange(next_id, next_id + upsert_rows - half)])
        next_id += upsert_rows - half
        batch = rows(rng.permutation(ids), rng)
        s, tl_version = timed(lambda: t.upsert(batch))
        up_tl.append(s)
        s, _ = timed(lambda: dt.merge(batch, predicate="t.id = s.id", source_alias="s", target_alias="t")
                     .when_matched_update_all().when_not_matched_insert_all().execute())
        up_dl.append(s)
    dl_version = dt.version()
    results.append((f"upsert {fmt(upsert_rows)} rows (median of {upserts})", statistics.median(up_tl),
                    statistics.median(up_dl), None, None))
    gone = pa.table({"id": pa.array(rng.choice(next_id, deletes, replace=False), pa.int64())})
    tl_s, _ = timed(lambda: t.delete(gone))
    dl_s, _ = timed(lambda: dt.merge(gone, predicate="t.id = s.id", source_alias="s", target_alias="t")
                    .when_matched_delete().execute())
    results.append((f"delete {fmt(deletes)} keys", tl_s, dl_s, None, None))
    tl_s, dl_s, snap, dsnap, tl_c, dl_c = alternate(lambda: t.scan(), lambda: DeltaTable(dl_path).to_pyarrow_table(), 5)
    assert snap.num_rows == dsnap.num_rows, (snap.num_rows, dsnap.num_rows)
    results.append((f"snapshot read, {fmt(snap.num_rows)} rows, before compaction (median of 5)", tl_s, dl_s, tl_c, dl_c))
    tl_s, dl_s, ch, dch, tl_c, dl_c = alternate(
        lambda: t.changes(start_version=tl_version - 1, end_version=tl_version),
        lambda: DeltaTable(dl_path).load_cdf(starting_version=dl_version, ending_version=dl_version).read_all(), 7)
    assert ch.num_rows == upsert_rows, ch.num_rows
    results.append((f"changes of the last upsert ({fmt(ch.num_rows)} rows; delta-rs: change data feed, "
                    f"{fmt(dch.num_rows)} rows; median of 7)", tl_s, dl_s, tl_c, dl_c))
    keys = rng.choice(next_id, 20, replace=False).tolist()
    tl_keys, dl_keys = iter(keys), iter(keys)
    tl_s, dl_s, _, _, _, _ = alternate(lambda: t.scan(filter={"id": next(tl_keys)}),
                                       lambda: dt.to_pyarrow_table(filters=[("id", "=", next(dl_keys))]), len(keys))
    results.append(("point lookup by key (median of 20)", tl_s, dl_s, None, None))
    return results


IMAGES_START, IMAGES_END = "<!-- table-before-images:start -->", "<!-- table-before-images:end -->"


def bench_before_images(work: str, load_rows: int, upsert_rows: int, upserts: int, deletes: int, rng,
                        repeat: int = 15) -> list[str]:
    """Issue 24, 6(c): ``changes(v-1, v, before_images=True)`` against ``changes(v-1, v)`` on the last
    upsert of the side-by-side workload (the same rows as ``bench_versus_delta`` with the same seed), on
    a table with ``changelog.producer=lookup`` (the images written by the commit) and on one without (the
    images looked up when read); and what writing the images costs the upserts: each batch upserted
    into both tables and MERGEd into delta-rs (change data feed on), alternately. The first call of each
    read (nothing of the older files read yet in this process), then the median of ``repeat``
    alternated calls, wall and CPU time."""
    from deltalake import DeltaTable, write_deltalake
    base = rows(np.arange(load_rows, dtype=np.int64), rng)
    tables = {}
    for producer in ("none", "lookup"):
        tables[producer] = Table.create(f"{work}/images-{producer}", SCHEMA, ["id"],
                                        {"write.bucket.num": "16", "clustering.auto": "false",
                                         "changelog.producer": producer})
        tables[producer].insert_into(base)
    write_deltalake(f"{work}/images-delta", base, configuration={"delta.enableChangeDataFeed": "true"})
    dt = DeltaTable(f"{work}/images-delta")
    del base
    next_id, version = load_rows, 0
    up: dict[str, list[tuple[float, float]]] = {"none": [], "lookup": [], "delta": []}
    for _ in range(upserts):
        half = upsert_rows // 2
        ids = np.concatenate([rng.choice(next_id, half, replace=False),
                              np.arange(next_id, next_id + upsert_rows - half)])
        next_id += upsert_rows - half
        batch = rows(rng.permutation(ids), rng)
        for producer, t in tables.items():
            s, c, version = timed_cpu(lambda: t.upsert(batch))
            up[producer].append((s, c))
        s, c, _ = timed_cpu(lambda: dt.merge(batch, predicate="t.id = s.id", source_alias="s", target_alias="t")
                            .when_matched_update_all().when_not_matched_insert_all().execute())
        up["delta"].append((s, c))
    gone = pa.table({"id": pa.array(rng.choice(next_id, deletes, replace=False), pa.int64())})
    for t in tables.values():
        t.delete(gone)
    for t in tables.values():   # (its background maintenance would count in the reads' process CPU time)
        t.maintenance.wait()
    stored, looked_up = tables["lookup"], tables["none"]
    assert all(fe.file.changes for fe in stored.metadata.files.values() if fe.file.min_version == version)

    def plain():
        return stored.changes(start_version=version - 1, end_version=version)

    def images():
        return stored.changes(start_version=version - 1, end_version=version, before_images=True)

    def lookup_images():
        return looked_up.changes(start_version=version - 1, end_version=version, before_images=True)
    first_images = timed_cpu(images)
    first_plain = timed_cpu(plain)
    a, b, ra, rb, ca, cb = alternate(plain, images, repeat)
    la, lb, _, rl, lca, lcb = alternate(plain, lookup_images, repeat)
    assert ra.num_rows == upsert_rows and rb.num_rows == upsert_rows + upsert_rows // 2, (ra.num_rows, rb.num_rows)
    assert rb.drop_columns(["_commit_time"]) == rl.drop_columns(["_commit_time"])   # (the two tables' clocks)
    m = statistics.median
    tl, tli, dl = (m(x[0] for x in up[k]) for k in ("none", "lookup", "delta"))
    tlc, tlic, dlc = (m(x[1] for x in up[k]) for k in ("none", "lookup", "delta"))
    out = ["| call | `changes()` s | `changes(before_images=True)` s | ratio | CPU s `changes()` / before-images | CPU ratio |",
           "|---|---:|---:|---:|---:|---:|",
           f"| stored images (`changelog.producer=lookup`), first call in the process | {first_plain[0]:.3f} | "
           f"{first_images[0]:.3f} | {first_images[0] / first_plain[0]:.2f}x | {first_plain[1]:.3f} / "
           f"{first_images[1]:.3f} | {first_images[1] / first_plain[1]:.2f}x |",
           f"| stored images (`changelog.producer=lookup`), median of {repeat}, alternated | {a:.3f} | {b:.3f} | "
           f"{b / a:.2f}x | {ca:.3f} / {cb:.3f} | {cb / ca:.2f}x |",
           f"| looked up when read (`changelog.producer=none`), median of {repeat}, alternated | {la:.3f} | {lb:.3f} | "
           f"{lb / la:.2f}x | {lca:.3f} / {lcb:.3f} | {lcb / lca:.2f}x |",
           "", f"Rows: {fmt(ra.num_rows)} changes; {fmt(rb.num_rows)} with before-images "
           f"({fmt(upsert_rows // 2)} inserts, {fmt(upsert_rows - upsert_rows // 2)} updates as preimage + postimage); "
           "both tables' feeds were checked equal.", "",
           f"What writing the images costs an upsert of {fmt(upsert_rows)} rows (median of {upserts}; each batch "
           "into the three tables in turn):", "",
           "| upsert | wall s | CPU s | delta-rs MERGE / this: wall, CPU | first upsert: wall s / CPU s |",
           "|---|---:|---:|---:|---:|",
           f"| tidelake, `changelog.producer=none` | {tl:.3f} | {tlc:.3f} | {dl / tl:.1f}x, {dlc / tlc:.1f}x | "
           f"{up['none'][0][0]:.3f} / {up['none'][0][1]:.3f} |",
           f"| tidelake, `changelog.producer=lookup` | {tli:.3f} | {tlic:.3f} | {dl / tli:.1f}x, {dlc / tlic:.1f}x | "
           f"{up['lookup'][0][0]:.3f} / {up['lookup'][0][1]:.3f} |",
           f"| delta-rs MERGE (change data feed on) | {dl:.3f} | {dlc:.3f} | 1.0x, 1.0x | "
           f"{up['delta'][0][0]:.3f} / {up['delta'][0][1]:.3f} |",
           "", f"Upsert with `lookup` / without: {tli / tl:.2f}x wall, {tlic / tlc:.2f}x CPU."]
    for line in out:
        print(line, flush=True)
    return out


def versus_table(results) -> list[str]:
    """One run of ``bench_versus_delta`` as a table."""
    out = ["| step | tidelake s | delta-rs s | delta-rs / tidelake | CPU s tidelake / delta-rs |", "|---|---:|---:|---:|---:|"]
    for name, a, b, ca, cb in results:
        cpu = f"{ca:.3f} / {cb:.3f}" if ca is not None else ""
        out.append(f"| {name} | {a:.3f} | {b:.3f} | {b / a:.2f}x | {cpu} |")
        print(out[-1], flush=True)
    return out


def versus_runs_table(runs) -> list[str]:
    """Several runs of ``bench_versus_delta`` side by side: per step, the ratio (delta-rs s vs
    tidelake s) of every run, then the CPU times of the steps that have them."""
    n = len(runs)
    out = ["| step | " + " | ".join(f"run {i + 1}" for i in range(n)) + " |", "|---|" + "---:|" * n]
    for i, (name, *_rest) in enumerate(runs[0]):
        cells = [f"{r[i][2] / r[i][1]:.2f}x ({r[i][2]:.3f} vs {r[i][1]:.3f})" for r in runs]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "CPU time, tidelake / delta-rs (s, median of the same calls; all threads, user + system):", "",
            "| step | " + " | ".join(f"run {i + 1}" for i in range(n)) + " |", "|---|" + "---:|" * n]
    for i, (name, _a, _b, ca, _cb) in enumerate(runs[0]):
        if ca is not None:
            out.append(f"| {name.split(' (')[0]} | " + " | ".join(f"{r[i][3]:.3f} / {r[i][4]:.3f}" for r in runs) + " |")
    return out


def bench_commit_latency(work: str, table_rows: int, batch_rows: int, commits: int, rng) -> list[str]:
    """Latency of a stream of upsert commits while automatic maintenance runs: clustering on, and a
    compaction of every bucket every 5 data commits (compaction.commit.num=5)."""
    t = Table.create(f"{work}/lat", SCHEMA, ["id"], {"write.bucket.num": "16", "clustering.auto": "true",
                                                    "clustering.l0.num": "4", "compaction.commit.num": "5"})
    t.insert_into(rows(np.arange(table_rows, dtype=np.int64), rng))
    lat = []
    for _ in range(commits):
        batch = rows(rng.choice(table_rows, batch_rows, replace=False), rng)
        s, _ = timed(lambda: t.upsert(batch))
        lat.append(s * 1000)
    t.maintenance.wait()       # background maintenance still running after the last commit
    ops = [h["operation"] for h in t.history()]
    p50, p99 = np.percentile(lat, 50), np.percentile(lat, 99)
    out = ["| commits | p50 ms | p99 ms | max ms | compactions | clusterings |", "|---:|---:|---:|---:|---:|---:|",
           f"| {commits} | {p50:.0f} | {p99:.0f} | {max(lat):.0f} | {ops.count('compact')} | {ops.count('cluster')} |"]
    print(out[-1], flush=True)
    return out


def write_results(section: str) -> None:
    replace_heading("Table", section)


RUNS_START, RUNS_END = "<!-- table-versus-runs:start -->", "<!-- table-versus-runs:end -->"


def versus_runs(runs: int, scale: float, write: bool) -> None:
    """``--runs N``: the side-by-side comparison N times (same data, a fresh pair of tables each
    time), one column per run, written between the RUNS markers inside the Table section."""
    import deltalake
    results, loads = [], []
    for i in range(runs):
        loads.append(os.getloadavg()[0])   # the other jobs on the machine, for reading the figures
        work = tempfile.mkdtemp(prefix="tidelake-bench-")
        try:
            results.append(bench_versus_delta(work, int(2_000_000 * scale), int(200_000 * scale), 5,
                                              int(20_000 * scale), np.random.default_rng(42)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"run {i + 1} of {runs}:", flush=True)
        versus_table(results[-1])
    command = " ".join(["nice -n -15 .venv/bin/python benchmarks/table_bench.py", *sys.argv[1:]])
    lines = [f"### Side by side with deltalake {deltalake.__version__}, {runs} runs: {fmt(int(2_000_000 * scale))}-row load, "
             f"5 x {fmt(int(200_000 * scale))}-row upserts (50 % updates), {fmt(int(20_000 * scale))} deletes, 16 buckets",
             "", f"Command: `{command}` (pyarrow {pa.__version__}). Cells: delta-rs / tidelake "
             "(above 1x: tidelake faster), then delta-rs s vs tidelake s. Machine load average (1 min) when each "
             "run started: " + ", ".join(f"{x:.1f}" for x in loads) + f" ({os.cpu_count()} cores).", "",
             *versus_runs_table(results)]
    print("\n".join(lines))
    if write:
        replace_marked(RUNS_START, RUNS_END, lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplier on every row count (1.0: 10M-row table)")
    ap.add_argument("--batches", type=int, default=3, help="upsert batches to time")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument("--only", default="versus,latency,upsert,snapshot,incremental,point",
                    help="sections to run; 'images' (not in the default): before-images against changes(), "
                         "written between its own markers in RESULTS.md")
    ap.add_argument("--runs", type=int, default=0,
                    help="run only the side-by-side comparison, this many times, and write just its subsection")
    args = ap.parse_args()
    s = args.scale
    if args.runs:
        versus_runs(args.runs, s, not args.no_write)
        return
    rng = np.random.default_rng(42)
    work = tempfile.mkdtemp(prefix="tidelake-bench-")
    only = set(args.only.split(","))
    if only == {"images"}:
        try:
            lines = bench_before_images(work, int(2_000_000 * s), int(200_000 * s), 5, int(20_000 * s), rng)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        command = " ".join(["nice -n -15 .venv/bin/python benchmarks/table_bench.py", *sys.argv[1:]])
        lines = [f"### Change feed with before-images against without (issue 24, 6(c)): the last of 5 x "
                 f"{fmt(int(200_000 * s))}-row upserts (50 % updates) into a {fmt(int(2_000_000 * s))}-row table, "
                 f"16 buckets, no compaction", "",
                 f"Command: `{command}` (pyarrow {pa.__version__}; load average {os.getloadavg()[0]:.1f} on "
                 f"{os.cpu_count()} cores at the end).", "", *lines]
        if not args.no_write:
            replace_marked(IMAGES_START, IMAGES_END, lines)
        return
    big, batch = int(10_000_000 * s), int(1_000_000 * s)
    parts = [f"Command: `.venv/bin/python benchmarks/table_bench.py --scale {s:g}` "
             f"(2-core machine shared with other jobs: expect +-30 % run to run). Rows: "
             f"`id int64 (PK), amount int64, price float64, category string`; tidelake writes LZ4 Parquet, delta-rs its default (snappy); "
             f"pyarrow {pa.__version__}."]
    try:
        if "versus" in only:
            import deltalake
            parts += [f"\n### Side by side with deltalake {deltalake.__version__} (delta-rs): {fmt(int(2_000_000 * s))}-row load, "
                      f"5 x {fmt(int(200_000 * s))}-row upserts (50 % updates), {fmt(int(20_000 * s))} deletes, 16 buckets\n",
                      "tidelake: `insert_into`, `upsert`, `delete(keys)`, `scan()`, `changes(v-1, v)`, "
                      "`scan(filter={'id': k})`; delta-rs: `write_deltalake` (change data feed on), MERGE update/insert, "
                      "MERGE delete, `to_pyarrow_table()`, `load_cdf(v, v)`, `to_pyarrow_table(filters=...)`. "
                      "Repeated steps run alternately on both.\n"]
            parts += versus_table(bench_versus_delta(work, int(2_000_000 * s), int(200_000 * s), 5, int(20_000 * s), rng))
        if "latency" in only:
            parts += [f"\n### Commit latency with automatic maintenance on: 60 upserts of "
                      f"{fmt(int(20_000 * s))} rows into a {fmt(int(1_000_000 * s))}-row table, 16 buckets, "
                      f"clustering.l0.num=4, compaction.commit.num=5\n"]
            parts += bench_commit_latency(work, int(1_000_000 * s), int(20_000 * s), 60, rng)
        if "upsert" in only:
            import deltalake
            parts += [f"\n### Upsert: {fmt(batch)}-row batches (50 % updates) into a {fmt(big)}-row table, "
                      f"vs deltalake {deltalake.__version__} MERGE (when matched update all, when not matched insert all)\n",
                      "tidelake: one `upsert` transaction (dedup, bucket, PK sort, write 16 delta files, one log commit); "
                      "merge-on-read, so the cost does not depend on the table size. delta-rs MERGE rewrites the "
                      "files holding matched rows (copy-on-write).\n"]
            parts += bench_upsert(work, big, batch, args.batches, rng)
        if "snapshot" in only:
            parts += [f"\n### Snapshot read of {fmt(int(2_000_000 * s))} rows, 8 buckets: base + N delta files per bucket "
                      f"(each delta commit upserts 0.5 % of the keys) vs the same table compacted\n"]
            parts += bench_snapshot(work, int(2_000_000 * s), rng)
        if "incremental" in only:
            inc = max(1000, int(100_000 * s))
            sizes = [int(x * s) for x in (1_000_000, 2_500_000, 5_000_000, 10_000_000)]
            parts += [f"\n### Incremental read of a fixed {fmt(inc)}-row increment as the table grows "
                      f"(reads only the delta files of (v-1, v]; should stay flat)\n"]
            parts += bench_incremental(work, sizes, inc, rng)
        if "point" in only:
            parts += [f"\n### Point lookup on a {fmt(int(5_000_000 * s))}-row table\n"]
            parts += bench_point(work, int(5_000_000 * s), rng)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    section = "\n".join(parts)
    print(section)
    if not args.no_write:
        write_results(section)


if __name__ == "__main__":
    main()
