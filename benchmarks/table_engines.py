"""The table against Spark's own table engines (issue 38.3b, in part): same rows, same machine, same run.

UNFINISHED: not yet run end to end (Delta on Spark ran at 20,000 rows; Iceberg, tidelake and delta-rs steps
not yet run); no figure of it is in RESULTS.md.

    .venv/bin/python benchmarks/table_engines.py [--rows 2500000]     # --rows 20000 for a quick run

Operations, each timed on tidelake and on every peer: bulk load (from one Parquet file of the rows), full read
(row count and checksum = sum(id) + sum(amount)), primary-key upsert of 1 % of the rows (half updates of
existing keys, half new keys), incremental read of the last commit's changes. Peers: Delta on Spark
(delta-spark 4.3.1, MERGE INTO, change data feed), Iceberg on Spark (1.12.0, Hadoop catalog, MERGE INTO,
create_changelog_view), delta-rs (``deltalake`` in the project's venv). Paimon: no Spark 4.1 runtime is in
the Maven list (/work/.library/env/packages/maven-partial.tsv has no Paimon artifact), so not measured.
Spark runs local[2] in one peer session (jvm/spark-peer/driver.py) for the whole run; its reads aggregate
inside Spark (count and sums), tidelake's and delta-rs's read into Arrow and sum there.

This file is also the peer driver's operations module (``PEER_OPS_MODULE``): ``ops(spark)`` runs in the peer
venv, so nothing at its top level imports tidelake or the project's dependencies.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def iceberg_name(path: str) -> str:
    return f"{Path(path).parent.name}_{Path(path).name}"


def ops(spark) -> dict:
    """Spark's engines, run inside the peer driver (driver.py)."""
    from pyspark.sql import functions as F

    def summary(df) -> dict:
        r = df.agg(F.count("*").alias("n"), F.sum("id").alias("ids"), F.sum("amount").alias("amounts")).collect()[0]
        return {"rows": r["n"], "checksum": (r["ids"] or 0) + (r["amounts"] or 0)}

    def timed(fn) -> dict:
        t0 = time.perf_counter()
        out = fn()
        return {"seconds": time.perf_counter() - t0, **(out or {})}

    def table_of(engine: str, path: str) -> str:
        if engine == "delta":
            return f"delta.`{path}`"
        spark.conf.set("spark.sql.catalog.ice", "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set("spark.sql.catalog.ice.type", "hadoop")
        # a catalog reads its settings once, at first use: one warehouse per run, one table per path
        spark.conf.set("spark.sql.catalog.ice.warehouse", str(Path(path).parents[1] / "iceberg-warehouse"))
        return f"ice.bench.`{iceberg_name(path)}`"

    def load(engine: str, source: str, path: str) -> dict:
        name = table_of(engine, path)

        def run():
            df = spark.read.parquet(source)
            if engine == "delta":
                df.write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)
            else:
                df.writeTo(name).using("iceberg").tableProperty("format-version", "2").create()
        return timed(run)

    def read(engine: str, path: str) -> dict:
        return timed(lambda: summary(spark.table(table_of(engine, path))))

    def upsert(engine: str, source: str, path: str) -> dict:
        name = table_of(engine, path)
        spark.read.parquet(source).createOrReplaceTempView("upsert_source")
        return timed(lambda: spark.sql(f"MERGE INTO {name} t USING upsert_source s ON t.id = s.id "
                                       "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").collect()
                     and None)

    def changes(engine: str, path: str) -> dict:
        name = table_of(engine, path)
        if engine == "delta":
            v = spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").collect()[0]["version"]

            def run():
                df = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", v)
                      .option("endingVersion", v).load(path).where("_change_type != 'update_preimage'"))
                return summary(df)
            return timed(run)
        snaps = spark.sql(f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at").collect()
        prev, last = snaps[-2]["snapshot_id"], snaps[-1]["snapshot_id"]

        def run():
            view = spark.sql(f"CALL ice.system.create_changelog_view(table => 'bench.`{iceberg_name(path)}`', "
                             f"options => map('start-snapshot-id', '{prev}', 'end-snapshot-id', '{last}'), "
                             "compute_updates => true, identifier_columns => array('id'))").collect()[0][0]
            return summary(spark.table(view).where("_change_type != 'UPDATE_BEFORE'"))
        return timed(run)

    return {"engine_load": load, "engine_read": read, "engine_upsert": upsert, "engine_changes": changes}


def load_avg() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average:")[-1].strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_500_000)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "jvm" / "spark-peer"))
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake
    from peer_client import PeerSpark
    from table_bench import SCHEMA, rows

    from tidelake.table import Table

    def summary(t) -> dict:
        return {"rows": t.num_rows, "checksum": (pc.sum(t["id"]).as_py() or 0) + (pc.sum(t["amount"]).as_py() or 0)}

    def timed(fn) -> dict:
        t0 = time.perf_counter()
        out = fn()
        return {"seconds": time.perf_counter() - t0, **(out or {})}

    rng = np.random.default_rng(38)
    n, k = args.rows, max(2, args.rows // 100)
    base = rows(np.arange(n, dtype=np.int64), rng)
    ids = np.concatenate([rng.choice(n, k // 2, replace=False), np.arange(n, n + k - k // 2)])
    batch = rows(rng.permutation(ids), rng)
    results: dict[str, dict[str, dict]] = {}
    loads = [load_avg()]
    with tempfile.TemporaryDirectory(prefix="tidelake-engines-") as tmp:
        work = Path(tmp)
        pq.write_table(base, work / "base.parquet")
        pq.write_table(batch, work / "upsert.parquet")
        with PeerSpark(log_path=work / "peer.log", env={"PEER_OPS_MODULE": str(Path(__file__).resolve()),
                                                         "PEER_DRIVER_MEMORY": "3g"}) as peer:
            for engine in ("delta", "iceberg"):   # warm-up: JIT, classes, catalogs
                p = str(work / "warm" / engine)
                peer.call("engine_load", engine=engine, source=str(work / "upsert.parquet"), path=p)
                peer.call("engine_read", engine=engine, path=p)
            for engine in ("delta", "iceberg"):
                p = str(work / "spark" / engine)
                r = results[f"{engine} on Spark"] = {}
                r["load"] = peer.call("engine_load", timeout_s=3600, engine=engine,
                                      source=str(work / "base.parquet"), path=p)
                r["read"] = peer.call("engine_read", timeout_s=3600, engine=engine, path=p)
                r["upsert"] = peer.call("engine_upsert", timeout_s=3600, engine=engine,
                                        source=str(work / "upsert.parquet"), path=p)
                r["changes"] = peer.call("engine_changes", timeout_s=3600, engine=engine, path=p)
                print(engine, json.dumps(r), flush=True)
        loads.append(load_avg())
        r = results["tidelake"] = {}
        t_holder = {}

        def tl_load():
            t = t_holder["t"] = Table.create(str(work / "tidelake"), SCHEMA, ["id"], {"write.bucket.num": "16"})
            t.insert_into(pq.read_table(work / "base.parquet"))
        r["load"] = timed(tl_load)
        t = t_holder["t"]
        r["read"] = timed(lambda: summary(t.scan()))
        version = {}
        r["upsert"] = timed(lambda: version.setdefault("v", t.upsert(pq.read_table(work / "upsert.parquet"))))
        v = version["v"]
        r["changes"] = timed(lambda: summary(t.changes(start_version=v - 1, end_version=v)))
        print("tidelake", json.dumps(r), flush=True)
        r = results["delta-rs"] = {}
        dl = str(work / "deltars")
        r["load"] = timed(lambda: write_deltalake(dl, pq.read_table(work / "base.parquet"),
                                                  configuration={"delta.enableChangeDataFeed": "true"}))
        r["read"] = timed(lambda: summary(DeltaTable(dl).to_pyarrow_table()))
        r["upsert"] = timed(lambda: DeltaTable(dl).merge(pq.read_table(work / "upsert.parquet"), predicate="t.id = s.id",
                                                         source_alias="s", target_alias="t")
                            .when_matched_update_all().when_not_matched_insert_all().execute() and None)

        def dl_changes():
            d = DeltaTable(dl)
            ch = d.load_cdf(starting_version=d.version(), ending_version=d.version()).read_all()
            return summary(ch.filter(pc.not_equal(ch["_change_type"], "update_preimage")))
        r["changes"] = timed(dl_changes)
        print("delta-rs", json.dumps(r), flush=True)
        loads.append(load_avg())
    expected_read = {"rows": n, "checksum": summary(base)["checksum"]}
    expected_changes = summary(batch)
    ours = results["tidelake"]
    print(f"\nCommand: `nice -n 10 .venv/bin/python benchmarks/table_engines.py --rows {n}` (upsert {k:,} rows)\n")
    print("| operation | tidelake s | " + " | ".join(f"{p} s (ratio)" for p in results if p != "tidelake") + " |")
    print("|---|---:|" + "---:|" * (len(results) - 1))
    for op in ("load", "read", "upsert", "changes"):
        cells = []
        for peer_name, pr in results.items():
            if peer_name == "tidelake":
                continue
            cells.append(f"{pr[op]['seconds']:.2f} ({pr[op]['seconds'] / ours[op]['seconds']:.2f}x)")
        print(f"| {op} | {ours[op]['seconds']:.2f} | " + " | ".join(cells) + " |")
    ok = True
    for name, pr in results.items():
        for op, want in (("read", expected_read), ("changes", expected_changes)):
            got = {"rows": pr[op].get("rows"), "checksum": pr[op].get("checksum")}
            if got != want:
                ok = False
                print(f"MISMATCH {name} {op}: {got} != {want}")
    print(f"\nresults equal (rows, checksum) across engines: {ok}; load (1, 5, 15 min): {'; '.join(loads)}")


if __name__ == "__main__":
    main()
