"""An aggregate sink's state columns (``__rows``, ``__n<i>``, ``__s<i>``, ``__m<i>``, named by the table property
``columns.hidden``) are seen by no reader but the pipeline maintaining them: the CLI's table scan / sql / changes /
describe, Spark's ``format("tidelake")`` (snapshot and changes), the published Delta and Iceberg views, the web
console's table page, and the next stage of a chain reading the sink as its ``source`` with SELECT *."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
import uvicorn
from deltalake import DeltaTable

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.console.app import ConsoleSettings, create_app
from tidelake.lakeview.iceberg import NAMESPACE, TABLE_NAME, iceberg_catalog
from tidelake.spark.pipeline_config import PipelineConfig
from tidelake.spark.table_pipeline import TablePipeline
from tidelake.table import Table

ROOT = Path(__file__).resolve().parents[2]
ORDERS = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.int64())])
BY_REGION = ("SELECT region, count(*) AS n, sum(amount) AS total, avg(amount) AS mean, min(amount) AS lo, "
             "max(amount) AS hi FROM source GROUP BY region")
VISIBLE = ["region", "n", "total", "mean", "lo", "hi"]


def _pipeline(base, spark, source, transform, sink, properties=None):
    raw = {"source": {"table": source}, "transform": transform,
           "sink": {"table": sink, "properties": properties or {}}}
    return TablePipeline(PipelineConfig.from_dict(raw, base_dir=base), spark=spark)


@pytest.fixture(scope="module")
def chain(tmp_path_factory, spark):
    """orders -> by_region (the aggregate, its views published at each compaction) -> copy (SELECT * of it)."""
    base = tmp_path_factory.mktemp("hidden")
    orders = Table.create(str(base / "orders"), ORDERS, ["id"], {"write.bucket.num": "2"})
    orders.upsert(pa.table({"id": [1, 2, 3, 4], "region": ["a", "a", "b", "c"], "amount": [5, 9, 1, None]},
                           schema=ORDERS))
    by_region = _pipeline(base, spark, "orders", BY_REGION, "by_region",
                          {"view.formats": "delta,iceberg", "maintenance.mode": "inline"})
    copy = _pipeline(base, spark, "by_region", "SELECT * FROM source", "copy")
    by_region.step()
    copy.step()
    orders.upsert(pa.table({"id": [1, 5], "region": ["b", "c"], "amount": [2, 7]}, schema=ORDERS))
    orders.delete(pa.table({"id": [3]}))
    by_region.step()
    copy.step()   # an increment of the aggregate sink: its change feed, not only its snapshot
    return base, by_region, copy


def _cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tidelake.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done


def test_the_sink_names_its_hidden_columns_and_the_pipeline_still_reads_them(chain):
    base, by_region, _ = chain
    sink = Table.open(str(base / "by_region"))
    hidden = sink.properties["columns.hidden"].split(",")
    assert hidden and all(c.startswith("__") for c in hidden)
    assert sink.schema.names == VISIBLE + hidden
    assert sink.scan().column_names == VISIBLE == sink.visible_schema_at().names
    assert sink.scan(include_hidden=True).column_names == VISIBLE + hidden
    assert sink.changes(start_version=0).column_names == VISIBLE + ["_op", "_commit_version", "_commit_time"]
    assert by_region.results().column_names == VISIBLE


def test_the_cli_shows_no_state_column(chain):
    base, _, _ = chain
    path = base / "by_region"
    for args in (("table", "scan", path, "--json"), ("table", "sql", path, "SELECT * FROM t", "--json"),
                 ("table", "changes", path, "--start-version", "0", "--json"),
                 ("table", "sql", path, "SELECT * FROM changes", "--start-version", "0", "--json")):
        rows = [json.loads(line) for line in _cli(*args).stdout.splitlines()]
        assert rows and all(not any(k.startswith("__") for k in r) for r in rows), args
        assert {"region", "lo", "hi"} <= set(rows[0]), args
    described = json.loads(_cli("table", "describe", path, "--json").stdout)
    assert [f["name"] for f in described["schema"]] == VISIBLE


def test_spark_reads_no_state_column(chain, spark):
    base, _, _ = chain
    path = str(base / "by_region")
    assert spark.read.format("tidelake").load(path).columns == VISIBLE
    changes = spark.read.format("tidelake").option("startingVersion", "0").load(path)
    assert changes.columns == VISIBLE + ["_op", "_commit_version", "_commit_time"]


def test_the_next_stage_selecting_star_gets_the_results_only(chain):
    base, by_region, copy = chain
    assert Table.open(str(base / "copy")).schema.names == VISIBLE
    order = lambda r: r["region"]   # noqa: E731
    assert sorted(copy.results().to_pylist(), key=order) == sorted(by_region.results().to_pylist(), key=order)


def test_the_published_views_show_no_state_column(chain):
    base, by_region, _ = chain
    sink = Table.open(str(base / "by_region"))
    sink.compact()   # publishes the Delta and Iceberg views (view.formats)
    want = sorted(sink.scan().to_pylist(), key=lambda r: r["region"])
    delta = DeltaTable(sink.path).to_pyarrow_table()
    iceberg = iceberg_catalog(sink.storage).load_table(f"{NAMESPACE}.{TABLE_NAME}").scan().to_arrow()
    for view in (delta, iceberg):
        assert view.column_names == VISIBLE
        assert sorted(view.to_pylist(), key=lambda r: r["region"]) == want


def test_the_console_table_page_shows_no_state_column(chain):
    """The console's app served by uvicorn on a free port (its table pages need no broker), read over HTTP."""
    base, _, _ = chain
    settings = ConsoleSettings(client_config={"bootstrap.servers": "127.0.0.1:9"}, tables_dir=str(base),
                               sample_interval=3600)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:   # (uvicorn sets it once it serves)
            assert thread.is_alive(), "the console's server stopped before it served"
            time.sleep(0.05)
        with urllib.request.urlopen(f"http://127.0.0.1:{sock.getsockname()[1]}/tables/by_region",
                                    timeout=120) as answer:
            page = answer.read().decode()
    finally:
        server.should_exit = True
        thread.join(60)
    named = Table.open(str(base / "by_region")).properties["columns.hidden"]
    assert ">total<" in page and ">mean<" in page   # the schema and the rows' columns
    shown = page.replace(named, "")   # the property's value (properties, history) is the one place they are named
    assert [c for c in named.split(",") if c in shown] == []
