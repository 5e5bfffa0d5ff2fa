"""Pipeline throughput on a 2-worker Spark standalone cluster against the same run on ``local[2]``.

    .venv/bin/python benchmarks/pipeline_cluster.py [--records 400000] [--batch 25000]

One broker, one topic of N Debezium change events (4 partitions; creates and updates of N/2 keys). The pipeline
(``Pipeline(...).run(once=True)``, exactly-once, ``--batch`` records per partition per batch) runs it twice into
two tables: on ``local[2]`` (the baseline: one JVM, two task slots) and on a standalone cluster on this machine
(a master and two workers with one core and 1 GB each, separate JVMs, started from the pyspark wheel; the driver
is this process; tidelake shipped to the executors as a zip). Each session is warmed first with a small run;
its start-up is not counted. Reported: records/s of each and their ratio (cluster / local), and where the time
goes, from the driver's Spark REST API (stage wall time, task run time, deserialization, GC, shuffle bytes and
fetch wait) and the pipeline's own batch timings (table commit, driver-side planning).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))   # the test suite's standalone-cluster launcher
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pipeline_throughput import event, pipeline_config, produce_events  # noqa: E402
from spark_cluster import SparkStandalone, cluster_env  # noqa: E402

from conftest import free_port  # noqa: E402
from tidelake.spark.runner import Pipeline  # noqa: E402
from tidelake.table import Table  # noqa: E402


def stages(spark) -> list[dict]:
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def measure(name: str, master: str, bootstrap: str, work: Path, records: int, batch: int) -> dict:
    conf = {"spark.ui.enabled": "true", "spark.ui.port": str(free_port()), "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1", "spark.executor.memory": "768m"}

    def config(topic: str, table: str, rate: int) -> dict:
        cfg = pipeline_config(bootstrap, topic, work / f"{name}-{table}", rate=rate, interval=1.0)
        cfg["source"]["group_id"] = f"{name}-{topic}"
        cfg["spark"] = {"master": master, "conf": conf}
        return cfg

    warm = Pipeline(config("bench-warmup", "warm", 1000))
    spark = warm.spark()
    warm.run(once=True)
    before = {s["stageId"] for s in stages(spark)}
    pipeline = Pipeline(config("bench-cluster", "table", batch), spark=spark)
    began = time.monotonic()
    summary = pipeline.run(once=True)
    wall = time.monotonic() - began
    assert summary.records == records, summary.records
    assert Table.open(str(work / f"{name}-table")).scan(columns=["id"]).num_rows == records // 2
    run = [s for s in stages(spark) if s["stageId"] not in before]
    spark.stop()

    def total(key: str) -> float:
        return sum(s.get(key, 0) or 0 for s in run)

    def ms(ts: str) -> float:   # "2026-11-25T14:20:01.123GMT"
        import datetime as dt
        return dt.datetime.strptime(ts.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000
    stage_wall = sum(ms(s["completionTime"]) - ms(s["submissionTime"]) for s in run if s.get("completionTime"))
    batches = summary.batches
    return {"name": name, "master": master, "records": records, "batches": len(batches), "seconds": round(wall, 2),
            "records_per_s": round(records / wall),
            "stage_wall_s": round(stage_wall / 1000, 2), "stages": len(run), "tasks": int(total("numCompleteTasks")),
            "task_run_s": round(total("executorRunTime") / 1000, 2),
            "task_cpu_s": round(total("executorCpuTime") / 1e9, 2),
            "deserialize_s": round(total("executorDeserializeTime") / 1000, 2),
            "gc_s": round(total("jvmGcTime") / 1000, 2),
            "shuffle_write_mb": round(total("shuffleWriteBytes") / 1e6, 1),
            "shuffle_remote_read_mb": round(total("shuffleRemoteBytesRead") / 1e6, 1),
            "shuffle_fetch_wait_s": round(total("shuffleFetchWaitTime") / 1000, 2),
            "commit_s": round(sum(b.commit_seconds for b in batches), 2),
            "driver_s": round(wall - stage_wall / 1000, 2),
            "batch_s": round(sum(b.seconds for b in batches), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=25_000, help="max records per partition per batch")
    args = ap.parse_args()
    os.environ.update({k: v for k, v in cluster_env().items() if k.startswith(("SPARK_", "PYSPARK_"))})
    from tidelake.broker import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="tidelake-clusterbench-") as tmp, \
            EmbeddedBroker(Path(tmp) / "broker") as broker, SparkStandalone(Path(tmp) / "cluster") as cluster:
        work = Path(tmp)
        produce_events(broker.bootstrap_servers, "bench-warmup", 4000)
        produce_events(broker.bootstrap_servers, "bench-cluster", args.records)
        local = measure("local", "local[2]", broker.bootstrap_servers, work, args.records, args.batch)
        print("local:", json.dumps(local), flush=True)
        remote = measure("cluster", cluster.master_url, broker.bootstrap_servers, work, args.records, args.batch)
        print("cluster:", json.dumps(remote), flush=True)
        ratio = round(remote["records_per_s"] / local["records_per_s"], 3)
        print()
        print(f"Command: `.venv/bin/python benchmarks/pipeline_cluster.py --records {args.records} --batch {args.batch}` "
              f"(4 partitions, exactly-once, Debezium JSON ~{len(event(1, 2, 0))} B)")
        print()
        print("| run | records | batches | seconds | records/s | stage wall s | tasks | task run s | task CPU s | "
              "deserialize s | GC s | shuffle write MB | shuffle remote read MB | fetch wait s | table commit s | "
              "driver outside stages s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in (local, remote):
            print(f"| {r['master']} | {r['records']} | {r['batches']} | {r['seconds']} | {r['records_per_s']} | "
                  f"{r['stage_wall_s']} | {r['tasks']} | {r['task_run_s']} | {r['task_cpu_s']} | {r['deserialize_s']} | "
                  f"{r['gc_s']} | {r['shuffle_write_mb']} | {r['shuffle_remote_read_mb']} | "
                  f"{r['shuffle_fetch_wait_s']} | {r['commit_s']} | {r['driver_s']} |")
        print(f"| **ratio cluster / local[2]** | | | | **{ratio}** | | | | | | | | | | | |")


if __name__ == "__main__":
    main()
