"""``format("tidelake")`` on local Spark: reads (latest, versionAsOf, timestampAsOf, incremental), write_table in
every mode with one driver commit, and the streaming sink's (query id, batch id) idempotence, fed by the
``tidelake-kafka`` source from tidelake's own broker."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import tidelake.spark as tls
from spark_fixtures import spark  # noqa: F401  (session-scoped fixture)
from tidelake.spark.table_source import (StagedFiles, TableStreamWriter, parse_timestamp_ms, publish, stage,
                                         streaming_query_id)
from tidelake.table import Table

SCHEMA = "id long, amount long, name string"


def rows_of(df) -> dict[int, tuple]:
    return {r.id: (r.amount, r.name) for r in df.collect()}


def test_batch_reads_latest_time_travel_and_incremental(spark, tmp_path):
    path = str(tmp_path / "orders")
    v1 = tls.write_table(spark.createDataFrame([(i, i * 10, f"n{i}") for i in range(100)], SCHEMA), path,
                         mode="upsert", primary_key=["id"],
                         properties={"write.bucket.num": "4", "clustering.auto": "false"})
    table = Table.open(path)
    assert table.version == v1 == 1
    t1 = table.latest_timestamp()
    v2 = tls.write_table(spark.createDataFrame([(i, -i, "upd") for i in range(90, 120)], SCHEMA), path, mode="upsert")
    v3 = tls.write_table(spark.createDataFrame([(i,) for i in range(0, 10)], "id long"), path, mode="delete")
    assert (v2, v3) == (2, 3)

    latest = spark.read.format("tidelake").load(path)
    assert latest.rdd.getNumPartitions() == 4  # one Spark partition per bucket
    expected = {i: (i * 10, f"n{i}") for i in range(10, 90)} | {i: (-i, "upd") for i in range(90, 120)}
    assert rows_of(latest) == expected
    assert rows_of(latest) == {r["id"]: (r["amount"], r["name"]) for r in Table.open(path).scan().to_pylist()}

    as_of_v1 = spark.read.format("tidelake").option("versionAsOf", v1).load(path)
    assert rows_of(as_of_v1) == {i: (i * 10, f"n{i}") for i in range(100)}
    as_of_t1 = spark.read.format("tidelake").option("timestampAsOf", str(t1)).load(path)
    assert rows_of(as_of_t1) == rows_of(as_of_v1)
    iso_t1 = dt.datetime.fromtimestamp(t1 / 1000, dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="milliseconds")
    assert parse_timestamp_ms(iso_t1) == t1  # a time without zone is UTC
    assert rows_of(spark.read.format("tidelake").option("timestampAsOf", iso_t1).load(path)) == rows_of(as_of_v1)

    # (v1, v3]: the upserts of v2 and the deletes of v3, each with its op and commit version.
    changes = spark.read.format("tidelake").option("startingVersion", v1).option("endingVersion", v3).load(path)
    assert [f.name for f in changes.schema.fields][-3:] == ["_op", "_commit_version", "_commit_time"]
    got = sorted((r.id, r._op, r._commit_version) for r in changes.collect())
    assert got == sorted([(i, "upsert", v2) for i in range(90, 120)] + [(i, "delete", v3) for i in range(10)])
    only_v2 = spark.read.format("tidelake").option("startingVersion", v1).option("endingVersion", v2).load(path)
    assert only_v2.count() == 30
    t2 = Table.open(path).latest_timestamp(2)  # commit time of v2
    by_time = (spark.read.format("tidelake").option("startingTimestamp", str(t1))
               .option("endingTimestamp", dt.datetime.fromtimestamp(t2 / 1000, dt.timezone.utc).isoformat()).load(path))
    assert sorted(r.id for r in by_time.collect()) == list(range(90, 120))

    # PK equality is pushed down: Spark plans one partition (one bucket) and applies no filter itself.
    point = spark.read.format("tidelake").load(path).filter("id = 42")
    assert point.rdd.getNumPartitions() == 1
    assert [(r.id, r.amount) for r in point.collect()] == [(42, 420)]
    plan = point._jdf.queryExecution().executedPlan().toString()
    assert not re.search(r"(^|\) |\+- )Filter ", plan, re.M), plan
    ranged = spark.read.format("tidelake").load(path).filter("amount < 0 and id >= 110")
    assert sorted(r.id for r in ranged.collect()) == list(range(110, 120))


def test_write_table_modes_commit_once(spark, tmp_path):
    path = str(tmp_path / "t")
    props = {"write.bucket.num": "3", "clustering.auto": "false"}
    df = spark.createDataFrame([(i, i, "a") for i in range(60)], SCHEMA).repartition(3)
    assert tls.write_table(df, path, mode="append", primary_key=["id"], properties=props) == 1
    history = Table.open(path).history()
    # Three Spark tasks staged files, one commit published them all.
    assert [h["operation"] for h in history][-1] == "insert" and len(history) == 2
    tls.write_table(spark.createDataFrame([(i, 100 + i, "b") for i in range(50, 70)], SCHEMA).repartition(2), path,
                    mode="upsert")
    tls.write_table(spark.createDataFrame([(i,) for i in range(0, 5)], "id long"), path, mode="delete")
    table = Table.open(path)
    assert table.version == 3
    assert {r["id"]: r["amount"] for r in table.scan().to_pylist()} == \
        {i: i for i in range(5, 50)} | {i: 100 + i for i in range(50, 70)}
    tls.write_table(spark.createDataFrame([(7, 7, "only")], SCHEMA), path, mode="overwrite")
    table = Table.open(path)
    assert table.version == 4
    assert table.scan().to_pylist() == [{"id": 7, "amount": 7, "name": "only"}]
    assert table.scan(version=3).num_rows == 65  # the overwritten version is still readable


def test_s3_table_written_by_tasks_and_read_back(spark, s3_server):
    """Executors stage the files straight into S3 (the Table and its storage options reach them by
    pickle); the driver commits once; reads plan and read buckets from S3. Options are given explicitly
    (``storageOptions``), not through the environment."""
    path = s3_server.url("spark")
    df = spark.createDataFrame([(i, i, "a") for i in range(60)], SCHEMA).repartition(3)
    assert tls.write_table(df, path, mode="append", primary_key=["id"], storage_options=s3_server.options,
                           properties={"write.bucket.num": "3", "clustering.auto": "false"}) == 1
    tls.write_table(spark.createDataFrame([(i, 100 + i, "b") for i in range(50, 70)], SCHEMA).repartition(2), path,
                    mode="upsert", storage_options=s3_server.options)
    table = Table.open(path, storage_options=s3_server.options)
    assert [h["operation"] for h in table.history()] == ["create", "insert", "upsert"]
    expected = {i: (i, "a") for i in range(50)} | {i: (100 + i, "b") for i in range(50, 70)}
    assert {r["id"]: (r["amount"], r["name"]) for r in table.scan().to_pylist()} == expected
    assert set(table.storage.list("data")) == {f.path for f in table.plan()}   # nothing written elsewhere
    read = spark.read.format("tidelake").option("storageOptions", json.dumps(s3_server.options)).load(path)
    assert read.rdd.getNumPartitions() == 3 and rows_of(read) == expected
    v1 = (spark.read.format("tidelake").option("storageOptions", json.dumps(s3_server.options))
          .option("versionAsOf", 1).load(path))
    assert rows_of(v1) == {i: (i, "a") for i in range(60)}


def test_failed_spark_job_leaves_nothing_visible(spark, tmp_path):
    from pyspark.sql.functions import col, udf
    path = str(tmp_path / "t")
    tls.write_table(spark.createDataFrame([(1, 1, "x")], SCHEMA), path, mode="upsert", primary_key=["id"],
                    properties={"write.bucket.num": "2", "clustering.auto": "false"})
    before = sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(os.path.join(path, "data")) for f in fs)

    @udf("long")
    def explode_on_77(value):
        if value == 77:
            raise RuntimeError("task failure injected by the test")
        return value

    bad = spark.range(0, 200, numPartitions=4).select(col("id"), explode_on_77(col("id")).alias("amount"),
                                                       col("id").cast("string").alias("name"))
    with pytest.raises(Exception, match="task failure injected"):
        tls.write_table(bad, path, mode="upsert")
    table = Table.open(path)
    assert table.version == 1 and table.scan().to_pylist() == [{"id": 1, "amount": 1, "name": "x"}]
    # abort() removes what finished tasks staged; a task still running when the job failed may finish its file
    # after abort(). Such files are never referenced by any version, and retention removes them once older than
    # acid.data.retain.hours (24 h by default), like Delta's VACUUM: check both.
    later = Table.open(path, clock=lambda: int(time.time() * 1000) + 25 * 3600 * 1000)
    later.expire()
    assert later.scan().to_pylist() == [{"id": 1, "amount": 1, "name": "x"}]
    after = sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(os.path.join(path, "data")) for f in fs)
    assert after == before


def test_stream_sink_commit_is_idempotent_per_batch_id(tmp_path):
    path = str(tmp_path / "t")
    table = Table.create(path, pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("name", pa.string())]),
                         ["id"], {"write.bucket.num": "2", "clustering.auto": "false"})
    writer = TableStreamWriter(table, "upsert", app_id="query-1", checkpoint_location=None)
    batch = pa.record_batch({"id": [1, 2], "amount": [10, 20], "name": ["a", "b"]})
    first = writer.write(iter([batch]))
    writer.commit([first], 0)
    assert Table.open(path).version == 1
    replay = writer.write(iter([batch]))  # the same batch, re-run after a crash: freshly staged files
    writer.commit([replay], 0)
    table = Table.open(path)
    assert table.version == 1 and table.app_state("query-1")["batch_id"] == 0
    assert all(not os.path.exists(os.path.join(path, f["path"])) for f in replay.files)
    writer.commit([writer.write(iter([pa.record_batch({"id": [3], "amount": [30], "name": ["c"]})]))], 1)
    assert Table.open(path).version == 2 and Table.open(path).scan().num_rows == 3
    assert isinstance(first, StagedFiles) and first.rows == 2


@pytest.fixture
def broker(tmp_path):
    from tidelake.broker import EmbeddedBroker
    with EmbeddedBroker(tmp_path / "broker-data", port=0) as b:
        yield b.bootstrap_servers


def produce_orders(bootstrap: str, topic: str, orders: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for order in orders:
        producer.produce(topic, key=str(order["id"]).encode(), value=json.dumps(order).encode())
    assert producer.flush(30) == 0


def start_kafka_to_table(spark, bootstrap: str, topic: str, path: str, checkpoint: str, trigger: dict):
    from pyspark.sql.functions import col, from_json
    source = (spark.readStream.format("tidelake-kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "150")
              .load())
    orders = source.select(from_json(col("value").cast("string"), SCHEMA).alias("o")).select("o.*")
    return (orders.writeStream.format("tidelake").option("operation", "upsert")
            .option("primaryKey", "id")  # creates the table on first use
            .option("tableProperties", json.dumps({"write.bucket.num": "2", "clustering.auto": "false"}))
            .option("checkpointLocation", checkpoint).trigger(**trigger).start(path))


def run_kafka_to_table(spark, bootstrap: str, topic: str, path: str, checkpoint: str) -> None:
    query = start_kafka_to_table(spark, bootstrap, topic, path, checkpoint, {"availableNow": True})
    try:
        assert query.awaitTermination(300), "AvailableNow query did not finish"
        assert query.exception() is None
    finally:
        query.stop()


def test_kafka_to_table_stream_and_batch_replay(spark, broker, tmp_path):
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker})  # kept referenced until the futures resolve
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    path, checkpoint = str(tmp_path / "orders"), str(tmp_path / "ckpt")
    # 400 changes to 100 keys; the last change per key is amount = 3 * 1000 + id.
    produce_orders(broker, topic, [{"id": i % 100, "amount": (i // 100) * 1000 + i % 100, "name": f"r{i // 100}"}
                                   for i in range(400)])
    run_kafka_to_table(spark, broker, topic, path, checkpoint)
    table = Table.open(path)
    assert table.primary_key == ["id"] and table.bucket_num == 2
    expected = {i: 3000 + i for i in range(100)}
    assert {r["id"]: r["amount"] for r in table.scan().to_pylist()} == expected
    app_id = f"spark-query:{streaming_query_id(checkpoint)}"  # the sink's default app id
    state = table.app_state(app_id)
    batches = state["batch_id"] + 1
    assert batches == 3  # 400 records, at most 150 per micro-batch
    assert sum(1 for h in table.history() if h["operation"] == "upsert") == batches
    version = table.version

    # Crash after the table commit but before Spark wrote its commit log: Spark re-runs the last batch id.
    last_commit = os.path.join(checkpoint, "commits", str(state["batch_id"]))
    os.remove(last_commit)
    crc = os.path.join(checkpoint, "commits", f".{state['batch_id']}.crc")  # Hadoop's checksum file
    if os.path.exists(crc):
        os.remove(crc)
    run_kafka_to_table(spark, broker, topic, path, checkpoint)
    table = Table.open(path)
    assert os.path.exists(last_commit)  # Spark did re-run and finish that batch ...
    assert table.version == version     # ... and the table committed nothing twice
    assert {r["id"]: r["amount"] for r in table.scan().to_pylist()} == expected

    # A processing-time query from the same checkpoint picks up new records with the next batch id.
    produce_orders(broker, topic, [{"id": 1000 + i, "amount": i, "name": "new"} for i in range(10)])
    query = start_kafka_to_table(spark, broker, topic, path, checkpoint, {"processingTime": "1 second"})
    try:
        deadline = time.monotonic() + 240
        while Table.open(path).scan().num_rows < 110 and time.monotonic() < deadline and query.isActive:
            time.sleep(0.5)
        assert query.exception() is None
    finally:
        query.stop()
    table = Table.open(path)
    assert table.scan().num_rows == 110
    assert table.version == version + 1 and table.app_state(app_id)["batch_id"] == batches
    assert table.changes(start_version=version).num_rows == 10


def test_publish_commits_once_and_records_an_applications_batch_without_files(tmp_path):
    """The writers' and the pipeline's commit: nothing to publish is no commit, unless an application's batch
    (its offsets) must be recorded, e.g. an exactly-once batch that held only tombstones."""
    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("amount", pa.int64())]), ["id"])
    assert publish(table, [StagedFiles(files=[], rows=0), None], operation="upsert") is None
    assert table.version == 0
    version = publish(table, [StagedFiles(files=[], rows=0)], operation="upsert", app_id="app", batch_id=0,
                      app_extra={"offsets": {"0": 7}})
    assert version == 1 and table.app_state("app")["extra"] == {"offsets": {"0": 7}}
    staged = [stage(table, "upsert", iter([pa.record_batch({"id": [1, 2], "amount": [1, 2]})])),
              # a pipeline task: changes with their op, in the order they happened; the last per key wins
              stage(table, "changes", iter([pa.record_batch({"id": [3, 4, 3], "amount": [3, 4, None],
                                                             "_op": pa.array([0, 0, 1], pa.int8())})]))]
    assert publish(table, staged, operation="upsert") == 2  # every task's files in ONE version
    assert sorted(table.scan().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "amount": 1}, {"id": 2, "amount": 2}, {"id": 4, "amount": 4}]


def test_table_is_shipped_to_tasks_by_pickling(tmp_path):
    import pickle

    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), ["id"])
    table.upsert(pa.table({"id": [1, 2]}))
    shipped = pickle.loads(pickle.dumps(table))
    assert shipped.path == table.path and shipped.version == table.version == 1
    assert shipped.scan().to_pylist() == table.scan().to_pylist()


def test_stage_and_publish_add_columns_in_the_same_commit(tmp_path):
    """Schema evolution of a sink: files staged with a column the table lacks, and the ONE commit that
    publishes them adds it (the version before has no such column); a column of another type is refused."""
    from tidelake.table import SchemaError

    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("amount", pa.int64())]), ["id"],
                         {"write.bucket.num": "2"})
    v0 = table.version
    currency = pa.field("currency", pa.string())
    staged = stage(table, "upsert", iter(pa.table({"id": [1, 2], "amount": [10, 20], "currency": ["EUR", None]})
                                         .to_batches()), [currency])
    version = publish(table, [staged], operation="upsert", add_columns=[currency])
    assert version == v0 + 1
    assert table.schema_at(v0).names == ["id", "amount"] and table.schema.field("currency").type == pa.string()
    assert table.scan().sort_by("id").to_pylist() == [{"id": 1, "amount": 10, "currency": "EUR"},
                                                      {"id": 2, "amount": 20, "currency": None}]
    with pytest.raises(SchemaError, match="currency"):
        publish(table, [staged], operation="upsert", add_columns=[pa.field("currency", pa.int64())])
