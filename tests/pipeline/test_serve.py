"""pipeline serve / graph: a directory of pipelines is one DAG, run in dependency order on one Spark session."""
from __future__ import annotations

import json
import threading
import time

import pyarrow as pa
import pytest
from click.testing import CliRunner

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.cli.main import cli
from tidelake.spark.pipeline_config import PipelineConfigError
from tidelake.spark.pipeline_graph import GraphError, PipelineGraph
from tidelake.spark.pipeline_server import PipelineServer
from tidelake.table import Table

ORDERS = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.int64())])
CHAIN = {
    "paid.yaml": ("orders", "SELECT id, region, amount FROM source WHERE amount > 0", ""),
    "revenue.yaml": ("paid", "SELECT region, sum(amount) AS revenue, count(*) AS orders FROM source GROUP BY region",
                     ""),
    "top.yaml": ("revenue", "SELECT region, revenue FROM source ORDER BY revenue DESC LIMIT 2",
                 "refresh: full\n"),
}


def _write_chain(directory, stages=CHAIN):
    directory.mkdir(exist_ok=True)
    for name, (upstream, sql, extra) in stages.items():
        key = "  primary_key: [region]\n" if "LIMIT" in sql else ""
        (directory / name).write_text(f"source: {{table: ../{upstream}}}\ntransform: \"{sql}\"\n{extra}"
                                      f"sink:\n  table: ../{name.removesuffix('.yaml')}\n{key}"
                                      f"trigger: {{interval: 0s}}\n")



def _row_order(row: dict) -> tuple:
    """A total order of result rows (a stage may hold several rows of one region)."""
    return tuple(sorted((k, repr(v)) for k, v in row.items()))

def test_the_graph_orders_stages_and_refuses_a_cycle_with_its_path(tmp_path):
    _write_chain(tmp_path / "chain")
    graph = PipelineGraph.load(tmp_path / "chain")
    assert [s.name for s in graph.stages] == ["paid", "revenue", "top"]
    assert graph.upstreams == {"paid": [], "revenue": ["paid"], "top": ["revenue"]}
    _write_chain(tmp_path / "loop", {"a.yaml": ("c", "SELECT * FROM source", ""),
                                     "b.yaml": ("a", "SELECT * FROM source", ""),
                                     "c.yaml": ("b", "SELECT * FROM source", "")})
    with pytest.raises(GraphError, match=r"cycle: (a -> b -> c -> a|b -> c -> a -> b|c -> a -> b -> c)"):
        PipelineGraph.load(tmp_path / "loop")
    result = CliRunner().invoke(cli, ["pipeline", "validate", str(tmp_path / "loop")])
    assert result.exit_code == 1 and "cycle" in result.output
    bad = tmp_path / "bad"
    _write_chain(bad, {"d.yaml": ("orders", "SELECT region, count(DISTINCT amount) AS d FROM source GROUP BY region",
                                  "")})
    result = CliRunner().invoke(cli, ["pipeline", "validate", str(bad)])
    assert result.exit_code == 1
    assert "cannot be maintained incrementally: COUNT(DISTINCT amount): a distinct aggregate" in result.output


def test_serve_runs_the_chain_in_dependency_order_until_every_stage_is_caught_up(tmp_path, spark):
    orders = Table.create(str(tmp_path / "orders"), ORDERS, ["id"], {"write.bucket.num": "2"})
    orders.upsert(pa.table({"id": [1, 2, 3], "region": ["a", "b", "c"], "amount": [5, -1, 7]}, schema=ORDERS))
    _write_chain(tmp_path / "chain")
    server = PipelineServer(PipelineGraph.load(tmp_path / "chain"), spark=spark)
    ran = server.run_pass()   # one pass: each stage backfills after the one it reads
    assert ran == {"paid": 1, "revenue": 1, "top": 1}
    orders.upsert(pa.table({"id": [2, 4], "region": ["b", "a"], "amount": [10, 1]}, schema=ORDERS))
    orders.delete(pa.table({"id": [3]}))
    assert server.run_pass() == {"paid": 1, "revenue": 1, "top": 1}   # both commits in one increment
    assert server.run_pass() == {}
    assert [(s.name, s.lag, s.lag_seconds) for s in server.statuses()] == [
        ("paid", 0, 0.0), ("revenue", 0, 0.0), ("top", 0, 0.0)]
    for stage in server.graph.stages:
        runner = server.runner(stage)
        got = sorted(runner.results().to_pylist(), key=_row_order)
        want = sorted(runner.recompute(runner.upstream().version).to_pylist(), key=_row_order)
        assert got == want, stage.name
    assert sorted(server.runner(server.graph.stages[2]).results().to_pylist(), key=lambda r: r["region"]) == [
        {"region": "a", "revenue": 6}, {"region": "b", "revenue": 10}]
    result = CliRunner().invoke(cli, ["pipeline", "graph", str(tmp_path / "chain"), "--json"])
    assert result.exit_code == 0, result.output
    stages = json.loads(result.output)["stages"]
    assert [(s["name"], s["lag"], s["reads"]) for s in stages] == [
        ("paid", 0, []), ("revenue", 0, ["paid"]), ("top", 0, ["revenue"])]


def test_serve_runs_each_stage_in_its_own_thread_until_stopped(tmp_path, spark):
    """Two independent branches off one upstream and a stage after one of them: each stage follows the commits
    before it; stop() ends every stage's thread and serve returns."""
    orders = Table.create(str(tmp_path / "orders"), ORDERS, ["id"], {"write.bucket.num": "2"})
    orders.upsert(pa.table({"id": [1, 2, 3], "region": ["a", "b", "c"], "amount": [5, -1, 7]}, schema=ORDERS))
    _write_chain(tmp_path / "chain", {**CHAIN, "count.yaml": (
        "orders", "SELECT region, count(*) AS n, max(amount) AS hi FROM source GROUP BY region", "")})
    server = PipelineServer(PipelineGraph.load(tmp_path / "chain"), spark=spark)
    done: list = []
    thread = threading.Thread(target=lambda: done.append(server.serve()), daemon=True)
    thread.start()
    try:
        for change in ({"id": [2, 4], "region": ["b", "a"], "amount": [10, 1]}, {"id": [5], "region": ["c"],
                                                                               "amount": [3]}):
            orders.upsert(pa.table(change, schema=ORDERS))
            for _ in range(1200):   # (bounded: each stage catches up within a few steps)
                if not thread.is_alive() or all(
                        server.runner(s).position().version is not None
                        and server.runner(s).position().version >= server.runner(s).upstream().refresh()
                        for s in server.graph.stages):
                    break
                time.sleep(0.1)
            assert thread.is_alive(), "serve stopped"
    finally:
        server.stop()
        thread.join(60)
    assert not thread.is_alive() and done[0].stopped_by == "signal"
    assert done[0].runs["count"] >= 1 and done[0].runs["top"] >= 1
    for stage in server.graph.stages:
        runner = server.runner(stage)
        got = sorted(runner.results().to_pylist(), key=_row_order)
        want = sorted(runner.recompute(runner.position().version).to_pylist(), key=_row_order)
        assert got == want, stage.name
    assert server.runner(server.graph.stages[0]).position().version == orders.version


def test_a_failing_stage_stops_serve_with_its_error(tmp_path, spark):
    orders = Table.create(str(tmp_path / "orders"), ORDERS, ["id"], {"write.bucket.num": "2"})
    orders.upsert(pa.table({"id": [1], "region": ["a"], "amount": [5]}, schema=ORDERS))
    _write_chain(tmp_path / "chain", {"ok.yaml": ("orders", "SELECT region, count(*) AS n FROM source GROUP BY region",
                                                  ""),
                                      "bad.yaml": ("orders", "SELECT id, nothing FROM source", "")})
    server = PipelineServer(PipelineGraph.load(tmp_path / "chain"), spark=spark)
    with pytest.raises(PipelineConfigError, match="nothing"):
        server.serve()
    assert server.stopping
