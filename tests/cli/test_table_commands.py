"""The table commands that change or inspect history, checked through the Table API: history --json with
operation parameters, restore to a version or a time, expire with --retain and --dry-run, set-properties,
add-column, update/delete with --where, and plain versus JSON output. Each on a local table and on an S3
one (moto's server; the CLI takes its settings from AWS's environment variables)."""
from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from tidelake.cli.main import cli
from tidelake.table import Table

DECIMAL = pa.decimal128(10, 2)


def dec(x) -> Decimal:
    return Decimal(str(x)).quantize(Decimal("0.01"))


def run(*args, ok: bool = True):
    r = CliRunner().invoke(cli, ["table", *map(str, args)])
    assert (r.exit_code == 0) == ok, r.output
    return r


@pytest.fixture(params=["local", "s3"])
def table(request, tmp_path: Path, monkeypatch) -> Table:
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        for k, v in server.env.items():
            monkeypatch.setenv(k, v)
        path = server.url("cli")
    else:
        path = str(tmp_path / "t")
    t = Table.create(path, pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                     ("amount", DECIMAL)]), ["id"],
                     {"write.bucket.num": "2"})
    t.upsert(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"],
                       "amount": pa.array([dec(1), dec(2), dec(3)], DECIMAL)}))
    return t


def scan_json(path: str, *args) -> list[dict]:
    return [json.loads(x) for x in run("scan", path, "--json", *args).stdout.splitlines()]


def test_update_and_delete_where(table: Table) -> None:
    out = run("update", table.path, "--set", "name=z", "--set", "amount=9.5", "--where", "id>=2").stdout
    assert "updated 2 rows: committed version 2" in out
    assert Table.open(table.path).scan().sort_by("id").to_pylist() == [
        {"id": 1, "name": "a", "amount": dec(1)},
        {"id": 2, "name": "z", "amount": dec("9.5")},
        {"id": 3, "name": "z", "amount": dec("9.5")}]
    assert "deleted 1 rows: committed version 3" in run("delete", table.path, "--where", "name=a").stdout
    assert [r["id"] for r in scan_json(table.path)] == [2, 3]
    nothing = run("delete", table.path, "--where", "id=42", ok=False)
    assert "no row" in nothing.stderr and Table.open(table.path).version == 3  # nothing committed


def test_set_properties_and_add_column(table: Table) -> None:
    assert "committed version 2" in run("set-properties", table.path, "acid.data.retain.hours=48",
                                        "user.owner=ops").stdout
    assert Table.open(table.path).properties["user.owner"] == "ops"
    fixed = run("set-properties", table.path, "write.bucket.num=4", ok=False)
    assert "fixed at creation" in fixed.stderr
    assert "committed version 3" in run("add-column", table.path, "note", "string").stdout
    assert scan_json(table.path, "--columns", "id,note") == [{"id": i, "note": None} for i in (1, 2, 3)]
    dup = run("add-column", table.path, "note", "long", ok=False)
    assert "already exists" in dup.stderr
    bad = run("add-column", table.path, "x", "bigfloat", ok=False)
    assert bad.exit_code == 2 and "unknown type" in bad.stderr


def test_history_json_has_operation_parameters(table: Table) -> None:
    run("set-properties", table.path, "user.owner=ops")
    run("add-column", table.path, "note", "string")
    run("restore", table.path, 1)
    history = json.loads(run("history", table.path, "--json").stdout)
    assert [h["version"] for h in history] == [4, 3, 2, 1, 0]
    assert [h["operation"] for h in history] == ["restore", "schema", "properties", "upsert", "create"]
    by_version = {h["version"]: h for h in history}
    assert by_version[4]["parameters"]["restore_of"] == 1
    assert by_version[3]["parameters"]["schema_fields"][-1] == "note string"
    assert by_version[2]["parameters"]["properties"]["user.owner"] == "ops"
    assert by_version[1]["metrics"] == {"files_added": len(table.plan(version=1)), "files_removed": 0,
                                        "rows_added": 3}
    assert by_version[0]["parameters"]["primary_key"] == ["id"]
    assert all(h["timestamp"].endswith("+00:00") for h in history)
    plain = run("history", table.path, "--limit", "2").stdout.splitlines()
    assert plain[0] == f"history of {table.path}" and plain[1].split()[:2] == ["VERSION", "TIME"]
    assert [line.split()[0] for line in plain[2:]] == ["4", "3"] and "restore_of=1" in plain[2]


def test_restore_to_a_timestamp(table: Table) -> None:
    t1 = table.latest_timestamp()
    time.sleep(0.01)  # the next commit gets a later millisecond
    table.delete([1, 2])
    assert scan_json(table.path, "--timestamp", t1) == scan_json(table.path, "--version", 1)
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t1 // 1000)) + f".{t1 % 1000:03d}Z"
    out = run("restore", table.path, "--timestamp", iso).stdout
    assert "restore to version 1: committed version 3" in out
    assert [r["id"] for r in scan_json(table.path)] == [1, 2, 3]
    same = run("restore", table.path, "3", ok=False)
    assert "current version" in same.stderr
    before = run("restore", table.path, "--timestamp", "2000-01-01", ok=False)
    assert "before the table was created" in before.stderr


def test_expire_retain_and_dry_run(table: Table) -> None:
    table.upsert(pa.table({"id": [1], "name": ["x"], "amount": pa.array([dec(5)], DECIMAL)}))
    table.compact()  # version 3: a base file per bucket; the older files are only read by versions 0-2
    files_before = table.storage.list("data")
    default = json.loads(run("expire", table.path, "--dry-run", "--json").stdout)
    assert default["retain_hours"] == 24 and default["horizon"] == 0 and default["files_removed"] == []

    time.sleep(0.01)
    plan = json.loads(run("expire", table.path, "--retain", "0", "--dry-run", "--json").stdout)
    assert plan["dry_run"] and plan["horizon"] == 3 and plan["versions_removed"] == [0, 1, 2]
    live = {f.path for f in table.plan()}
    assert set(plan["files_removed"]) == set(files_before) - live and plan["files_removed"]
    assert Table.open(table.path).history()[0]["version"] == 0  # a dry run removes nothing
    assert all(table.storage.exists(f) for f in files_before)

    done = json.loads(run("expire", table.path, "--retain", "0", "--json").stdout)
    assert done["horizon"] == 3 and done["files_removed"] == len(plan["files_removed"])
    assert [h["version"] for h in Table.open(table.path).history()] == [3]
    assert not any(table.storage.exists(f) for f in plan["files_removed"])
    assert [r["id"] for r in scan_json(table.path)] == [1, 2, 3]
    gone = run("scan", table.path, "--version", "1", ok=False)
    assert "retention horizon" in gone.stderr


def test_describe_json_and_changes_by_time(table: Table) -> None:
    doc = json.loads(run("describe", table.path, "--json").stdout)
    assert doc["version"] == 1 and doc["primary_key"] == ["id"]
    assert doc["properties"]["write.bucket.num"] == "2"
    assert sum(f["rows"] for f in doc["files"]) == 3 and {f["kind"] for f in doc["files"]} == {"delta"}
    start = table.history()[0]["timestamp_ms"]
    changes = [json.loads(x) for x in run("changes", table.path, "--start-timestamp", start, "--json").stdout.splitlines()]
    assert [(c["id"], c["_op"]) for c in changes] == [(1, "upsert"), (2, "upsert"), (3, "upsert")]
    usage = run("changes", table.path, "--start-version", "0", "--start-timestamp", start, ok=False)
    assert usage.exit_code == 2 and "not both" in usage.stderr


def test_changes_with_start_after_end_is_an_error_not_zero_rows(table: Table) -> None:
    table.upsert(pa.table({"id": [4], "name": ["d"], "amount": pa.array([dec(4)], DECIMAL)}))
    r = run("changes", table.path, "--start-version", 2, "--end-version", 1, ok=False)
    assert r.exit_code == 2 and "--end-version 1 is before --start-version 2" in r.stderr, r.output
    r = run("changes", table.path, "--start-timestamp", "2026-01-02", "--end-timestamp", "2026-01-01", ok=False)
    assert "--end-timestamp 2026-01-01 is before --start-timestamp 2026-01-02" in r.stderr, r.output
    with pytest.raises(ValueError, match="end version 1 is before start version 2"):
        table.changes(start_version=2, end_version=1)
    with pytest.raises(ValueError, match="start version 5 is after the latest version 2"):
        table.changes(start_version=5)
    assert table.changes(start_version=2, end_version=2).num_rows == 0   # (2, 2]: empty, and that is right


def test_time_errors_name_the_time_as_typed(table: Table) -> None:
    """A time before the table existed is named as the user wrote it and with its option, not as epoch ms."""
    for args, option in ((["scan", table.path, "--timestamp", "2020-01-01"], "--timestamp"),
                         (["restore", table.path, "--timestamp", "2020-01-01"], "--timestamp"),
                         (["sql", table.path, "SELECT count(*) FROM t", "--timestamp", "2020-01-01"], "--timestamp")):
        r = run(*args, ok=False)
        assert r.exit_code == 1
        assert r.stderr.startswith(f"tidelake: error: {option} 2020-01-01 is before the table was created"), r.stderr
        assert "1577836800000" not in r.stderr
