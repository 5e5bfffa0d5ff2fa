"""Kafka -> table throughput and freshness of the pipeline, against the no-Kafka, no-transaction limit.

    .venv/bin/python benchmarks/pipeline_throughput.py [--records 400000] [--freshness-seconds 30] [--commit-batches 40]

1. Throughput: N Debezium change events (creates and updates of N/2 keys, ~110 B each) in a 4-partition topic
   of tidelake's broker; ``Pipeline(...).run(once=True)`` in exactly-once mode on Spark ``local[2]`` (no rate
   cap, ``--batch`` records per partition per batch) into a tidelake table. Records/s = N / wall time of the
   run (the Spark session is already up; its start-up is not counted).
2. Baseline: the same records as Kafka rows (value, partition, offset) in Parquet; the same Spark job
   (read, parse the JSON values with the same function, fold per key by the same shuffle) but reading
   Parquet and writing plain Parquet with ``df.write.parquet``: the limit without Kafka and without the
   transactional table. (Since the pipeline's batch became one task per range group, it shuffles only when a key
   is in several partitions; these events are keyed by id, so it does not: the baseline keeps its shuffle, the
   job the pipeline ran before.) Ratio = pipeline / baseline (goal >= 0.7).
3. Freshness: a producer writes events at a fixed rate with the produce time inside; the pipeline runs
   continuously (batch interval 1 s); per record, freshness = commit time of the table version holding it
   (the ``_commit_time`` column of ``table.changes``) - produce time; p50 / p99.
4. Commit latency: ``--commit-batches`` small batches (``--commit-batch-records`` records each) into a table
   with automatic compaction on (``compaction.commit.num=10``; clustering.auto is on by default): p50 / p99 of
   the batch's table commit (``BatchResult.commit_seconds``: ``commit_staged`` with the automatic table
   maintenance it runs) and of the whole batch.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from tidelake.spark.changes import ORDER_COLUMNS, changes_schema  # noqa: E402
from tidelake.spark.kafka_batch_tasks import parse_task  # noqa: E402
from tidelake.spark.runner import Pipeline, _ListAccumulator  # noqa: E402
from tidelake.table import Table  # noqa: E402
from tidelake.spark.value_formats import value_format  # noqa: E402
from tidelake.table.files import OP  # noqa: E402

PARTITIONS = 4
SCHEMA_DDL = "id long, amount long, ts_ms long"


def event(i: int, keys: int, ts_ms: int) -> bytes:
    key = i % keys
    op = "c" if i < keys else "u"
    return json.dumps({"before": None, "after": {"id": key, "amount": i, "ts_ms": ts_ms}, "op": op,
                       "ts_ms": ts_ms, "source": {"db": "shop", "table": "orders"}}).encode()


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(60)


def make_producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000})


def send(producer: Producer, topic: str, key: int, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value, key=b"%d" % key, partition=key % PARTITIONS)
            return
        except BufferError:
            producer.poll(0.05)


def pipeline_config(bootstrap: str, topic: str, table: Path, rate: int | None, interval: float,
                    properties: dict | None = None) -> dict:
    source = {"bootstrap_servers": bootstrap, "topic": topic, "group_id": f"bench-{topic}",
              "batch_interval": interval}
    if rate:
        source["max_rate_per_partition"] = rate
    return {"source": source, "offsets": "exactly-once",
            "sink": {"table": str(table), "format": "debezium-json", "primary_key": ["id"], "schema": SCHEMA_DDL,
                     "buckets": 4, "properties": properties or {}}}


def produce_events(bootstrap: str, topic: str, records: int) -> tuple[list, list, list]:
    """Produce the change events; return them as Kafka rows (value, partition, offset) for the baseline."""
    create_topic(bootstrap, topic)
    producer = make_producer(bootstrap)
    keys = records // 2
    values, parts, offsets = [], [], []
    next_offset = [0] * PARTITIONS
    for i in range(records):
        value = event(i, keys, 0)
        send(producer, topic, i % keys, value)
        p = (i % keys) % PARTITIONS
        values.append(value), parts.append(p), offsets.append(next_offset[p])
        next_offset[p] += 1
    assert producer.flush(120) == 0
    return values, parts, offsets


def run_pipeline(bootstrap: str, topic: str, table: Path, spark, batch: int, records: int) -> tuple[float, int]:
    cfg = pipeline_config(bootstrap, topic, table, rate=batch, interval=1.0)
    began = time.monotonic()
    summary = Pipeline(cfg, spark=spark).run(once=True)
    seconds = time.monotonic() - began
    assert summary.records == records, summary.records
    assert Table.open(str(table)).scan(columns=["id"]).num_rows == records // 2
    return seconds, len(summary.batches)


def run_baseline(spark, rows: tuple[list, list, list], work: Path, name: str, batch: int) -> tuple[float, int]:
    """The same Kafka rows from Parquet, the same parse and fold shuffle, plain Parquet out."""
    from pyspark.sql.pandas.types import from_arrow_schema

    values, parts, offsets = rows
    src = work / f"{name}-kafka-rows.parquet"
    pq.write_table(pa.table({"value": pa.array(values, pa.binary()), "partition": pa.array(parts, pa.int32()),
                             "offset": pa.array(offsets, pa.int64())}), src)
    schema = pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("ts_ms", pa.int64())])
    parsed_schema = from_arrow_schema(changes_schema(schema))
    out = work / f"{name}-baseline-out"
    batches = max(1, -(-max(offsets) // batch)) if offsets else 1
    began = time.monotonic()
    for b in range(batches):  # the same number of batches as the pipeline ran
        df = spark.read.parquet(str(src))
        if batches > 1:
            df = df.where(f"offset >= {b * batch} and offset < {(b + 1) * batch}")
        # as the pipeline parses with on_error=fail: no skipped records; truncate events collected
        truncates = spark.sparkContext.accumulator([], _ListAccumulator())
        parsed = df.mapInArrow(parse_task(schema, value_format("debezium-json"), ["id"], None, truncates),
                               parsed_schema)
        parsed = parsed.repartition(spark.sparkContext.defaultParallelism, "id")
        parsed.drop(OP, *ORDER_COLUMNS).write.mode("append").parquet(str(out))
    return time.monotonic() - began, batches


def throughput(bootstrap: str, work: Path, spark, records: int, batch: int, repeats: int) -> dict:
    # Warm both paths first (Python workers, JIT, file system) with a small run each.
    warm = produce_events(bootstrap, "bench-warmup", 4000)
    run_pipeline(bootstrap, "bench-warmup", work / "warm-table", spark, 1000, 4000)
    run_baseline(spark, warm, work, "warm", 1000)
    rows = produce_events(bootstrap, "bench-throughput", records)
    pipeline_runs, baseline_runs = [], []
    for r in range(repeats):  # alternate, keep the best of each (the machine is shared)
        pipeline_runs.append(run_pipeline(bootstrap, "bench-throughput", work / f"table-{r}", spark, batch, records))
        baseline_runs.append(run_baseline(spark, rows, work, f"run{r}", batch))
    (pipeline_s, batches), (baseline_s, baseline_batches) = min(pipeline_runs), min(baseline_runs)
    return {"records": records, "keys": records // 2, "batches": batches, "pipeline_s": round(pipeline_s, 2),
            "pipeline_rps": round(records / pipeline_s), "baseline_batches": baseline_batches,
            "baseline_s": round(baseline_s, 2), "baseline_rps": round(records / baseline_s),
            "ratio": round(baseline_s / pipeline_s, 3),
            "all_pipeline_s": [round(s, 2) for s, _ in pipeline_runs],
            "all_baseline_s": [round(s, 2) for s, _ in baseline_runs]}


def freshness(bootstrap: str, work: Path, spark, seconds: float, rate: int) -> dict:
    topic = "bench-freshness"
    create_topic(bootstrap, topic)
    cfg = pipeline_config(bootstrap, topic, work / "fresh-table", rate=None, interval=1.0)
    pipeline = Pipeline(cfg, spark=spark)
    pipeline.open_table()
    runner = threading.Thread(target=pipeline.run, daemon=True)
    runner.start()
    time.sleep(3.0)  # let the loop start its batches
    producer = make_producer(bootstrap)
    produced, began = 0, time.monotonic()
    while time.monotonic() - began < seconds:  # fixed-rate producer, produce time inside each record
        due = int((time.monotonic() - began) * rate)
        while produced < due:
            send(producer, topic, produced, event(produced + 10**9, 10**9, int(time.time() * 1000)))
            produced += 1
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(60)
    table = Table.open(str(work / "fresh-table"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until every record is visible
        table.refresh()   # (a Table reads what it last refreshed: the pipeline commits from another handle)
        if table.changes(start_version=0, columns=["id"]).num_rows >= produced:
            break
        time.sleep(0.5)
    pipeline.stop()
    runner.join(120)
    table.refresh()
    changes = table.changes(start_version=0, columns=["ts_ms"])
    import pyarrow.compute as pc
    commit_ms = changes.column("_commit_time").cast(pa.timestamp("ms")).cast(pa.int64())
    lag = pc.subtract(commit_ms, changes.column("ts_ms"))
    q = pc.quantile(lag, q=[0.5, 0.99]).to_pylist()
    return {"rate": rate, "seconds": seconds, "produced": produced, "visible": changes.num_rows,
            "p50_ms": round(q[0]), "p99_ms": round(q[1]), "max_ms": pc.max(lag).as_py()}


def commit_latency(bootstrap: str, work: Path, spark, batches: int, batch_records: int) -> dict:
    """Many small batches into a table with automatic compaction on: the table commit's share of a batch."""
    topic = "bench-commit"
    records = batches * batch_records
    produce_events(bootstrap, topic, records)
    per_partition = batch_records // PARTITIONS
    cfg = pipeline_config(bootstrap, topic, work / "commit-table", rate=per_partition, interval=1.0,
                          properties={"compaction.commit.num": "10"})
    summary = Pipeline(cfg, spark=spark).run(once=True)
    assert summary.records == records, summary.records
    import numpy as np
    commit = np.array([b.commit_seconds for b in summary.batches]) * 1000
    whole = np.array([b.seconds for b in summary.batches]) * 1000
    return {"batches": len(summary.batches), "records_per_batch": batch_records,
            "commit_p50_ms": round(float(np.percentile(commit, 50))), "commit_p99_ms": round(float(np.percentile(commit, 99))),
            "commit_max_ms": round(float(commit.max())),
            "batch_p50_ms": round(float(np.percentile(whole, 50))), "batch_p99_ms": round(float(np.percentile(whole, 99)))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=50_000, help="max records per partition per batch")
    ap.add_argument("--repeats", type=int, default=2, help="measurements of each job (best is reported)")
    ap.add_argument("--freshness-seconds", type=float, default=30.0)
    ap.add_argument("--freshness-rate", type=int, default=2000, help="records/s produced in the freshness run")
    ap.add_argument("--commit-batches", type=int, default=40, help="batches of the commit-latency run (0: skip)")
    ap.add_argument("--commit-batch-records", type=int, default=2000, help="records per batch in that run")
    args = ap.parse_args()
    from tidelake.broker import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="tidelake-pipebench-") as tmp, \
            EmbeddedBroker(Path(tmp) / "broker") as broker:
        work = Path(tmp)
        spark = Pipeline(pipeline_config(broker.bootstrap_servers, "x", work / "x", None, 1.0)).spark()
        t = throughput(broker.bootstrap_servers, work, spark, args.records, args.batch, args.repeats)
        print("throughput:", json.dumps(t), flush=True)
        f = c = None
        if args.freshness_seconds > 0:
            f = freshness(broker.bootstrap_servers, work, spark, args.freshness_seconds, args.freshness_rate)
            print("freshness:", json.dumps(f), flush=True)
        if args.commit_batches > 0:
            c = commit_latency(broker.bootstrap_servers, work, spark, args.commit_batches, args.commit_batch_records)
            print("commit:", json.dumps(c), flush=True)
        print()
        print(f"Command: `.venv/bin/python benchmarks/pipeline_throughput.py --records {args.records} "
              f"--batch {args.batch} --repeats {args.repeats} --freshness-seconds {args.freshness_seconds:g} "
              f"--freshness-rate {args.freshness_rate} --commit-batches {args.commit_batches} "
              f"--commit-batch-records {args.commit_batch_records}` (Spark local[2], 4 partitions, exactly-once, "
              f"Debezium JSON ~{len(event(1, 2, 0))} B)")
        print()
        print("| job | records | batches | seconds | records/s |")
        print("|---|---:|---:|---:|---:|")
        print(f"| Kafka -> tidelake table (pipeline, exactly-once) | {t['records']} | {t['batches']} | "
              f"{t['pipeline_s']} | {t['pipeline_rps']} |")
        print(f"| Parquet -> Parquet (same parse + shuffle, no Kafka, no transaction) | {t['records']} | "
              f"{t['baseline_batches']} | {t['baseline_s']} | {t['baseline_rps']} |")
        print(f"| **ratio** | | | | **{t['ratio']}** (goal >= 0.7) |")
        print()
        if f is not None:
            print(f"Freshness (produce -> visible in the table), {f['rate']} records/s for {f['seconds']:g} s, "
                  f"batch interval 1 s: p50 {f['p50_ms']} ms, p99 {f['p99_ms']} ms, max {f['max_ms']} ms "
                  f"({f['visible']} of {f['produced']} visible).")
        if c is not None:
            print(f"Batch commit with automatic compaction on (compaction.commit.num=10), {c['batches']} batches of "
                  f"{c['records_per_batch']} records: table commit p50 {c['commit_p50_ms']} ms, p99 "
                  f"{c['commit_p99_ms']} ms, max {c['commit_max_ms']} ms; whole batch p50 {c['batch_p50_ms']} ms, "
                  f"p99 {c['batch_p99_ms']} ms.")
        spark.stop()


if __name__ == "__main__":
    main()
