"""The table against Spark's own table engines (issue 38.3b): same rows, same machine, same run.

    .venv/bin/python benchmarks/table_engines.py [--rows 2500000] [--repeats 3]   # --rows 20000 for a quick run
    .venv/bin/python benchmarks/table_engines.py --rows 20000 --engines tidelake,delta-rs   # a subset
    .venv/bin/python benchmarks/table_engines.py --engines tidelake --profile load,changes_before --profile-dir D

Ran end to end at 20,000 and 2,500,000 rows (RESULTS.md, "The table vs Spark's own engines"); 50,000,000 rows
not yet run.

Steps, in this order, each timed on tidelake and on every peer (the same Parquet files are the input of all):

- ``load``: bulk load of the N rows (id primary key, amount, price, category) from one Parquet file;
- ``read``: full read, row count and checksum (sum(id) + sum(amount));
- ``upsert``: primary-key upsert of 1 % of N (half updates of existing keys, half new keys);
- ``changes``: the upsert's changes, after-images only (tidelake ``changes()``; Delta's change data feed
  without ``update_preimage``; Iceberg's changelog view without ``UPDATE_BEFORE``);
- ``changes_before``: the same with before-images (tidelake ``changes(before_images=True)``; Delta's change data
  feed, all change types; Iceberg ``create_changelog_view`` with ``compute_updates``);
- ``delete``: delete of 1 % of the keys (tidelake ``delete(keys)``; ``MERGE ... WHEN MATCHED THEN DELETE`` on
  Spark; delta-rs ``merge().when_matched_delete()``);
- ``point``: point lookup of one key (an updated one), its row;
- ``read_after``: full read again, after the upsert and the delete (the merge on read that a primary-key table
  without a compaction in between pays).

Each result is checked against the one computed from the generated rows (numpy, in this process): rows and
checksum of every read, change feed and lookup, for every engine. Peers: Delta on Spark (delta-spark 4.3.1,
MERGE INTO, change data feed on), Iceberg on Spark (iceberg-spark-runtime-4.1 1.12.0, Hadoop catalog, format 2,
MERGE INTO, create_changelog_view), delta-rs (``deltalake`` in the project's venv). Paimon on Spark: Maven
Central as this machine reaches it serves no paimon-spark jar (2026-12-02, ``mvn dependency:get``, "Could not
find artifact": org.apache.paimon:paimon-spark-4.1_2.13:1.4.2, paimon-spark-4.1:1.4.2, paimon-spark-4.0_2.13:1.4.2,
paimon-spark-4.0:1.4.2, paimon-spark-4.0:1.3.2; /work/.library/env/packages/maven-partial.tsv lists no Paimon
artifact), so jvm/spark-peer/pom.xml has none and Paimon is not measured.

Every engine runs in a process of its own, one after the other, each first given the same steps on a small
table (warm-up: JIT, classes, catalogs, imports), then the steps on new tables: ``--repeats`` times for tidelake
and delta-rs (the median per step is reported), once for Spark's engines. Wall seconds and CPU seconds (the
process's, every thread, from /proc/PID/stat: on a shared machine the steadier figure) per step. Spark
(local[2], one SparkSession per engine, driver memory 3 GB) in the peer driver (jvm/spark-peer/driver.py),
tidelake and delta-rs in a child of the project's venv (``--serve``). tidelake runs twice: with its creation
defaults (``tidelake``, the one the ratios are of) and with ``changelog.producer=lookup`` (``tidelake-lookup``:
the before-images written at commit, as Delta with its change data feed on writes ``_change_data`` in a MERGE).
Peak RSS is per step: the process's high-water mark is reset before the step (Linux ``/proc/PID/clear_refs``)
and read after it; for Spark it is the JVM's plus the driver's Python (a JVM keeps
the heap it has grown, so its figure is at least what the steps before left resident). Spark's reads aggregate
inside Spark (count and sums); tidelake's and delta-rs's read into Arrow and sum there. tidelake's automatic
maintenance (a background thread) is waited for after each write, outside the step's time, and reported.

This file is also the peer driver's operations module (``PEER_OPS_MODULE``): ``ops(spark)`` runs in the peer
venv, so nothing at its top level imports tidelake or the project's dependencies.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("load", "read", "upsert", "changes", "changes_before", "delete", "point", "read_after")
SPARK_ENGINES = {"delta on Spark": "delta", "iceberg on Spark": "iceberg"}
LOCAL_ENGINES = ("tidelake", "tidelake-lookup", "delta-rs")
#: tidelake's table properties per variant: "tidelake-lookup" writes its before-images at commit
#: (changelog.producer=lookup), as Delta with its change data feed on writes _change_data files in a MERGE
TIDELAKE_PROPERTIES = {"tidelake": {"write.bucket.num": "16"},
                       "tidelake-lookup": {"write.bucket.num": "16", "changelog.producer": "lookup"}}
ANSWER = "ANSWER "
BUCKETS = "16"


# ---------------------------------------------------------------- peak RSS of a process, per step
def peak_rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def reset_peak_rss(pid: int | str = "self") -> None:
    """The high-water mark restarts from the current RSS (Linux: clear_refs 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU time of every thread of a process so far (/proc/PID/stat utime, stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(fn, pids: tuple = ("self",)) -> dict:
    """Wall seconds, CPU seconds (the processes', all threads) and peak RSS (MB) of one call."""
    for p in pids:
        reset_peak_rss(p)
    c0 = sum(cpu_seconds(p) for p in pids)
    t0 = time.perf_counter()
    out = fn() or {}
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "cpu_s": sum(cpu_seconds(p) for p in pids) - c0,
            "peak_rss_mb": sum(peak_rss_mb(p) for p in pids), **out}


# ---------------------------------------------------------------- Spark's engines (in the peer venv)
def iceberg_name(path: str) -> str:
    """One name per table path, a plain identifier (a changelog view's name is not quoted)."""
    return "".join(c if c.isalnum() else "_" for c in f"{Path(path).parent.name}_{Path(path).name}")


def ops(spark) -> dict:
    """Spark's engines, run inside the peer driver (driver.py)."""
    from pyspark.sql import functions as F
    pids = (int(spark._jvm.java.lang.ProcessHandle.current().pid()), os.getpid())

    def summary(df) -> dict:
        r = df.agg(F.count("*").alias("n"), F.sum("id").alias("ids"), F.sum("amount").alias("amounts")).collect()[0]
        return {"rows": r["n"], "checksum": (r["ids"] or 0) + (r["amounts"] or 0)}

    def table_of(engine: str, path: str) -> str:
        if engine == "delta":
            return f"delta.`{path}`"
        spark.conf.set("spark.sql.catalog.ice", "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set("spark.sql.catalog.ice.type", "hadoop")
        # a catalog reads its settings once, at first use: one warehouse per process, one table per path
        spark.conf.set("spark.sql.catalog.ice.warehouse", str(Path(path).parents[1] / "iceberg-warehouse"))
        return f"ice.bench.`{iceberg_name(path)}`"

    def last_commit(engine: str, name: str) -> tuple:
        if engine == "delta":
            v = spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").collect()[0]["version"]
            return v, v
        snaps = spark.sql(f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at").collect()
        return snaps[-2]["snapshot_id"], snaps[-1]["snapshot_id"]

    def change_feed(engine: str, path: str, name: str, commit: tuple, step: str, before_images: bool):
        if engine == "delta":
            df = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", commit[1])
                  .option("endingVersion", commit[1]).load(path))
            return df if before_images else df.where("_change_type != 'update_preimage'")
        view = spark.sql(f"CALL ice.system.create_changelog_view(table => 'bench.`{iceberg_name(path)}`', "
                         f"options => map('start-snapshot-id', '{commit[0]}', 'end-snapshot-id', '{commit[1]}'), "
                         f"changelog_view => '{iceberg_name(path)}_{step}', "
                         "compute_updates => true, identifier_columns => array('id'))").collect()[0][0]
        df = spark.table(view)
        return df if before_images else df.where("_change_type != 'UPDATE_BEFORE'")

    def engine_step(engine: str, step: str, path: str, source: str | None = None, key: int | None = None) -> dict:
        name = table_of(engine, path)
        if step == "load":
            def run():
                df = spark.read.parquet(source)
                if engine == "delta":
                    df.write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)
                else:
                    df.writeTo(name).using("iceberg").tableProperty("format-version", "2").create()
        elif step in ("read", "read_after"):
            def run():
                return summary(spark.table(name))
        elif step in ("upsert", "delete"):
            view = f"{step}_source"
            spark.read.parquet(source).createOrReplaceTempView(view)
            action = ("WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *" if step == "upsert"
                      else "WHEN MATCHED THEN DELETE")

            def run():
                spark.sql(f"MERGE INTO {name} t USING {view} s ON t.id = s.id {action}").collect()
        elif step in ("changes", "changes_before"):
            commit = last_commit(engine, name)

            def run():
                return summary(change_feed(engine, path, name, commit, step, step == "changes_before"))
        elif step == "point":
            def run():
                rows = spark.table(name).where(F.col("id") == key).select("id", "amount").collect()
                return {"rows": len(rows), "checksum": sum(r["id"] + r["amount"] for r in rows)}
        else:
            raise ValueError(step)
        return measured(run, pids)

    return {"engine_step": engine_step}


# ---------------------------------------------------------------- tidelake and delta-rs (the project's venv)
def local_steps(engine: str):
    """``step(step, path, source, key) -> dict`` of one local engine, in the --serve child."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    def summary(t) -> dict:
        return {"rows": t.num_rows, "checksum": (pc.sum(t["id"]).as_py() or 0) + (pc.sum(t["amount"]).as_py() or 0)}

    if engine in TIDELAKE_PROPERTIES:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from table_bench import SCHEMA

        from tidelake.table import Table
        tables: dict = {}
        data_version: dict = {}   # path -> the last data commit (maintenance commits come after it)

        def written(t, fn) -> dict:
            out = measured(fn)
            t0 = time.perf_counter()
            t.maintenance.wait()   # the background thread's work, off the writer's path: waited, reported
            return {**out, "maintenance_s": time.perf_counter() - t0}

        def step(step: str, path: str, source: str | None = None, key: int | None = None) -> dict:
            if step == "load":
                t = tables[path] = Table.create(path, SCHEMA, ["id"], TIDELAKE_PROPERTIES[engine])
                return written(t, lambda: t.insert_into(pq.read_table(source)) and None)
            t = tables[path]
            if step in ("read", "read_after"):
                return measured(lambda: summary(t.scan()))
            if step == "upsert":
                return written(t, lambda: data_version.update({path: t.upsert(pq.read_table(source))}))
            if step == "delete":
                return written(t, lambda: t.delete(pq.read_table(source)) and None)
            if step in ("changes", "changes_before"):
                v = data_version[path]
                return measured(lambda: summary(t.changes(start_version=v - 1, end_version=v,
                                                          before_images=step == "changes_before")))
            if step == "point":
                return measured(lambda: summary(t.scan(filter=[("id", "=", key)])))
            raise ValueError(step)
        return step

    from deltalake import DeltaTable, write_deltalake

    def merge(path: str, source: str, upsert: bool):
        m = DeltaTable(path).merge(pq.read_table(source), predicate="t.id = s.id", source_alias="s",
                                   target_alias="t")
        m = m.when_matched_update_all().when_not_matched_insert_all() if upsert else m.when_matched_delete()
        m.execute()

    def changes(path: str, before_images: bool) -> dict:
        d = DeltaTable(path)
        ch = pa.table(d.load_cdf(starting_version=d.version(), ending_version=d.version()).read_all())
        if not before_images:   # (delta-rs gives string_view columns, which filter has no kernel for)
            ch = ch.select(["id", "amount"]).filter(pc.not_equal(pc.cast(ch["_change_type"], pa.string()),
                                                                 "update_preimage"))
        return summary(ch)

    def step(step: str, path: str, source: str | None = None, key: int | None = None) -> dict:
        if step == "load":
            return measured(lambda: write_deltalake(path, pq.read_table(source),
                                                    configuration={"delta.enableChangeDataFeed": "true"}))
        if step in ("read", "read_after"):
            return measured(lambda: summary(DeltaTable(path).to_pyarrow_table()))
        if step in ("upsert", "delete"):
            return measured(lambda: merge(path, source, step == "upsert"))
        if step in ("changes", "changes_before"):
            return measured(lambda: changes(path, step == "changes_before"))
        if step == "point":
            return measured(lambda: summary(DeltaTable(path).to_pyarrow_table(filters=[("id", "=", key)])))
        raise ValueError(step)
    return step


def serve(engine: str, profile: set[str], profile_dir: str | None) -> None:
    """The --serve child: one JSON request a line on stdin, one ``ANSWER`` line on stdout each. A step named
    in ``profile`` runs under cProfile; its statistics go to PROFILE_DIR/ENGINE-STEP.txt (the last call's:
    the measured table's, after the warm-up's)."""
    sys.path.insert(0, str(ROOT))
    steps = local_steps(engine)

    def step(**req) -> dict:
        if req["step"] not in profile:
            return steps(**req)
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile()
        out = prof.runcall(steps, **req)
        text = io.StringIO()
        st = pstats.Stats(prof, stream=text)
        st.sort_stats("cumulative").print_stats(35)
        st.sort_stats("tottime").print_stats(25)
        Path(profile_dir, f"{engine}-{req['step']}.txt").write_text(text.getvalue())
        return out
    print(ANSWER + json.dumps({"ok": True, "ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        req.pop("op")
        req.pop("engine")
        try:
            out = {"ok": True, **step(**req)}
        except Exception as e:  # one line back to the caller
            out = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        print(ANSWER + json.dumps(out), flush=True)


class LocalEngine:
    """A --serve child of this file, called like the peer driver (``call(op, **args)``)."""

    def __init__(self, engine: str, log_path: Path, profile: tuple = ()):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", engine, *profile],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                         text=True)
        self.log_path = log_path
        self._read(300)

    def _read(self, timeout_s: float) -> dict:
        out: dict = {}

        def read():
            for line in self.proc.stdout:
                if line.startswith(ANSWER):
                    out["answer"] = json.loads(line[len(ANSWER):])
                    return
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout_s)
        if "answer" not in out:
            raise RuntimeError(f"the engine process gave no answer (its log: {self.log_path})")
        return out["answer"]

    def call(self, op: str, timeout_s: float = 600, **args) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        ans = self._read(timeout_s)
        if not ans.pop("ok"):
            raise RuntimeError(ans["error"])
        return ans

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(120)

    def __enter__(self) -> "LocalEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------- the run
def load_avg() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average:")[-1].strip()


READ_STEPS = ("read", "changes", "changes_before", "point", "read_after")   # steps that change nothing


def run_steps(engine_proc, engine: str, table: Path, files: dict, key: int, timeout_s: float,
              read_repeats: int = 1) -> dict:
    """The steps on one new table; a read-only step ``read_repeats`` times in a row (its median kept)."""
    out = {}
    for step in STEPS:
        source = files.get(step)
        calls = [engine_proc.call("engine_step", timeout_s=timeout_s, engine=engine, step=step, path=str(table),
                                  source=str(source) if source else None, key=key)
                 for _ in range(read_repeats if step in READ_STEPS else 1)]
        out[step] = median_of(calls)
    return out


def median_of(got: list[dict]) -> dict:
    """The median of the calls' wall seconds, CPU seconds and peak RSS (each on its own), the rest of the first
    call's answer (rows and checksum: None unless every call answered the same), every call's wall seconds."""
    import statistics
    out = {**got[0], **{m: statistics.median(g[m] for g in got) for m in ("seconds", "cpu_s", "peak_rss_mb")},
           "all_seconds": [s for g in got for s in g.get("all_seconds", [round(g["seconds"], 3)])]}
    for g in got[1:]:
        if (g.get("rows"), g.get("checksum")) != (got[0].get("rows"), got[0].get("checksum")):
            out["rows"] = out["checksum"] = None
    return out


def median_steps(runs: list[dict]) -> dict:
    """Per step, the median over the runs (``median_of``)."""
    return {step: median_of([r[step] for r in runs]) for step in STEPS}


def expected_results(base, batch, gone_ids, key: int) -> dict:
    """What every engine must answer, from the generated rows (numpy)."""
    import numpy as np

    def checksum(ids, amounts) -> int:
        return int(np.sum(ids, dtype=np.int64)) + int(np.sum(amounts, dtype=np.int64))
    b_id, b_amt = base["id"].to_numpy(), base["amount"].to_numpy()
    u_id, u_amt = batch["id"].to_numpy(), batch["amount"].to_numpy()
    updated = u_id < len(b_id)   # base ids are 0..N-1: those keys existed (update), the others are new
    pre_ids = u_id[updated]      # before-images: the base rows of the updated keys (base row i has id i)
    after = {int(i): int(a) for i, a in zip(u_id, u_amt)}
    cur_id = np.concatenate([b_id[~np.isin(b_id, u_id)], u_id])
    cur_amt = np.concatenate([b_amt[~np.isin(b_id, u_id)], u_amt])
    left = ~np.isin(cur_id, gone_ids)
    return {
        "read": {"rows": len(b_id), "checksum": checksum(b_id, b_amt)},
        "changes": {"rows": len(u_id), "checksum": checksum(u_id, u_amt)},
        "changes_before": {"rows": len(u_id) + len(pre_ids),
                           "checksum": checksum(u_id, u_amt) + checksum(pre_ids, b_amt[pre_ids])},
        "point": {"rows": 1, "checksum": key + after[key]},
        "read_after": {"rows": int(left.sum()), "checksum": checksum(cur_id[left], cur_amt[left])},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_500_000)
    ap.add_argument("--engines", default=",".join([*LOCAL_ENGINES, *SPARK_ENGINES]),
                    help="comma-separated: tidelake, delta-rs, delta on Spark, iceberg on Spark")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds one step may take")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the steps on tidelake and delta-rs, each on "
                    "new tables (the median per step is reported; Spark's engines run once)")
    ap.add_argument("--read-repeats", type=int, default=1, help="calls of each read-only step in a row on "
                    "tidelake and delta-rs (their median is the run's figure)")
    ap.add_argument("--json", help="write every result (and the expected ones) to this file")
    ap.add_argument("--profile", default="", help="comma-separated steps to run under cProfile (local engines;"
                    " their times then include the profiler's overhead)")
    ap.add_argument("--profile-dir", default="/tmp", help="where the profiles go (ENGINE-STEP.txt)")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, set(filter(None, args.profile.split(","))), args.profile_dir)
        return
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "jvm" / "spark-peer"))
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from peer_client import PeerSpark
    from table_bench import rows

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    rng = np.random.default_rng(38)
    n, k = args.rows, max(2, args.rows // 100)
    base = rows(np.arange(n, dtype=np.int64), rng)
    updated = rng.choice(n, k // 2, replace=False)
    batch = rows(rng.permutation(np.concatenate([updated, np.arange(n, n + k - k // 2)])), rng)
    gone = np.sort(rng.choice(n + k - k // 2, max(1, n // 100), replace=False))   # 1 % of the keys then live
    gone_set = set(gone.tolist())
    key = int(next(i for i in updated if i not in gone_set))
    expected = expected_results(base, batch, gone, key)
    small = max(200, n // 1000)
    results: dict[str, dict[str, dict]] = {}
    loads = {"start": load_avg()}
    began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="tidelake-engines-") as tmp:
        work = Path(tmp)
        pq.write_table(base, work / "base.parquet")
        pq.write_table(batch, work / "upsert.parquet")
        pq.write_table(pa.table({"id": pa.array(gone, pa.int64())}), work / "delete.parquet")
        pq.write_table(base.slice(0, small), work / "warm-base.parquet")
        pq.write_table(batch.slice(0, small), work / "warm-upsert.parquet")
        pq.write_table(pa.table({"id": pa.array(np.arange(0, small, 7), pa.int64())}), work / "warm-delete.parquet")
        files = {"load": work / "base.parquet", "upsert": work / "upsert.parquet", "delete": work / "delete.parquet"}
        warm = {"load": work / "warm-base.parquet", "upsert": work / "warm-upsert.parquet",
                "delete": work / "warm-delete.parquet"}
        for name in engines:
            if name in SPARK_ENGINES:
                engine = SPARK_ENGINES[name]
                proc = PeerSpark(log_path=work / f"{engine}.log",
                                 env={"PEER_OPS_MODULE": str(Path(__file__).resolve()), "PEER_DRIVER_MEMORY": "3g"})
            else:
                engine = name
                profile = ("--profile", args.profile, "--profile-dir", args.profile_dir) if args.profile else ()
                proc = LocalEngine(name, work / f"{name}.log", profile)
            with proc:
                tag = engine.replace(" ", "-")
                run_steps(proc, engine, work / "warm" / tag, warm, int(batch["id"][0].as_py()), args.timeout)
                local = name not in SPARK_ENGINES
                runs = [run_steps(proc, engine, work / f"tables-{r}" / tag, files, key, args.timeout,
                                  args.read_repeats if local else 1)
                        for r in range(args.repeats if local else 1)]
                results[name] = median_steps(runs)
            loads[f"after {name}"] = load_avg()
            print(name, json.dumps(results[name]), flush=True)
    report(args, n, k, len(gone), results, expected, loads, began)


def ratio(theirs: float, ours: float, ticks: bool) -> str:
    """theirs / ours; CPU time counts in 10 ms ticks, so a figure under 2 ticks gives only a bound."""
    tick = 0.02
    if ticks and ours < tick and theirs < tick:
        return "-"
    if ticks and ours < tick:
        return f"> {theirs / tick:.2f}x"
    if ticks and theirs < tick:
        return f"< {tick / ours:.2f}x"
    return f"{theirs / max(ours, 1e-3):.2f}x"


def report(args, n: int, k: int, d: int, results: dict, expected: dict, loads: dict, began: str) -> None:
    ours = results.get("tidelake")
    peers = [p for p in results if p != "tidelake"]
    print(f"\nCommand: `nice -n 10 .venv/bin/python benchmarks/table_engines.py --rows {n} --repeats {args.repeats}"
          f" --read-repeats {args.read_repeats}`"
          f" ({began}; upsert {k:,} rows, delete {d:,} keys)")
    for title, metric in (("wall seconds (peak RSS MB)", "seconds"), ("CPU seconds, all threads", "cpu_s")):
        print(f"\n{title}\n")
        head = "| step | " + " | ".join(f"{e}" for e in ["tidelake", *peers] if e in results)
        print(head + (" | " + " | ".join(f"{p} / tidelake" for p in peers) if ours else "") + " |")
        print("|---|" + "---:|" * (len(results) + (len(peers) if ours else 0)))
        for step in STEPS:
            cells = [f"{results[e][step][metric]:.2f}" + (f" ({results[e][step]['peak_rss_mb']:.0f})"
                                                          if metric == "seconds" else "")
                     for e in ["tidelake", *peers] if e in results]
            if ours:
                cells += [ratio(results[p][step][metric], ours[step][metric], metric == "cpu_s") for p in peers]
            print(f"| {step} | " + " | ".join(cells) + " |")
    if ours:
        maint = {s: round(r["maintenance_s"], 2) for s, r in ours.items() if "maintenance_s" in r}
        print(f"\ntidelake's background maintenance waited for after each write (s, not in the step): {maint}")
    ok = True
    for name, pr in results.items():
        for step, want in expected.items():
            got = {"rows": pr[step].get("rows"), "checksum": pr[step].get("checksum")}
            if got != want:
                ok = False
                print(f"MISMATCH {name} {step}: {got} != {want}")
    print(f"\nresults equal (rows, checksum) across engines and to the generated rows: {ok}")
    print("load (1, 5, 15 min): " + "; ".join(f"{k} {v}" for k, v in loads.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": n, "results": results, "expected": expected,
                                               "loads": loads, "began": began, "equal": ok}, indent=1))

if __name__ == "__main__":
    main()
