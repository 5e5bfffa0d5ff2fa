"""Kafka -> table: tidelake's pipeline against the Spark recipe a Spark user would pick instead (issue 38.3a).

    .venv/bin/python benchmarks/spark_peers.py [--records 400000] [--batch 50000] [--repeats 2]
    .venv/bin/python benchmarks/spark_peers.py --records 0 --freshness-seconds 30 --freshness-rate 2000

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

Freshness (``--freshness-seconds``, ``--freshness-rate``): a producer writes new keys at a fixed rate with the
produce time inside each record; the pipeline runs continuously (batch interval 1 s,
benchmarks/pipeline_throughput.py's ``freshness``: per record, the ``_commit_time`` of the table version that
holds it - its produce time), then the Spark recipe as a running query (trigger ``processingTime`` 1 s, the same
foreachBatch MERGE into a Delta table with its change data feed on: per record, the ``_commit_timestamp`` of the
Delta version that holds it - its produce time); p50 / p99. One after the other on the same broker, the same
producer loop; the Spark side polls the table's count once a second to know when every record is in.

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

    def merge_into(path: str, change_feed: bool = False):
        """A new Delta table at ``path`` and the foreachBatch function that MERGEs a micro-batch into it."""
        (spark.createDataFrame([], "id long, amount long, ts_ms long").write.format("delta")
         .option("delta.enableChangeDataFeed", str(change_feed).lower()).save(path))
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
        return merge

    def kafka_to_delta_merge(options: dict, path: str, checkpoint: str) -> dict:
        merge = merge_into(path)
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

    streams: dict = {}

    def freshness_start(options: dict, path: str, checkpoint: str, interval_s: float) -> dict:
        """The same recipe as a running query, one micro-batch every ``interval_s`` (or back to back)."""
        merge = merge_into(path, change_feed=True)
        streams[path] = (spark.readStream.format("kafka").options(**options).load()
                         .writeStream.foreachBatch(merge).option("checkpointLocation", checkpoint)
                         .trigger(processingTime=f"{interval_s} seconds").start())
        return {}

    def freshness_stop(path: str, records: int, wait_s: float) -> dict:
        """Until the table holds ``records`` rows (or ``wait_s``, a last guard), then stop; per record,
        freshness = the commit timestamp of the Delta version that holds it (its change feed's
        ``_commit_timestamp``) - the produce time inside it (``ts_ms``)."""
        q, deadline = streams.pop(path), time.monotonic() + wait_s
        while time.monotonic() < deadline and q.isActive:
            if spark.read.format("delta").load(path).count() >= records:
                break
            time.sleep(1.0)
        error = q.exception()
        q.stop()
        lag = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(path)
               .where("_change_type = 'insert'")
               .select((F.unix_millis("_commit_timestamp") - F.col("ts_ms")).alias("lag")))
        r = lag.agg(F.count("*").alias("n"), F.percentile("lag", F.array(F.lit(0.5), F.lit(0.99))).alias("q"),
                    F.max("lag").alias("max")).collect()[0]
        versions = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() - 1
        return {"visible": r["n"], "p50_ms": round(r["q"][0]) if r["n"] else None,
                "p99_ms": round(r["q"][1]) if r["n"] else None, "max_ms": r["max"], "commits": versions,
                "error": str(error).splitlines()[0] if error else None}

    return {"kafka_to_delta_merge": kafka_to_delta_merge, "freshness_start": freshness_start,
            "freshness_stop": freshness_stop}


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


def produce_at_rate(bootstrap: str, topic: str, seconds: float, rate: int) -> int:
    """``rate`` records/s for ``seconds`` into an existing topic, each a create of a new key with its produce time
    inside (ms): pipeline_throughput.freshness's producer loop."""
    from pipeline_throughput import event, make_producer, send
    producer = make_producer(bootstrap)
    produced, began = 0, time.monotonic()
    while time.monotonic() - began < seconds:
        due = int((time.monotonic() - began) * rate)
        while produced < due:
            send(producer, topic, produced, event(produced + 10**9, 10**9, int(time.time() * 1000)))
            produced += 1
        producer.poll(0)
        time.sleep(0.005)
    assert producer.flush(60) == 0
    return produced


def spark_freshness(peer, bootstrap: str, work: Path, seconds: float, rate: int, interval: float) -> dict:
    topic, path = "bench-freshness-spark", str(work / "fresh-delta")
    from pipeline_throughput import create_topic
    create_topic(bootstrap, topic)
    peer.call("freshness_start", options={"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                          "startingOffsets": "earliest"},
              path=path, checkpoint=str(work / "fresh-checkpoint"), interval_s=interval)
    time.sleep(3.0)   # as the pipeline's run: the query has started its batches before the first record
    produced = produce_at_rate(bootstrap, topic, seconds, rate)
    out = peer.call("freshness_stop", timeout_s=600, path=path, records=produced, wait_s=300)
    return {"rate": rate, "seconds": seconds, "produced": produced, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=400_000, help="throughput run's records (0: no throughput run)")
    ap.add_argument("--batch", type=int, default=50_000, help="max records per partition per batch")
    ap.add_argument("--repeats", type=int, default=2, help="measurements of each job (best is reported)")
    ap.add_argument("--freshness-seconds", type=float, default=30.0, help="0: no freshness run")
    ap.add_argument("--freshness-rate", type=int, default=2000, help="records/s produced in the freshness runs")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "jvm" / "spark-peer"))
    from peer_client import PeerSpark
    from pipeline_throughput import freshness, pipeline_config, produce_events, run_pipeline

    from tidelake.broker import EmbeddedBroker
    from tidelake.spark.runner import Pipeline

    ours, theirs, loads, fresh = [], [], [], {}
    with tempfile.TemporaryDirectory(prefix="tidelake-sparkpeers-") as tmp, \
            EmbeddedBroker(Path(tmp) / "broker") as broker, \
            PeerSpark(log_path=Path(tmp) / "peer.log", env={"PEER_OPS_MODULE": str(Path(__file__).resolve()),
                                                             "PEER_DRIVER_MEMORY": "2g"}) as peer:
        work, bootstrap = Path(tmp), broker.bootstrap_servers
        spark = Pipeline(pipeline_config(bootstrap, "x", work / "x", None, 1.0)).spark()
        produce_events(bootstrap, "warmup", 4000)   # both paths warmed first (workers, JIT, files)
        run_pipeline(bootstrap, "warmup", work / "warm-table", spark, 1000, 4000)
        run_spark_recipe(peer, bootstrap, "warmup", work, "warm", 1000, 4000)
        if args.records:
            produce_events(bootstrap, "bench", args.records)
        for r in range(args.repeats if args.records else 0):   # alternated, best of each kept
            loads.append(load())
            ours.append(run_pipeline(bootstrap, "bench", work / f"table-{r}", spark, args.batch, args.records))
            theirs.append(run_spark_recipe(peer, bootstrap, "bench", work, f"run{r}", args.batch, args.records))
            print(f"run {r}: pipeline {ours[-1][0]:.2f} s, Spark + Delta MERGE {theirs[-1][0]:.2f} s "
                  f"(load {loads[-1]})", flush=True)
        if args.freshness_seconds > 0:   # one after the other, the same producer loop, batch interval 1 s
            loads.append(load())
            fresh["pipeline"] = freshness(bootstrap, work, spark, args.freshness_seconds, args.freshness_rate)
            print("freshness, pipeline:", json.dumps(fresh["pipeline"]), f"(load {loads[-1]})", flush=True)
            loads.append(load())
            fresh["spark"] = spark_freshness(peer, bootstrap, work, args.freshness_seconds, args.freshness_rate, 1.0)
            print("freshness, Spark + Delta MERGE:", json.dumps(fresh["spark"]), f"(load {loads[-1]})", flush=True)
        loads.append(load())
        spark.stop()
    print()
    print(f"Command: `.venv/bin/python benchmarks/spark_peers.py --records {args.records} --batch {args.batch} "
          f"--repeats {args.repeats} --freshness-seconds {args.freshness_seconds:g} "
          f"--freshness-rate {args.freshness_rate}`")
    if ours:
        report_throughput(args, ours, theirs, loads)
    if fresh:
        p, q = fresh["pipeline"], fresh["spark"]
        print()
        print(f"| freshness, {args.freshness_rate} records/s for {args.freshness_seconds:g} s, batch interval 1 s "
              "| visible / produced | p50 ms | p99 ms | max ms |")
        print("|---|---:|---:|---:|---:|")
        print(f"| tidelake pipeline, exactly-once | {p['visible']} / {p['produced']} | {p['p50_ms']} | {p['p99_ms']} | "
              f"{p['max_ms']} |")
        print(f"| Spark's Kafka source + foreachBatch Delta MERGE ({q['commits']} commits) | {q['visible']} / "
              f"{q['produced']} | {q['p50_ms']} | {q['p99_ms']} | {q['max_ms']} |")
        if p["p99_ms"] and q["p99_ms"]:
            print(f"| **pipeline / Spark + Delta** | | {p['p50_ms'] / q['p50_ms']:.2f}x | "
                  f"**{p['p99_ms'] / q['p99_ms']:.2f}x** (goal <= 0.5x) | |")
    print()
    print(f"Load (1, 5, 15 min) before each run and after: {'; '.join(loads)}.")


def report_throughput(args, ours: list, theirs: list, loads: list) -> None:
    (ours_s, ours_batches), (theirs_s, theirs_batches) = min(ours), min(theirs)
    result = {"records": args.records, "pipeline_s": round(ours_s, 2), "pipeline_rps": round(args.records / ours_s),
              "spark_delta_s": round(theirs_s, 2), "spark_delta_rps": round(args.records / theirs_s),
              "ratio": round(theirs_s / ours_s, 2), "all_pipeline_s": [round(s, 2) for s, _ in ours],
              "all_spark_delta_s": [round(s, 2) for s, _ in theirs], "loads": loads}
    print("throughput:", json.dumps(result), flush=True)
    print()
    print("| job (same records, same broker, Spark local[2]) | batches | seconds | records/s |")
    print("|---|---:|---:|---:|")
    print(f"| tidelake pipeline, exactly-once -> tidelake table (PySpark 4.3.0) | {ours_batches} | "
          f"{result['pipeline_s']} | {result['pipeline_rps']} |")
    print(f"| Structured Streaming + Spark's Kafka source + foreachBatch Delta MERGE (PySpark 4.1.1, delta-spark "
          f"4.3.1) | {theirs_batches} | {result['spark_delta_s']} | {result['spark_delta_rps']} |")
    print(f"| **pipeline / Spark + Delta** | | | **{result['ratio']}x** (goal >= 2x) |")


if __name__ == "__main__":
    main()
