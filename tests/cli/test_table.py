"""`tidelake table ...` commands through the real CLI root."""
from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from tidelake.cli.main import cli
from tidelake.table import Table


def run(*args, ok=True, input=None):
    r = CliRunner().invoke(cli, ["table", *map(str, args)], input=input, catch_exceptions=False)
    assert (r.exit_code == 0) == ok, r.output
    return r.output


def test_cli_lifecycle(tmp_path):
    path = tmp_path / "orders"
    out = run("create", path, "--schema", "id long, name string, amount decimal(10,2)", "-k", "id", "--buckets", 2,
              "-p", "acid.data.retain.hours=48")
    assert "created table" in out
    t = Table.open(str(path))
    assert t.properties["acid.data.retain.hours"] == "48" and str(t.schema.field("amount").type) == "decimal128(10, 2)"
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": i, "name": f"n{i}", "amount": i}) + "\n" for i in range(5)))
    assert "version 1" in run("upsert", path, rows)
    gone = tmp_path / "gone.jsonl"
    gone.write_text('{"id": 0}\n')
    assert "version 2" in run("upsert", path, gone, "--delete")
    lines = run("scan", path, "--json").splitlines()
    assert [json.loads(x)["id"] for x in lines] == [1, 2, 3, 4]
    assert [json.loads(x)["id"] for x in run("scan", path, "--version", 1, "--json").splitlines()] == [0, 1, 2, 3, 4]
    assert [json.loads(x)["id"] for x in run("scan", path, "--where", "id=3", "--json").splitlines()] == [3]
    ch = [json.loads(x) for x in run("changes", path, "--start-version", 1, "--json").splitlines()]
    assert [(c["id"], c["_op"]) for c in ch] == [(0, "delete")]
    out = run("history", path)
    assert "create" in out and "upsert" in out
    out = run("describe", path)
    assert "write.bucket.num" in out and "delta" in out
    assert "committed version 3" in run("compact", path)
    assert "nothing to do" in run("cluster", path)
    assert "committed version 4" in run("restore", path, 1)
    assert "horizon" in run("expire", path)
    assert "horizon" in run("purge", path, "--yes")
    err = run("scan", path, "--version", 1, ok=False)
    assert "retention horizon" in err
    assert "no tidelake table" in run("describe", tmp_path / "nope", ok=False)


def test_cli_entry_point(tmp_path):
    """The installed `tidelake` command reaches the table group."""
    out = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "table", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "compact" in out.stdout and "changes" in out.stdout
