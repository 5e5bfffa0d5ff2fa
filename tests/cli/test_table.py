"""`tidelake table ...` commands through the real CLI root, on local and S3 tables (moto's server; the CLI
takes S3 settings from AWS's environment variables)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from click.testing import CliRunner

from conftest import free_port

from tidelake.cli.main import cli
from tidelake.table import Table


def run(*args, ok=True, input=None):
    r = CliRunner().invoke(cli, ["table", *map(str, args)], input=input, catch_exceptions=False)
    assert (r.exit_code == 0) == ok, r.output
    return r.output


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path, monkeypatch):
    """(table location, a location holding nothing)"""
    if request.param == "local":
        return str(tmp_path / "orders"), str(tmp_path / "nope")
    server = request.getfixturevalue("s3_server")
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    return server.url("orders"), server.url("nope")


def test_cli_lifecycle(tmp_path, where):
    path, nowhere = where
    out = run("create", path, "--schema", "id long, name string, amount decimal(10,2)", "-k", "id", "--buckets", 2,
              "-p", "acid.data.retain.hours=48")
    assert "created table" in out
    t = Table.open(path)
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
    assert "no tidelake table" in run("describe", nowhere, ok=False)
    assert "no tidelake table" in run("check", nowhere, ok=False)


def test_check_on_s3_names_the_damaged_object(where):
    path, _ = where
    run("create", path, "--schema", "id long, v long", "-k", "id", "--buckets", 2)
    t = Table.open(path)
    t.upsert(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array([1, 2, 3], pa.int64())}))
    assert run("check", path).startswith(f"ok: {path} (version 1, 2 log entries")
    lost = t.plan()[0].path
    t.storage.delete(lost)
    report = json.loads(run("check", path, "--json", ok=False))
    assert not report["ok"] and [p["path"] for p in report["problems"]] == [t.storage.location(lost)]
    assert report["problems"][0]["problem"] == "missing data file"


def test_cli_on_s3_in_a_subprocess(s3_server, tmp_path):
    """The installed entry point with only AWS_* environment variables: create, upsert, scan, check."""
    env = {**os.environ, **s3_server.env}
    path = s3_server.url("proc")

    def tidelake(*args):
        return subprocess.run([sys.executable, "-m", "tidelake.cli.main", "table", *map(str, args)],
                              capture_output=True, text=True, timeout=120, env=env)
    assert tidelake("create", path, "--schema", "id long, name string", "-k", "id").returncode == 0
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in range(3)))
    assert "version 1" in tidelake("upsert", path, rows).stdout
    scanned = tidelake("scan", path, "--json")
    assert [json.loads(x)["id"] for x in scanned.stdout.splitlines()] == [0, 1, 2], scanned.stderr
    assert tidelake("check", path).stdout.startswith("ok:")
    no_creds = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    unreachable = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "table", "scan", path],
                                 capture_output=True, text=True, timeout=120,
                                 env={**no_creds, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
                                      "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "a",
                                      "AWS_SECRET_ACCESS_KEY": "b"})
    assert unreachable.returncode == 1 and "Traceback" not in unreachable.stderr
    assert len(unreachable.stderr.strip().splitlines()) == 1 and path in unreachable.stderr, unreachable.stderr


def test_cli_entry_point(tmp_path):
    """The installed `tidelake` command reaches the table group."""
    out = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "table", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "compact" in out.stdout and "changes" in out.stdout


def test_cli_on_real_aws_with_only_a_region(monkeypatch):
    """AWS_REGION and a key, no endpoint: the command reaches for AWS's regional endpoint (an unset endpoint
    was once passed on as None: "'None' is not an instance of 'str'") and, with no network here, says so in
    one line."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "AWS_ALLOW_HTTP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    r = CliRunner().invoke(cli, ["table", "history", "s3://bucket/prefix"])
    assert r.exit_code == 1
    line = r.output.strip()
    assert "\n" not in line and "None" not in line and line.startswith("tidelake: error: s3://bucket/prefix/"), line
    assert "https://s3.eu-west-1.amazonaws.com/bucket" in line or "InvalidAccessKeyId" in line, line
