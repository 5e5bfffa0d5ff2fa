"""Kafka -> table: tidelake's pipeline against the Spark recipe a Spark user would pick instead (issue 38.3a).

    .venv/bin/python benchmarks/spark_peers.py [--records 400000] [--batch 50000] [--repeats 2]

The same N Debezium change events (creates, then updates of the same N/2 keys: 50 % updates, ~110 B each;
benchmarks/pipeline_throughput.py's events) in one 4-partition topic of one tidelake broker, read by:

1. tidelake's pipeline, exactly-once (offsets committed with the table version), ``run(once=True)`` on Spark
   ``local[2]`` (PySpark 4.3.0, the project's venv), ``--batch`` records per partition per batch;
2. Spark Structured Streaming (PySpark 4.1.1 in the peer venv, jvm/spark-peer/: Spark's Kafka source
   ``spark-sql-kafka-0-10`` 4.1.1 and ``delta-spark`` 4.3.1), ``local[2]``, trigger ``availableNow`` with
   ``maxOffsetsPerTrigger`` = the same records per batch, ``foreachBatch``: parse the JSON (``from_json``), keep
   each key's last event of the batch, Delta ``MERGE`` into a Delta table (update when matched, insert when
   not, delete on op ``d``). The usual exactly-once-ish recipe: the query's checkpoint replays a batch whose
   MERGE may have committed, and the MERGE is made idempotent by Delta's ``txnAppId``/``txnVersion`` (query
   id, batch id) session settings.

Both Spark sessions are up before the clock starts; runs alternate and the best of ``--repeats`` is kept (the
machine is shared: ``uptime`` is printed beside the figures). Each run's table is checked: N/2 rows.

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVENT_DDL = "before string, after struct<id:long, amount:long, ts_ms:long>, op string, ts_ms long"


def ops(spark) -> dict:
    """The Spark recipe, run inside the peer driver (driver.py)."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def kafka_to_delta_merge(options: dict, path: str, checkpoint: str) -> dict:
        spark.createDataFrame([], "id long, amount long, ts_ms long").write.format("delta").save(path)
        target = DeltaTable.forPath(spark, path)
        app_id = f"bench-{os.path.basename(path)}"

        def merge(batch_df, batch_id):
            last = Window.partitionBy("id").orderBy(F.col("partition").desc(), F.col("offset").desc())
            events = (batch_df.select("partition", "offset", F.from_json(F.col("value").cast("string"), EVENT_DDL)
                                      .alias("e"))
                      .select("partition", "offset", F.col("e.op").alias("op"), "e.after.*")
                      .withColumn("n", F.row_number().over(last)).where("n = 1").drop("n", "partition", "offset"))
            spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
            spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            (target.alias("t").merge(events.alias("s"), "t.id = s.id")
             .whenMatchedDelete(condition="s.op = 'd'")
             .whenMatchedUpdate(set={"amount": "s.amount", "ts_ms": "s.ts_ms"})
             .whenNotMatchedInsert(condition="s.op != 'd'", values={"id": "s.id", "amount": "s.amount",
                                                                    "ts_ms": "s.ts_ms"})
             .execute())

        began = time.monotonic()
        q = (spark.readStream.format("kafka").options(**options).load()
             .writeStream.foreachBatch(merge).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        seconds = time.monotonic() - began
        progress = [p for p in q.recentProgress if p["numInputRows"]]
        rows = spark.read.format("delta").load(path).count()
        return {"seconds": seconds, "batches": len(progress), "rows": rows,
                "records": sum(p["numInputRows"] for p in progress)}

    return {"kafka_to_delta_merge": kafka_to_delta_merge}


def run_spark_recipe(peer, bootstrap: str, topic: str, work: Path, name: str, batch: int, records: int) -> tuple:
    from pipeline_throughput import PARTITIONS
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
               "maxOffsetsPerTrigger": str(batch * PARTITIONS)}
    out = peer.call("kafka_to_delta_merge", options=options, path=str(work / f"{name}-delta"),
                    checkpoint=str(work / f"{name}-checkpoint"))
    assert out["records"] == records and out["rows"] == records // 2, out
    return out["seconds"], out["batches"]


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average:")[-1].strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=50_000, help="max records per partition per batch")
    ap.add_argument("--repeats", type=int, default=2, help="measurements of each job (best is reported)")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "jvm" / "spark-peer"))
    from peer_client import PeerSpark
    from pipeline_throughput import pipeline_config, produce_events, run_pipeline

    from tidelake.broker import EmbeddedBroker
    from tidelake.spark.runner import Pipeline

    with tempfile.TemporaryDirectory(prefix="tidelake-sparkpeers-") as tmp, \
            EmbeddedBroker(Path(tmp) / "broker") as broker, \
            PeerSpark(log_path=Path(tmp) / "peer.log", env={"PEER_OPS_MODULE": str(Path(__file__).resolve()),
                                                             "PEER_DRIVER_MEMORY": "2g"}) as peer:
        work, bootstrap = Path(tmp), broker.bootstrap_servers
        spark = Pipeline(pipeline_config(bootstrap, "x", work / "x", None, 1.0)).spark()
        produce_events(bootstrap, "warmup", 4000)   # both paths warmed first (workers, JIT, files)
        run_pipeline(bootstrap, "warmup", work / "warm-table", spark, 1000, 4000)
        run_spark_recipe(peer, bootstrap, "warmup", work, "warm", 1000, 4000)
        produce_events(bootstrap, "bench", args.records)
        ours, theirs, loads = [], [], []
        for r in range(args.repeats):   # alternated, best of each kept
            loads.append(load())
            ours.append(run_pipeline(bootstrap, "bench", work / f"table-{r}", spark, args.batch, args.records))
            theirs.append(run_spark_recipe(peer, bootstrap, "bench", work, f"run{r}", args.batch, args.records))
            print(f"run {r}: pipeline {ours[-1][0]:.2f} s, Spark + Delta MERGE {theirs[-1][0]:.2f} s "
                  f"(load {loads[-1]})", flush=True)
        loads.append(load())
        spark.stop()
    (ours_s, ours_batches), (theirs_s, theirs_batches) = min(ours), min(theirs)
    result = {"records": args.records, "pipeline_s": round(ours_s, 2), "pipeline_rps": round(args.records / ours_s),
              "spark_delta_s": round(theirs_s, 2), "spark_delta_rps": round(args.records / theirs_s),
              "ratio": round(theirs_s / ours_s, 2), "all_pipeline_s": [round(s, 2) for s, _ in ours],
              "all_spark_delta_s": [round(s, 2) for s, _ in theirs], "loads": loads}
    print("throughput:", json.dumps(result), flush=True)
    print()
    print(f"Command: `.venv/bin/python benchmarks/spark_peers.py --records {args.records} --batch {args.batch} "
          f"--repeats {args.repeats}`")
    print()
    print("| job (same records, same broker, Spark local[2]) | batches | seconds | records/s |")
    print("|---|---:|---:|---:|")
    print(f"| tidelake pipeline, exactly-once -> tidelake table (PySpark 4.3.0) | {ours_batches} | "
          f"{result['pipeline_s']} | {result['pipeline_rps']} |")
    print(f"| Structured Streaming + Spark's Kafka source + foreachBatch Delta MERGE (PySpark 4.1.1, delta-spark "
          f"4.3.1) | {theirs_batches} | {result['spark_delta_s']} | {result['spark_delta_rps']} |")
    print(f"| **pipeline / Spark + Delta** | | | **{result['ratio']}x** (goal >= 2x) |")
    print()
    print(f"Load (1, 5, 15 min) before each run and after: {'; '.join(loads)}.")


if __name__ == "__main__":
    main()
