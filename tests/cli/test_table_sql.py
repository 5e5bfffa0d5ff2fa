"""``tidelake table sql`` (DuckDB over a version and an increment) and ``tidelake table publish``."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from tidelake.cli.main import cli
from tidelake.lakeview import source_versions
from tidelake.table import Table


def run(*args, ok: bool = True):
    r = CliRunner().invoke(cli, ["table", *map(str, args)])
    assert (r.exit_code == 0) == ok, r.output
    return r


def json_rows(*args) -> list[dict]:
    return [json.loads(x) for x in run("sql", *args, "--json").stdout.splitlines()]


@pytest.fixture
def table(tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("region", pa.string()),
                                                     ("amount", pa.int64())]), ["id"], {"write.bucket.num": "2"})
    t.upsert(pa.table({"id": [1, 2, 3, 4], "region": ["eu", "eu", "us", "us"], "amount": [10, 20, 30, 40]}))  # v1
    t.upsert(pa.table({"id": [2, 5], "region": ["eu", "us"], "amount": [25, 50]}))                           # v2
    t.delete([3])                                                                                              # v3
    return t


def test_sql_over_the_latest_version_and_time_travel(table: Table) -> None:
    q = "SELECT region, sum(amount)::BIGINT AS total, count(*) AS n FROM t GROUP BY region ORDER BY region"
    assert json_rows(table.path, q) == [{"region": "eu", "total": 35, "n": 2}, {"region": "us", "total": 90, "n": 2}]
    assert json_rows(table.path, q, "--version", 1) == [{"region": "eu", "total": 30, "n": 2},
                                                        {"region": "us", "total": 70, "n": 2}]
    ts = table.latest_timestamp(2)   # version 2's commit time
    assert json_rows(table.path, "SELECT count(*) AS n FROM t", "--timestamp", ts) == [{"n": 5}]


def test_changes_is_the_increment_between_two_versions(table: Table) -> None:
    rows = json_rows(table.path, "SELECT id, _op, _commit_version FROM changes ORDER BY _commit_version, id",
                     "--start-version", 1, "--end-version", 3)
    assert rows == [{"id": 2, "_op": "upsert", "_commit_version": 2}, {"id": 5, "_op": "upsert", "_commit_version": 2},
                    {"id": 3, "_op": "delete", "_commit_version": 3}]
    # both relations in one query: which current rows changed since version 1
    joined = json_rows(table.path, "SELECT t.id, t.amount FROM t JOIN changes c ON t.id = c.id ORDER BY t.id",
                       "--start-version", 1)
    assert joined == [{"id": 2, "amount": 25}, {"id": 5, "amount": 50}]


def test_sql_errors_are_one_line(table: Table) -> None:
    r = run("sql", table.path, "SELECT nope FROM t", ok=False)
    assert r.output.startswith("tidelake: error: sql: Binder Error") and r.output.count("\n") == 1
    r = run("sql", table.path, "SELECT * FROM changes", ok=False)
    assert "the relation changes needs --start-version or --start-timestamp" in r.output
    r = run("sql", table.path, "SELECT * FROM t", "--version", 99, ok=False)
    assert "99" in r.output and r.output.count("\n") == 1


def test_plain_output_is_a_table(table: Table) -> None:
    out = run("sql", table.path, "SELECT id, amount FROM t WHERE id = 5").stdout
    assert out.splitlines() == ["result (1 rows)", "id  amount", "5   50"]


def test_publish_command(table: Table) -> None:
    out = run("publish", table.path, "--format", "delta", "--format", "iceberg").stdout
    assert "published delta, iceberg: view of version 3" in out
    assert DeltaTable(table.path).to_pyarrow_table().sort_by("id").to_pylist() == table.scan().sort_by("id").to_pylist()
    assert source_versions(table) == {"delta": 3, "iceberg": 3}
    assert "nothing new" in run("publish", table.path, "--format", "delta").stdout
    r = run("publish", table.path, ok=False)
    assert "view.formats is not set" in r.output and r.output.count("\n") == 1
    run("set-properties", table.path, "view.formats=iceberg")
    table.upsert(pa.table({"id": [9], "region": ["eu"], "amount": [1]}))
    assert "published iceberg: view of version 5" in run("publish", table.path).stdout
