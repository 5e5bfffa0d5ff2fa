"""JVM engines read a table's published view (tidelake/lakeview/): Spark with Delta Lake reads ``_delta_log``,
Spark with Iceberg's runtime reads the Iceberg view through Iceberg's JDBC catalog over the SQLite file
pyiceberg writes; both return the rows of ``Table.scan`` at the published version. The table has deletion
vectors and deletes: the view does not carry the vectors (a bucket with deltas is merged into one file with
the deletes applied; a compacted bucket is its base file in place), so engines without them read it right.
One peer SparkSession for the module."""
from __future__ import annotations

from decimal import Decimal
from urllib.parse import urlparse

import pyarrow as pa
import pytest

from spark_peer.peer_fixtures import peer  # noqa: F401  (the module's peer Spark)
from tidelake.lakeview import publish, read_view_file
from tidelake.lakeview.iceberg import ICEBERG_DIR, NAMESPACE, TABLE_NAME
from tidelake.table import Table

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(10, 2)),
                    ("at", pa.timestamp("us", tz="UTC")), ("flag", pa.bool_()), ("score", pa.float64())])
#: Iceberg's JDBC catalog finds tables by catalog name: pyiceberg's catalog is named after the namespace
CATALOG = NAMESPACE


def rows(ids, tag) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "name": [f"{tag}{i}" for i in ids],
                     "amount": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
                     "at": pa.array([i * 1_000_001 for i in ids], pa.timestamp("us", tz="UTC")),
                     "flag": [i % 3 == 0 for i in ids], "score": [i / 7 for i in ids]}, schema=SCHEMA)


def plain(t: pa.Table) -> list[dict]:
    """Rows as the peer driver returns them (timestamps in epoch microseconds, decimals as text), by id."""
    cols = {}
    for f in t.schema:
        c = t.column(f.name)
        if pa.types.is_timestamp(f.type):
            c = c.cast(pa.int64())
        elif pa.types.is_decimal(f.type):
            c = pa.array([None if v is None else f"{v:.{f.type.scale}f}" for v in c.to_pylist()])
        cols[f.name] = c
    return sorted(pa.table(cols).to_pylist(), key=lambda r: r["id"])


def by_id(got: list[dict]) -> list[dict]:
    return sorted(got, key=lambda r: r["id"])


def iceberg_conf(t: Table) -> dict[str, str]:
    base = t.storage.location(ICEBERG_DIR)
    prefix = f"spark.sql.catalog.{CATALOG}"
    return {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "jdbc",
            f"{prefix}.uri": f"jdbc:sqlite:{base}/catalog.db", f"{prefix}.warehouse": f"file://{base}",
            f"{prefix}.cache-enabled": "false"}


ICEBERG_TABLE = f"{CATALOG}.{NAMESPACE}.{TABLE_NAME}"


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Table:
    props = {"write.bucket.num": "4", "clustering.auto": "false", "maintenance.mode": "inline",
             "deletion-vectors.enabled": "true"}
    t = Table.create(str(tmp_path_factory.mktemp("lake") / "t"), SCHEMA, ["id"], props)
    t.upsert(rows(range(0, 200), "a"))
    t.compact()
    t.upsert(rows(range(150, 260), "b"))   # updates 150..199 in the base, adds 200..259
    t.delete([0, 1, 2, 151, 259])          # deletes in the base and in the new delta files
    return t


def test_spark_reads_the_delta_and_iceberg_views_of_a_table_with_deletes(peer, table):
    v = table.version
    published = publish(table, "delta,iceberg")
    assert published.source_version == v and published.merged == 4   # every bucket had deltas: merged
    expected = plain(table.scan(version=v))
    assert len(expected) == 255
    delta = peer.call("read_table", fmt="delta", path=table.path)
    assert delta["schema"] == "struct<id:bigint,name:string,amount:decimal(10,2),at:timestamp,flag:boolean," \
                              "score:double>"
    assert by_id(delta["rows"]) == expected
    iceberg = peer.call("read_table", fmt="iceberg", table=ICEBERG_TABLE, conf=iceberg_conf(table))
    assert by_id(iceberg["rows"]) == expected
    summary = peer.call("sql", sql=f"SELECT summary['tidelake.source-version'] AS v FROM {ICEBERG_TABLE}.snapshots "
                                   "ORDER BY committed_at DESC LIMIT 1")["rows"]
    assert summary == [{"v": str(v)}]


def test_after_a_compaction_spark_reads_the_base_files_in_place(peer, table):
    table.upsert(rows(range(300, 320), "c"))
    table.delete([3, 4])
    v = table.compact()
    publish(table, "delta,iceberg")
    view = read_view_file(table.storage)
    assert view["source_version"] == v and {f["kind"] for f in view["files"]} == {"base"}
    expected = plain(table.scan(version=v))
    assert len(expected) == 273
    files = peer.call("sql", sql=f"SELECT DISTINCT input_file_name() AS f FROM delta.`{table.path}`")["rows"]
    assert {urlparse(r["f"]).path for r in files} == {f"{table.path}/{f['path']}" for f in view["files"]}
    assert by_id(peer.call("read_table", fmt="delta", path=table.path)["rows"]) == expected
    assert by_id(peer.call("read_table", fmt="iceberg", table=ICEBERG_TABLE, conf=iceberg_conf(table))["rows"]) \
        == expected
    # Spark's own filters over the view: a predicate on the key and on a non-key column
    got = peer.call("sql", sql=f"SELECT id FROM delta.`{table.path}` WHERE id BETWEEN 150 AND 160 AND flag")["rows"]
    assert sorted(r["id"] for r in got) == [r["id"] for r in expected if 150 <= r["id"] <= 160 and r["flag"]]
