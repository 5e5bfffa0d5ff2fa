"""Spark SQL over a tidelake table: a temporary view through the ``tidelake`` Python data source
(``CREATE TEMPORARY VIEW v USING tidelake OPTIONS (path ..., versionAsOf ...)``), time travel by version and
time, and an increment as a view, compared with the Table API."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from spark_fixtures import spark  # noqa: F401  (session-scoped fixture)
from tidelake.table import Table

pytestmark = pytest.mark.spark


@pytest.fixture
def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "orders"), pa.schema([("id", pa.int64()), ("region", pa.string()),
                                                         ("amount", pa.int64())]), ["id"], {"write.bucket.num": "4"})
    t.upsert(pa.table({"id": list(range(20)), "region": ["eu", "us"] * 10, "amount": list(range(20))}))   # v1
    t.upsert(pa.table({"id": [0, 1, 20], "region": ["us", "us", "eu"], "amount": [100, 100, 100]}))       # v2
    t.delete([5, 6])                                                                                         # v3
    return t


def totals(rows: pa.Table) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows.to_pylist():
        out[r["region"]] = out.get(r["region"], 0) + r["amount"]
    return out


def sql_totals(spark, view: str) -> dict[str, int]:
    return {r.region: r.total for r in spark.sql(f"SELECT region, sum(amount) AS total FROM {view} GROUP BY region").collect()}


def test_temporary_view_at_a_version_and_at_a_time(spark, table):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders_v1 USING tidelake OPTIONS (path '{table.path}', versionAsOf '1')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders USING tidelake OPTIONS (path '{table.path}')")
    assert sql_totals(spark, "orders_v1") == totals(table.scan(version=1))
    assert sql_totals(spark, "orders") == totals(table.scan())
    assert sql_totals(spark, "orders") != sql_totals(spark, "orders_v1")
    at = dt.datetime.fromtimestamp(table.latest_timestamp(2) / 1000, dt.timezone.utc).isoformat()
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders_t USING tidelake "
              f"OPTIONS (path '{table.path}', timestampAsOf '{at}')")
    assert spark.sql("SELECT count(*) AS n FROM orders_t").collect()[0].n == table.scan(version=2).num_rows == 21


def test_an_increment_as_a_view_joined_with_the_table(spark, table):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders_changes USING tidelake "
              f"OPTIONS (path '{table.path}', startingVersion '1', endingVersion '3')")
    changed = spark.sql("SELECT id, _op, _commit_version FROM orders_changes ORDER BY _commit_version, id").collect()
    assert [(r.id, r._op, r._commit_version) for r in changed] == [
        (0, "upsert", 2), (1, "upsert", 2), (20, "upsert", 2), (5, "delete", 3), (6, "delete", 3)]
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders USING tidelake OPTIONS (path '{table.path}')")
    live = spark.sql("SELECT o.id, o.amount FROM orders o JOIN orders_changes c ON o.id = c.id "
                     "WHERE c._op = 'upsert' ORDER BY o.id").collect()
    assert [(r.id, r.amount) for r in live] == [(0, 100), (1, 100), (20, 100)]
