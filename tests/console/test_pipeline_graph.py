"""The console's Pipelines page graph: a directory's pipelines in dependency order with lag and freshness, the
positions the same as ``tidelake pipeline graph`` prints."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from playwright.sync_api import expect

from console_fixtures import RECORDS, ROOT, TOPIC, ConsoleProcess, browser_page
from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.console.pipelines_view import PipelineCatalog
from tidelake.spark.runner import Pipeline
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


@pytest.mark.spark
def test_the_console_shows_the_positions_pipeline_graph_prints_for_a_kafka_stage(data, spark, browser,  # noqa: F811
                                                                              tmp_path) -> None:
    """A Kafka stage after a real run of one batch (part of the topic): the console's graph row has the log end,
    the offsets consumed and the lag that ``tidelake pipeline graph`` prints (before: '-' for both positions)."""
    pipelines, tables = tmp_path / "pipelines", tmp_path / "tables"
    pipelines.mkdir()
    (pipelines / "kafka_orders.yaml").write_text(
        f"source:\n  bootstrap_servers: {data.bootstrap}\n  topic: {TOPIC}\n  group_id: graph-orders\n"
        f"  max_rate_per_partition: 10\n  batch_interval: 1\noffsets: exactly-once\n"
        f"sink:\n  table: ../tables/graph_orders\n  format: debezium-json\n  primary_key: [id]\n"
        f"  schema: \"id long, amount long, status string\"\n")
    Pipeline.from_yaml(pipelines / "kafka_orders.yaml", spark=spark).run(max_batches=1)
    assert Table.exists(str(tables / "graph_orders"))
    done = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "pipeline", "graph", str(pipelines), "--json"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    [printed] = json.loads(done.stdout)["stages"]
    assert (printed["name"], printed["kind"], printed["upstream"]) == ("graph_orders", "kafka", f"topic {TOPIC}")
    assert printed["upstream_position"] == RECORDS and 0 < printed["consumed"] < RECORDS
    assert printed["lag"] == RECORDS - printed["consumed"]
    console = ConsoleProcess(["-b", data.bootstrap, "--pipelines", str(pipelines), "--sample-interval", "0.5"])
    try:
        with browser_page(browser) as page:
            page.goto(f"{console.url}/pipelines")
            row = page.locator("#pipeline-graph tr[data-stage='graph_orders'] td")
            expect(row.nth(2)).to_have_text(f"topic {TOPIC}")
            expect(row.nth(3)).to_have_text(str(printed["upstream_position"]))
            expect(row.nth(4)).to_have_text(str(printed["consumed"]))
            expect(row.nth(5)).to_have_text(str(printed["lag"]))
            expect(page.locator("#pipelines tr[data-pipeline='kafka_orders'] td").nth(3)).to_have_text(
                str(printed["lag"]))
    finally:
        assert "Traceback" not in console.stop()
