"""The read-optimized view, read by other engines (delta-rs, pyiceberg, DuckDB, polars) and compared
with ``table.scan()`` at the view's source version."""
from __future__ import annotations

import glob
import json
import os
from decimal import Decimal

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyiceberg.table import StaticTable

from tidelake.lakeview import LakeviewError, publish, read_view_file, source_versions
from tidelake.lakeview.iceberg import NAMESPACE, TABLE_NAME, iceberg_catalog, iceberg_location
from tidelake.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(10, 2)),
                    ("at", pa.timestamp("us", tz="UTC"))])


def rows(ids, tag):
    return pa.table({"id": ids, "name": [f"{tag}{i}" for i in ids],
                     "amount": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
                     "at": pa.array([i * 1_000_000 for i in ids], pa.timestamp("us", tz="UTC"))}, schema=SCHEMA)


def by_id(t: pa.Table) -> list[dict]:
    return t.sort_by("id").to_pylist()


def make_table(path, **props) -> Table:
    props = {"write.bucket.num": "4", "clustering.auto": "false", "maintenance.mode": "inline", **props}
    t = Table.create(str(path), SCHEMA, ["id"], props)
    t.upsert(rows(range(0, 100), "a"))
    t.upsert(rows(range(50, 150), "b"))
    t.delete([0, 1, 2, 149])
    return t


def delta_rows(root) -> pa.Table:
    return DeltaTable(str(root)).to_pyarrow_table()


def iceberg_rows(t: Table) -> pa.Table:
    return iceberg_catalog(t.storage).load_table(f"{NAMESPACE}.{TABLE_NAME}").scan().to_arrow()


def listed_files(t: Table) -> list[str]:
    return [os.path.join(t.path, f["path"]) for f in read_view_file(t.storage)["files"]]


def test_compaction_publishes_both_formats_over_the_base_files(tmp_path):
    t = make_table(tmp_path / "t", **{"view.formats": "delta,iceberg"})
    v = t.compact()
    expected = by_id(t.scan(version=v))
    assert len(expected) == 146
    assert by_id(delta_rows(t.path)) == expected
    assert by_id(iceberg_rows(t)) == expected
    assert by_id(StaticTable.from_metadata(iceberg_location(t.storage)).scan().to_arrow()) == expected
    assert DeltaTable(t.path).transaction_version("tidelake") == v
    assert source_versions(t) == {"delta": v, "iceberg": v}
    view = read_view_file(t.storage)
    assert view["source_version"] == v
    # every bucket was compacted: the view is the table's own base files, nothing copied
    base_files = {fe.file.path for fe in t.metadata.live_files(v) if fe.file.kind == "base"}
    assert {f["path"] for f in view["files"]} == base_files
    assert {f["kind"] for f in view["files"]} == {"base"}
    assert sorted(DeltaTable(t.path).file_uris()) == sorted(os.path.join(t.path, p) for p in base_files)
    got = duckdb.connect().read_parquet(listed_files(t), union_by_name=True).to_arrow_table()
    assert by_id(got) == expected
    assert pl.read_parquet(listed_files(t)).sort("id").to_dicts() == expected
    assert pl.read_delta(t.path).sort("id").to_dicts() == expected


def test_every_compaction_refreshes_the_view_and_deltas_since_are_not_in_it(tmp_path):
    t = make_table(tmp_path / "t", **{"view.formats": "delta,iceberg"})
    v1 = t.compact()
    t.upsert(rows(range(140, 200), "c"))
    t.delete([50])
    # not compacted yet: the view still shows v1
    assert by_id(delta_rows(t.path)) == by_id(t.scan(version=v1))
    assert by_id(iceberg_rows(t)) == by_id(t.scan(version=v1))
    v2 = t.compact()
    expected = by_id(t.scan(version=v2))
    assert expected != by_id(t.scan(version=v1))
    assert by_id(delta_rows(t.path)) == expected
    assert by_id(iceberg_rows(t)) == expected
    assert source_versions(t) == {"delta": v2, "iceberg": v2}
    assert DeltaTable(t.path).version() == 1


def test_a_partial_compaction_merges_the_buckets_still_holding_deltas(tmp_path):
    t = make_table(tmp_path / "t", **{"view.formats": "delta"})
    v = t.compact(buckets=[0, 1])
    expected = by_id(t.scan(version=v))
    assert by_id(delta_rows(t.path)) == expected
    kinds = {f["bucket"]: f["kind"] for f in read_view_file(t.storage)["files"]}
    assert kinds == {0: "base", 1: "base", 2: "merged", 3: "merged"}
    for f in read_view_file(t.storage)["files"]:
        if f["kind"] == "merged":
            assert f["path"].startswith("_lakeview/data/")
            assert pq.read_schema(os.path.join(t.path, f["path"])).names == SCHEMA.names   # no _op column


def test_the_publish_call_and_schema_evolution(tmp_path):
    t = make_table(tmp_path / "t")
    p = publish(t, "delta,iceberg")
    assert p.formats == ("delta", "iceberg") and p.source_version == t.version and p.merged == 4
    assert by_id(delta_rows(t.path)) == by_id(t.scan())
    again = publish(t.path, ("delta", "iceberg"))
    assert again.formats == () and again.skipped == ("delta", "iceberg")
    t.add_column("note", pa.string())
    t.upsert(pa.table({"id": [7], "name": ["n"], "amount": pa.array([Decimal(1)], pa.decimal128(10, 2)),
                       "at": pa.array([0], pa.timestamp("us", tz="UTC")), "note": ["new"]}))
    t.compact()
    publish(t, ["iceberg", "delta"])
    expected = by_id(t.scan())
    assert [r["note"] for r in expected if r["id"] in (7, 8)] == ["new", None]
    assert by_id(delta_rows(t.path)) == expected
    assert by_id(iceberg_rows(t).select(t.schema.names)) == expected
    # merged files of views no longer shown (nor the one before) are deleted
    publish(t.path, "delta", version=None)
    assert all(os.path.exists(f) for f in listed_files(t))


def test_no_format_or_an_unknown_one_is_one_clear_error(tmp_path):
    t = make_table(tmp_path / "t")
    with pytest.raises(LakeviewError, match="view.formats is not set"):
        publish(t)
    with pytest.raises(LakeviewError, match="unknown view format hudi"):
        publish(t, "delta,hudi")


def test_a_raw_glob_of_the_data_folder_is_not_the_table(tmp_path):
    """What the README says a raw read gives: every retained file, deltas with their _op, old bases."""
    t = make_table(tmp_path / "t", **{"view.formats": "delta"})
    t.compact()
    raw = duckdb.connect().execute(
        "SELECT count(*) FROM read_parquet(?, union_by_name=true)", [os.path.join(t.path, "data/**/*.parquet")]).fetchone()[0]
    assert raw != t.scan().num_rows
    assert not glob.glob(os.path.join(t.path, "data", "**", "_delta_log"), recursive=True)
    assert json.load(open(os.path.join(t.path, "_lakeview", "view.json")))["source_version"] == t.version


def test_automatic_compaction_in_the_background_refreshes_the_view(tmp_path):
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"],
                     {"write.bucket.num": "2", "compaction.commit.num": "2", "view.formats": "delta,iceberg"})
    try:
        for i in range(4):
            t.upsert(rows(range(i * 10, i * 10 + 15), f"r{i}"))
            t.maintenance.wait(60)
        compactions = [h["version"] for h in t.history() if h["operation"] == "compact"]
        assert len(compactions) == 2
        last = compactions[-1]
        assert source_versions(t) == {"delta": last, "iceberg": last}
        assert by_id(delta_rows(t.path)) == by_id(t.scan(version=last)) == by_id(iceberg_rows(t))
    finally:
        t.close()


def test_a_table_on_s3_publishes_both_formats_there(s3_server):
    """The view of a table on an S3 server (moto's): the Delta log and the Iceberg metadata are written
    beside the table's files on the store, and both read back equal to the table."""
    t = Table.create(s3_server.url("lakeview"), SCHEMA, ["id"],
                     {"write.bucket.num": "2", "clustering.auto": "false", "maintenance.mode": "inline"},
                     storage_options=s3_server.options)
    t.upsert(rows(range(0, 40), "a"))
    t.delete([3])
    p = publish(t, "delta,iceberg")
    assert p.merged == 2 and p.formats == ("delta", "iceberg")
    expected = by_id(t.scan())
    from tidelake.lakeview.delta import delta_options
    assert by_id(DeltaTable(t.path, storage_options=delta_options(t.storage)).to_pyarrow_table()) == expected
    assert by_id(iceberg_rows(t)) == expected
    assert source_versions(t) == {"delta": t.version, "iceberg": t.version}
    assert t.storage.exists("_lakeview/iceberg/view/metadata/version-hint.text")
    t.upsert(rows(range(40, 50), "b"))
    t.compact()
    assert publish(t, "delta,iceberg").merged == 0
    assert by_id(iceberg_rows(t)) == by_id(t.scan())
