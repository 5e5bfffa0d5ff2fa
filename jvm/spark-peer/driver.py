"""The peer Spark process: runs in the peer venv (PySpark 4.2.0 + the jars of pom.xml), never imports tidelake.

One SparkSession for the process's life; it reads one JSON request a line on stdin and answers one JSON line
on stdout, prefixed with ``ANSWER`` (Spark and py4j may print on stdout too). A request is
``{"op": NAME, ...arguments}``; an answer is ``{"ok": true, ...}`` or ``{"ok": false, "error": "one line"}``.
``peer_client.py`` beside this file is the other end. Started as ``python driver.py JARS_DIR``.
"""
from __future__ import annotations

import glob
import json
import os
import sys
import threading
import time
import traceback

PREFIX = "ANSWER "


def make_session(jars_dir: str):
    from pyspark.sql import SparkSession
    jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
    if not jars:
        raise SystemExit(f"{jars_dir}: no jars (run: make peer-venv)")
    spark = (SparkSession.builder.master("local[2]").appName("tidelake-spark-peer")
             .config("spark.jars", ",".join(jars))
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", os.environ.get("PEER_DRIVER_MEMORY", "1g"))
             .config("spark.python.authenticate.socketTimeout", "120s")
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension,"
                     "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def plain_rows(df) -> list[dict]:
    """Rows as JSON-ready dicts: timestamps as epoch microseconds, decimals as text, binary as UTF-8 text."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    cols = []
    for f in df.schema.fields:
        c = F.col(f"`{f.name}`")
        if isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType)):
            c = F.unix_micros(c.cast("timestamp"))
        elif isinstance(f.dataType, (T.DecimalType, T.BinaryType)):
            c = c.cast("string")
        elif isinstance(f.dataType, T.ArrayType):   # Kafka headers: array<struct<key string, value binary>>
            c = F.transform(c, lambda h: F.struct(h["key"].alias("key"), h["value"].cast("string").alias("value")))
        cols.append(c.alias(f.name))
    return [r.asDict(recursive=True) for r in df.select(*cols).collect()]


KAFKA_COLUMNS = ["topic", "partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"]


def kafka_columns(options: dict) -> list[str]:
    return KAFKA_COLUMNS + (["headers"] if options.get("includeHeaders") == "true" else [])


class Streams:
    """Running streaming queries by name, each collecting what its micro-batches saw (foreachBatch)."""

    def __init__(self, spark):
        self.spark = spark
        self.queries: dict = {}
        self.rows: dict[str, list] = {}
        self.batches: dict[str, list[int]] = {}
        self.lock = threading.Lock()

    def start(self, name: str, options: dict, checkpoint: str, trigger: dict) -> dict:
        df = self.spark.readStream.format("kafka").options(**options).load().selectExpr(*kafka_columns(options))
        self.rows[name], self.batches[name] = [], []

        def collect(batch_df, batch_id):
            got = plain_rows(batch_df)
            with self.lock:
                self.rows[name].extend(got)
                self.batches[name].append(len(got))

        q = (df.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint)
             .queryName(name).trigger(**trigger).start())
        self.queries[name] = q
        if trigger.get("availableNow"):
            q.awaitTermination()
            return self.seen(name)
        return {"id": q.id}

    def seen(self, name: str) -> dict:
        q = self.queries[name]
        with self.lock:
            out = {"rows": list(self.rows[name]), "batches": list(self.batches[name])}
        exc = q.exception()
        out["active"], out["error"] = q.isActive, (str(exc).splitlines()[0] if exc else None)
        return out

    def wait(self, name: str, rows: int, wait_s: float) -> dict:
        """Until the query has seen ``rows`` rows, has stopped, or ``wait_s`` (a last guard) has passed."""
        deadline = time.monotonic() + wait_s
        while True:
            out = self.seen(name)
            if len(out["rows"]) >= rows or not out["active"] or time.monotonic() > deadline:
                return out
            time.sleep(0.1)

    def stop(self, name: str) -> dict:
        self.queries[name].stop()
        return self.seen(name)


def serve(spark) -> None:
    streams = Streams(spark)

    def kafka_batch(options: dict) -> dict:
        df = spark.read.format("kafka").options(**options).load().selectExpr(*kafka_columns(options))
        return {"rows": plain_rows(df)}

    def read_table(fmt: str, path: str | None = None, table: str | None = None, conf: dict | None = None,
                   options: dict | None = None, sql: str | None = None) -> dict:
        for k, v in (conf or {}).items():
            spark.conf.set(k, v)
        if sql is not None:
            df = spark.sql(sql)
        elif table is not None:
            df = spark.read.options(**(options or {})).table(table)
        else:
            df = spark.read.format(fmt).options(**(options or {})).load(path)
        return {"rows": plain_rows(df), "schema": df.schema.simpleString()}

    def run_sql(sql: str, conf: dict | None = None) -> dict:
        for k, v in (conf or {}).items():
            spark.conf.set(k, v)
        return {"rows": plain_rows(spark.sql(sql))}

    ops = {"kafka_batch": kafka_batch, "read_table": read_table, "sql": run_sql,
           "stream_start": streams.start, "stream_wait": streams.wait, "stream_stop": streams.stop,
           "versions": lambda: {"spark": spark.version}}
    extra = os.environ.get("PEER_OPS_MODULE")   # a benchmark's own operations: a module defining ops(spark)
    if extra:
        import importlib.util
        spec = importlib.util.spec_from_file_location("peer_ops", extra)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        ops.update(mod.ops(spark))
    answer({"ok": True, "ready": True, "spark": spark.version})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.pop("op")
        try:
            out = {"ok": True, **ops[op](**req)}
        except Exception as e:  # one line back to the caller; the whole stack on stderr for the log
            traceback.print_exc(file=sys.stderr)
            text = str(e.java_exception.toString()) if hasattr(e, "java_exception") else str(e)  # py4j: the Java one
            first = next((ln for ln in text.splitlines() if ln.strip()), type(e).__name__)
            out = {"ok": False, "error": f"{op}: {type(e).__name__}: {first}"}
        answer(out)
    for q in spark.streams.active:   # stdin closed: the caller is done (or gone)
        q.stop()
    spark.stop()


def answer(obj: dict) -> None:
    sys.stdout.write(PREFIX + json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    serve(make_session(sys.argv[1]))
