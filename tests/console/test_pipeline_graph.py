"""The console's Pipelines page graph: a directory's table pipelines in dependency order with lag and freshness."""
from __future__ import annotations

import pyarrow as pa

from tidelake.console.pipelines_view import PipelineCatalog
from tidelake.table import Table


def test_the_catalog_shows_the_chain_in_order_with_each_stage_lag(tmp_path):
    orders = Table.create(str(tmp_path / "orders"), pa.schema([("id", pa.int64()), ("region", pa.string())]), ["id"])
    orders.upsert(pa.table({"id": [1], "region": ["a"]}))
    orders.upsert(pa.table({"id": [2], "region": ["b"]}))
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    (pipelines / "b_top.yaml").write_text("source: {table: ../by_region}\ntransform: SELECT region, n FROM source "
                                         "ORDER BY n DESC LIMIT 1\nrefresh: full\n"
                                         "sink: {table: ../top, primary_key: [region]}\n")
    (pipelines / "a_count.yaml").write_text("source: {table: ../orders}\ntransform: SELECT region, count(*) AS n "
                                           "FROM source GROUP BY region\nsink: {table: ../by_region}\n")
    catalog = PipelineCatalog(str(pipelines), view=None, client_config={}, timeout=1.0)
    rows, error = catalog.graph()
    assert error is None
    assert [(r.name, r.depth, r.reads, r.upstream) for r in rows] == [
        ("by_region", 0, [], "orders"), ("top", 1, ["by_region"], "by_region")]
    assert (rows[0].upstream_position, rows[0].consumed, rows[0].lag, rows[0].error) == (2, None, 2, None)
    assert rows[0].lag_s is not None and rows[0].lag_s >= 0
    assert rows[1].error == "upstream table not created yet"
    assert catalog.status("a_count").lag == 2
    (pipelines / "c_loop.yaml").write_text("source: {table: ../top}\ntransform: SELECT * FROM source\n"
                                           "sink: {table: ../orders}\n")
    rows, error = catalog.graph()
    assert rows == [] and "cycle" in error
