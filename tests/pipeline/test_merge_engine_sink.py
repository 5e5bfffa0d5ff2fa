"""Two exactly-once pipelines (orders, payments) sinking into one partial-update table (table property
``merge-engine``): each fills its own columns of the same rows; a restart re-reads nothing and a replayed
batch is not applied twice. The table then reads the same through the Spark source, ``table sql`` and the
change feed."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.broker import EmbeddedBroker
from tidelake.cli.main import cli
from tidelake.spark.runner import Pipeline
from tidelake.table import Table

pytestmark = pytest.mark.spark

ORDERS = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b.bootstrap_servers


def produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for r in records:
        producer.produce(topic, json.dumps(r).encode(), partition=r["order_id"] % 2)
    assert producer.flush(30) == 0


def pipeline(spark, bootstrap, topic, table) -> Pipeline:  # noqa: F811
    return Pipeline({"source": {"bootstrap_servers": bootstrap, "topic": topic, "group_id": f"g-{topic}",
                                "max_rate_per_partition": 10, "batch_interval": 0.5},
                     "offsets": "exactly-once",
                     "sink": {"table": table, "format": "json", "primary_key": ["order_id"], "buckets": 2,
                              "schema": "order_id long, amount long, paid boolean",
                              "properties": {"merge-engine": "partial-update"}}}, spark=spark)


def test_two_pipelines_fill_their_own_columns_of_one_partial_update_table(spark, broker, tmp_path):  # noqa: F811
    table = str(tmp_path / "orders")
    produce(broker, "orders", [{"order_id": i, "amount": i * 10} for i in range(ORDERS)])
    produce(broker, "payments", [{"order_id": i, "paid": True} for i in range(0, ORDERS, 3)])
    orders = pipeline(spark, broker, "orders", table)
    payments = pipeline(spark, broker, "payments", table)
    orders.run(max_batches=1)       # the two interleave: each commit folds onto the other's rows
    payments.run(once=True)
    orders.run(once=True)
    assert orders.run(once=True).records == 0   # a restart: everything was committed exactly once

    t = Table.open(table)
    want = [{"order_id": i, "amount": i * 10, "paid": True if i % 3 == 0 else None} for i in range(ORDERS)]
    assert sorted(t.scan().to_pylist(), key=lambda r: r["order_id"]) == want
    assert t.properties["merge-engine"] == "partial-update"
    assert {t.app_state(orders.config.app_id) is not None, t.app_state(payments.config.app_id) is not None} == {True}

    via_spark = spark.read.format("tidelake").load(table).toArrow()
    assert sorted(via_spark.to_pylist(), key=lambda r: r["order_id"]) == want
    out = CliRunner().invoke(cli, ["table", "sql", table, "SELECT count(*) AS n, count(paid) AS p, "
                                   "sum(amount)::BIGINT AS s FROM t", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"n": ORDERS, "p": ORDERS // 3, "s": sum(i * 10 for i in range(ORDERS))}
    # the change feed's last image of every key is the row as read
    feed = t.changes(start_version=0, before_images=True).to_pylist()
    last = {r["order_id"]: {c: r[c] for c in ("order_id", "amount", "paid")} for r in feed
            if r["_op"] in ("insert", "update_postimage")}
    assert sorted(last.values(), key=lambda r: r["order_id"]) == want
    t.close()


def test_spark_writes_fold_by_the_engine(spark, tmp_path):  # noqa: F811
    """``df.write.format("tidelake")``: executors stage every change, the driver's commit folds them."""
    path = str(tmp_path / "agg")
    Table.create(path, pa.schema([("k", pa.int64()), ("n", pa.int64()), ("hi", pa.int64())]), ["k"],
                 {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
                  "fields.hi.aggregate-function": "max", "write.bucket.num": "2"}).close()
    df = spark.createDataFrame([(k % 4, 1, k) for k in range(20)], "k long, n long, hi long").repartition(3)
    df.write.format("tidelake").mode("append").save(path)
    df.write.format("tidelake").mode("append").save(path)
    with Table.open(path) as t:
        rows = sorted(t.scan().to_pylist(), key=lambda r: r["k"])
    assert rows == [{"k": k, "n": 10, "hi": 16 + k} for k in range(4)]
