"""A pipeline batch that fails in a Spark task ends `tidelake pipeline run` (a real process, real Spark) with one
line giving the reason and what the batch read, and nothing of Spark's Python and Java stacks above it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clients import Rec, create_topics, produce_confluent, running_broker

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark


def test_a_failed_task_is_one_line_without_spark_stacks(tmp_path):
    with running_broker("tidelake", tmp_path / "broker") as bootstrap:
        create_topics(bootstrap, ["orders"], 1)
        produce_confluent(bootstrap, "orders", [Rec(0, None, json.dumps({"id": i}).encode(), 1_700_000_000_000)
                                                for i in range(3)])
        table = tmp_path / "table"
        table.mkdir()
        (table / "data").write_text("a file where the table's data folder goes: every task's write fails\n")
        config = tmp_path / "orders.yaml"
        config.write_text(f"source: {{bootstrap_servers: '{bootstrap}', topic: orders, group_id: g}}\n"
                          f"sink: {{table: '{table}', format: json, primary_key: [id], schema: 'id long'}}\n")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        r = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "pipeline", "run", str(config), "--once",
                            "--quiet"], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 1, r.stderr
    errors = [line for line in r.stderr.splitlines() if "error" in line.lower() or line.startswith(("\t", "  "))]
    assert len(errors) == 1, r.stderr
    line = errors[0]
    assert line.startswith("tidelake: error: a Spark task failed on orders (partition:offsets 0:0-3), nothing of "
                           "the batch committed: NotADirectoryError: "), line
    assert f"{table}/data/bucket-" in line and line.endswith("(tidelake pipeline run)"), line
    assert "Traceback" not in r.stderr and "at org.apache" not in r.stderr, r.stderr
