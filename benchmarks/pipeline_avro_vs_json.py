"""Avro vs JSON through the same pipeline: Kafka -> PySpark -> tidelake table, the same records.

    .venv/bin/python benchmarks/pipeline_avro_vs_json.py [--records 400000] [--batch 50000] [--repeats 3]

N change events (creates and updates of N/2 keys: ``after`` = {id, amount, ts_ms}, op, ts_ms, source, as
benchmarks/pipeline_throughput.py produces them) go to two 4-partition topics of tidelake's broker, with the
same keys and partitions: once as JSON text (what ``debezium-json`` reads: pyarrow's JSON reader, a batch at
once), once through Confluent's ``AvroSerializer`` with tidelake's schema registry (``debezium-avro``: the
wire format cut with numpy, the datums read by polars' Avro reader a batch at once). The same with the plain
row (``json`` vs ``avro``). Each pipeline runs ``run(once=True)`` in exactly-once mode on Spark ``local[2]``
into a new table (the Spark session already up), alternating, best of ``--repeats``; records/s = N / wall
time. Ratio = Avro records/s / JSON records/s (goal >= 1).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from tidelake.broker import EmbeddedBroker  # noqa: E402
from tidelake.schema_registry.server import SchemaRegistryServer  # noqa: E402
from tidelake.schema_registry.settings import RegistrySettings  # noqa: E402
from tidelake.spark.runner import Pipeline  # noqa: E402
from tidelake.table import Table  # noqa: E402

PARTITIONS = 4
SCHEMA_DDL = "id long, amount long, ts_ms long"
ROW = {"type": "record", "name": "Value", "namespace": "shop.orders", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "long"}, {"name": "ts_ms", "type": "long"}]}
SOURCE = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.mysql", "fields": [
    {"name": "db", "type": "string"}, {"name": "table", "type": "string"}]}
ENVELOPE = {"type": "record", "name": "Envelope", "namespace": "shop.orders", "fields": [
    {"name": "before", "type": ["null", ROW], "default": None},
    {"name": "after", "type": ["null", "Value"], "default": None},
    {"name": "op", "type": "string"}, {"name": "ts_ms", "type": "long"}, {"name": "source", "type": SOURCE}]}
KEY = {"type": "record", "name": "Key", "namespace": "shop.orders", "fields": [{"name": "id", "type": "long"}]}


def record(i: int, keys: int, envelope: bool) -> dict:
    row = {"id": i % keys, "amount": i, "ts_ms": 0}
    if not envelope:
        return row
    return {"before": None, "after": row, "op": "c" if i < keys else "u", "ts_ms": 0,
            "source": {"db": "shop", "table": "orders"}}


def produce(bootstrap: str, registry_url: str, records: int, envelope: bool, suffix: str) -> tuple[str, str, float]:
    """Both topics with the same records; (json topic, avro topic, mean Avro value size / JSON value size)."""
    json_topic, avro_topic = f"json-{suffix}", f"avro-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (json_topic, avro_topic)]).values():
        f.result(60)
    client = SchemaRegistryClient({"url": registry_url})
    value = AvroSerializer(client, json.dumps(ENVELOPE if envelope else ROW))
    key = AvroSerializer(client, json.dumps(KEY))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000})
    keys = records // 2
    json_bytes = avro_bytes = 0
    for i in range(records):
        r = record(i, keys, envelope)
        k = i % keys
        for topic, v, kb in ((json_topic, json.dumps(r).encode(), b"%d" % k),
                             (avro_topic, value(r, SerializationContext(avro_topic, MessageField.VALUE)),
                              key({"id": k}, SerializationContext(avro_topic, MessageField.KEY)))):
            if topic == json_topic:
                json_bytes += len(v)
            else:
                avro_bytes += len(v)
            while True:
                try:
                    producer.produce(topic, v, key=kb, partition=k % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.05)
    assert producer.flush(120) == 0
    return json_topic, avro_topic, avro_bytes / json_bytes


def run(spark, bootstrap: str, registry_url: str, topic: str, fmt: str, table: Path, batch: int,
        records: int) -> float:
    sink = {"table": str(table), "format": fmt, "buckets": 4}
    if not fmt.endswith("avro"):
        sink.update(primary_key=["id"], schema=SCHEMA_DDL)
    config = {"source": {"bootstrap_servers": bootstrap, "topic": topic, "group_id": f"bench-{table.name}",
                         "max_rate_per_partition": batch, "batch_interval": 1.0},
              "offsets": "exactly-once", "schema_registry": {"url": registry_url}, "sink": sink}
    began = time.monotonic()
    summary = Pipeline(config, spark=spark).run(once=True)
    seconds = time.monotonic() - began
    assert summary.records == records, summary.records
    assert Table.open(str(table)).scan(columns=["id"]).num_rows == records // 2
    return seconds


def compare(spark, bootstrap, registry_url, work: Path, records: int, batch: int, repeats: int, envelope: bool) -> dict:
    name = "debezium" if envelope else "plain"
    json_fmt, avro_fmt = ("debezium-json", "debezium-avro") if envelope else ("json", "avro")
    warm_json, warm_avro, _ = produce(bootstrap, registry_url, 4000, envelope, f"{name}-warm")
    run(spark, bootstrap, registry_url, warm_json, json_fmt, work / f"{name}-warm-json", 1000, 4000)
    run(spark, bootstrap, registry_url, warm_avro, avro_fmt, work / f"{name}-warm-avro", 1000, 4000)
    json_topic, avro_topic, size_ratio = produce(bootstrap, registry_url, records, envelope, name)
    json_runs, avro_runs = [], []
    for r in range(repeats):   # alternate, keep the best of each (the machine is shared)
        json_runs.append(run(spark, bootstrap, registry_url, json_topic, json_fmt, work / f"{name}-json-{r}", batch,
                             records))
        avro_runs.append(run(spark, bootstrap, registry_url, avro_topic, avro_fmt, work / f"{name}-avro-{r}", batch,
                             records))
    json_s, avro_s = min(json_runs), min(avro_runs)
    return {"envelope": name, "json_format": json_fmt, "avro_format": avro_fmt, "records": records,
            "json_s": round(json_s, 2), "json_rps": round(records / json_s), "avro_s": round(avro_s, 2),
            "avro_rps": round(records / avro_s), "ratio": round(json_s / avro_s, 3),
            "value_size_ratio": round(size_ratio, 3),
            "all_json_s": [round(s, 2) for s in json_runs], "all_avro_s": [round(s, 2) for s in avro_runs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=50_000, help="max records per partition per batch")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each pipeline (best is reported)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidelake-avrobench-") as tmp, \
            EmbeddedBroker(Path(tmp) / "broker", config={"group.initial.rebalance.delay.ms": "0"}) as broker:
        work = Path(tmp)
        settings = RegistrySettings.load(overrides={"listeners": "http://127.0.0.1:0",
                                                    "kafkastore.bootstrap.servers": broker.bootstrap_servers})
        registry = SchemaRegistryServer(settings).start()
        try:
            spark = Pipeline({"source": {"bootstrap_servers": broker.bootstrap_servers, "topic": "x", "group_id": "x"},
                              "sink": {"table": str(work / "x"), "format": "json", "primary_key": ["id"],
                                       "schema": SCHEMA_DDL}}).spark()
            results = [compare(spark, broker.bootstrap_servers, registry.url, work, args.records, args.batch,
                               args.repeats, envelope) for envelope in (True, False)]
            for r in results:
                print("result:", json.dumps(r), flush=True)
            print()
            print(f"Command: `.venv/bin/python benchmarks/pipeline_avro_vs_json.py --records {args.records} "
                  f"--batch {args.batch} --repeats {args.repeats}` (Spark local[2], 4 partitions, exactly-once, "
                  f"best of {args.repeats}, alternating)")
            print()
            print("| records | JSON format | JSON s | JSON records/s | Avro format | Avro s | Avro records/s | "
                  "**Avro / JSON** | Avro value size / JSON |")
            print("|---|---|---:|---:|---|---:|---:|---:|---:|")
            for r in results:
                print(f"| {r['records']} | {r['json_format']} | {r['json_s']} | {r['json_rps']} | {r['avro_format']} | "
                      f"{r['avro_s']} | {r['avro_rps']} | **{r['ratio']}** (goal >= 1) | {r['value_size_ratio']} |")
            spark.stop()
        finally:
            registry.stop()


if __name__ == "__main__":
    main()
