"""The error boundary, table-driven over every `tidelake` subcommand (discovered from the click group, so a
new command is covered or this test fails): bad arguments, a missing table, a down broker and a malformed
config each give exactly one line on stderr, `tidelake: error: ...`, a non-zero exit and no traceback.

Down-broker and config cases run as real processes (librdkafka writes its log lines to file descriptor 2,
which only a process boundary captures), concurrently to keep the module short; a hang fails at the
subprocess timeout.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tidelake.cli.main import cli

DOWN_TIMEOUT_S = "1"


def leaf_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], click.Command]:
    out = {}
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out.update(leaf_commands(cmd, prefix + (name,)))
        if not isinstance(cmd, click.Group) or cmd.invoke_without_command:   # (a group that runs: `console`)
            out[prefix + (name,)] = cmd
    return out


COMMANDS = leaf_commands()


def takes(cmd: click.Command, name: str) -> bool:
    return any(p.name == name for p in cmd.params)


# Arguments that get each broker command past its own argument checks to the broker.
BROKER_ARGS: dict[tuple[str, ...], list[str]] = {
    ("topics", "create"): ["t"], ("topics", "list"): [], ("topics", "describe"): ["t"],
    ("topics", "alter"): ["t", "--partitions", "2"], ("topics", "delete"): ["t"],
    ("produce",): ["t"], ("consume",): ["t"],
    ("groups", "list"): [], ("groups", "describe"): ["g"],
    ("groups", "reset-offsets"): ["g", "--topic", "t", "--to-earliest"],
    ("groups", "delete-offsets"): ["g", "--topic", "t"], ("groups", "delete"): ["g"],
    ("share-groups", "list"): [], ("share-groups", "describe"): ["g"],
    ("share-groups", "reset-offsets"): ["g", "--topic", "t", "--to-earliest"],
    ("share-groups", "delete-offsets"): ["g", "--topic", "t"], ("share-groups", "delete"): ["g"],
    ("configs", "describe"): ["--entity-type", "brokers"],
    ("configs", "alter"): ["--entity-type", "topics", "--entity-name", "t", "--add-config", "retention.ms=1"],
    ("records", "delete"): ["--topic", "t", "--offset", "1"],
    ("transactions", "list"): [], ("transactions", "describe"): ["x"],
    ("transactions", "abort"): ["--transactional-id", "x"],
    ("acls", "add"): ["--allow-principal", "User:a", "--operation", "READ", "--topic", "t"],
    ("acls", "list"): [], ("acls", "remove"): ["--topic", "t"],
    ("users", "add"): ["u", "--password", "p"], ("users", "list"): [], ("users", "remove"): ["u"],
    ("console",): ["--listen", "127.0.0.1:0"],
    ("partitions", "reassign"): ["--reassignment-json-file", str(Path(__file__).parent / "reassign.json"), "--verify"],
    ("partitions", "elect-leaders"): ["--election-type", "preferred", "--all-topic-partitions"],
}
# Pipeline commands reach the broker named in their config.
PIPELINE_ARGS: dict[tuple[str, ...], list[str]] = {
    ("pipeline", "run"): ["--once"], ("pipeline", "status"): [], ("pipeline", "reset"): ["--to-earliest"],
}
# Arguments after the table path.
TABLE_ARGS: dict[tuple[str, ...], list[str]] = {
    ("table", "describe"): [], ("table", "history"): [], ("table", "scan"): [], ("table", "changes"): [],
    ("table", "compact"): [], ("table", "cluster"): [], ("table", "restore"): ["1"], ("table", "expire"): [],
    ("table", "purge"): ["--yes"], ("table", "set-properties"): ["a=b"], ("table", "add-column"): ["c", "long"],
    ("table", "update"): ["--set", "amount=1", "--where", "id=1"], ("table", "delete"): ["--where", "id=1"],
    ("table", "upsert"): ["ROWS"], ("table", "check"): [], ("table", "sql"): ["SELECT count(*) FROM t"],
    ("table", "publish"): ["--format", "delta"],
}
# Commands over a directory of pipelines: a malformed file in it is their failure (and a down broker, for serve).
PIPELINE_DIR_COMMANDS = (("pipeline", "graph"), ("pipeline", "validate"), ("pipeline", "serve"))
NO_STATE = {("pipeline", "example")}  # prints a constant: only bad arguments can fail it
# Commands that read a metrics listener's health (--url): a listener that does not answer.
HEALTH_COMMANDS = {("broker", "status"), ("pipeline", "health")}


def test_every_command_is_covered() -> None:
    broker = {path for path, cmd in COMMANDS.items() if takes(cmd, "bootstrap")}
    assert broker == set(BROKER_ARGS)
    assert {p for p in COMMANDS if p[0] == "pipeline"} == set(PIPELINE_ARGS) | set(PIPELINE_DIR_COMMANDS) | {
        ("pipeline", "example"), ("pipeline", "health")}
    assert {p for p in COMMANDS if p[0] == "table" and p != ("table", "create")} == set(TABLE_ARGS)
    # cluster start/status/restart-broker: their failures are tested in tests/cluster/test_cli.py; schema-registry
    # start: in tests/schema_registry/test_cli.py; console users add/list/remove (a file, no broker): in
    # tests/console/test_cli.py
    covered = set(BROKER_ARGS) | set(PIPELINE_ARGS) | set(PIPELINE_DIR_COMMANDS) | set(TABLE_ARGS) | NO_STATE | \
        HEALTH_COMMANDS | {
        ("table", "create"), ("broker", "start"), ("cluster", "start"), ("cluster", "status"),
        ("cluster", "restart-broker"), ("schema-registry", "start"),
        ("console", "users", "add"), ("console", "users", "list"), ("console", "users", "remove")}
    assert covered == set(COMMANDS)


def assert_one_error_line(stderr: str, stdout: str = "") -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tidelake: error: ") and len(lines[0]) > len("tidelake: error: ") + 5, stderr
    assert "Traceback" not in stderr + stdout
    return lines[0]


def invoke(args: list[str], input: str | None = None):
    return CliRunner().invoke(cli, args, input=input)


# ------------------------------------------------------------------------------ bad arguments (in process)

@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_bad_arguments(path: tuple[str, ...]) -> None:
    result = invoke([*path, "--no-such-option"])
    assert result.exit_code == 2
    line = assert_one_error_line(result.stderr, result.stdout)
    assert "--no-such-option" in line and " ".join(path) in line


@pytest.mark.parametrize("args, message", [
    (["--log-level", "LOUD"], "No such option"),
    (["broker", "start", "--log-level", "LOUD"], "LOUD"),
    (["table", "scan", "T", "--version", "1", "--timestamp", "2026-01-01"], "not both"),
    (["table", "scan", "T", "--timestamp", "yesterday"], "ISO-8601"),
    (["table", "restore", "T", "--timestamp", "yesterday"], "ISO-8601"),
    (["table", "scan", "T", "--where", "amount=abc"], "decimal128(10, 2)"),
    (["table", "scan", "T", "--columns", "nope"], "no column nope"),
    (["table", "update", "T", "--set", "id=5", "--where", "id=1"], "primary key"),
    (["table", "delete", "T"], "--where is required"),
    (["groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"], "ISO-8601"),
    (["groups", "reset-offsets", "g", "--topic", "t", "--by-duration", "1 hour"], "ISO-8601 duration"),
    (["groups", "reset-offsets", "g", "--topic", "t"], "exactly one of"),
    (["groups", "reset-offsets", "g", "--to-earliest"], "--all-topics"),
    (["consume", "t", "--property", "print.everything=true"], "unknown formatter properties"),
    (["produce", "t", "--property", "parse.everything=true"], "unknown line reader properties"),
    (["topics", "create", "t", "--config", "retention.ms"], "KEY=VALUE"),
    (["configs", "alter", "--entity-type", "topics", "--entity-name", "t"], "nothing to alter"),
    (["records", "delete", "--topic", "t"], "--offset"),
])
def test_bad_values_are_usage_errors(args: list[str], message: str, table_path: Path) -> None:
    result = invoke([str(table_path) if a == "T" else a for a in args])
    assert result.exit_code == 2, result.output
    assert message in assert_one_error_line(result.stderr, result.stdout)


@pytest.fixture(scope="module")
def table_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("errors") / "t"
    result = invoke(["table", "create", str(path), "--schema", "id long, amount decimal(10,2)", "-k", "id"])
    assert result.exit_code == 0, result.output
    return path


def test_scan_of_columns_without_the_key(table_path: Path, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 2, "amount": 2.5}\n{"id": 1, "amount": 1.25}\n')
    assert invoke(["table", "upsert", str(table_path), str(rows)]).exit_code == 0
    result = invoke(["table", "scan", str(table_path), "--columns", "amount", "--json"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ['{"amount": "1.25"}', '{"amount": "2.50"}']  # in key order


# ------------------------------------------------------------------------------ a missing table (in process)

@pytest.mark.parametrize("path", sorted(TABLE_ARGS), ids=" ".join)
def test_missing_table(path: tuple[str, ...], tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1, "amount": 1}\n')
    extra = [str(rows) if a == "ROWS" else a for a in TABLE_ARGS[path]]
    result = invoke([*path, str(tmp_path / "no-table"), *extra])
    assert result.exit_code == 1, result.output
    line = assert_one_error_line(result.stderr, result.stdout)
    assert "no tidelake table" in line and str(tmp_path / "no-table") in line and " ".join(path) in line


def test_create_over_an_existing_table(table_path: Path) -> None:
    result = invoke(["table", "create", str(table_path), "--schema", "id long", "-k", "id"])
    assert result.exit_code == 1
    assert "already exists" in assert_one_error_line(result.stderr, result.stdout)


def test_no_op_changes_are_errors(table_path: Path) -> None:
    for args, message in ((["delete", "--where", "id=999"], "no row"),
                          (["update", "--set", "amount=1", "--where", "id=999"], "no row"),
                          (["set-properties", "acid.data.retain.hours=24"], "nothing to change"),
                          (["restore", "0", "--timestamp", "2026-01-01"], "one of them")):
        result = invoke(["table", args[0], str(table_path), *args[1:]])
        assert result.exit_code != 0, result.output
        assert message in assert_one_error_line(result.stderr, result.stdout)


# ------------------------------------------------------------------------------ processes: broker down, configs

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_process(args: list[str], input: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                       os.environ.get("PYTHONPATH", "")]))
    env.pop("TIDELAKE_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args], input=input, capture_output=True,
                          text=True, timeout=120, env=env)


def pipeline_yaml(directory: Path, bootstrap: str) -> Path:
    path = directory / f"pipeline-{bootstrap.rsplit(':', 1)[1]}.yaml"
    path.write_text(f"source: {{bootstrap_servers: '{bootstrap}', topic: t, group_id: g}}\n"
                    "sink: {table: ./t, format: json, primary_key: [id], schema: 'id long'}\n")
    return path


@pytest.fixture(scope="module")
def process_results(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every process case, run four at a time: name -> finished process."""
    d = tmp_path_factory.mktemp("processes")
    down = f"127.0.0.1:{free_port()}"
    cases: dict[str, tuple[list[str], str]] = {}
    for path, args in BROKER_ARGS.items():
        cases["down broker: " + " ".join(path)] = (
            [*path, *args, "--bootstrap-server", down, "--timeout", DOWN_TIMEOUT_S], "x\n")
    config = pipeline_yaml(d, down)
    for path, args in PIPELINE_ARGS.items():
        cases["down broker: " + " ".join(path)] = ([*path, str(config), *args, "--timeout", DOWN_TIMEOUT_S], "")

    bad_yaml = d / "bad.yaml"
    bad_yaml.write_text("source: [unclosed\n")
    wrong_yaml = d / "wrong.yaml"
    wrong_yaml.write_text("source: {topic: t}\nsink: {table: ./t, format: json, primary_key: [id]}\n")
    for path, args in PIPELINE_ARGS.items():
        cases["malformed YAML: " + " ".join(path)] = ([*path, str(bad_yaml), *args], "")
        cases["invalid config: " + " ".join(path)] = ([*path, str(wrong_yaml), *args], "")
    bad_dir, down_dir = d / "bad-dir", d / "down-dir"
    bad_dir.mkdir()
    down_dir.mkdir()
    (bad_dir / "bad.yaml").write_text(bad_yaml.read_text())
    pipeline_yaml(down_dir, down)
    for path in PIPELINE_DIR_COMMANDS:
        cases["malformed YAML: " + " ".join(path)] = ([*path, str(bad_dir)], "")
    cases["down broker, no --timeout: pipeline serve"] = (["pipeline", "serve", str(down_dir)], "")
    bad_properties = d / "server.properties"
    bad_properties.write_text("num.partitions=many\n")
    cases["malformed config: broker start"] = (
        ["broker", "start", "--data-dir", str(d / "data"), "--listen", "127.0.0.1:0", "--config",
         str(bad_properties)], "")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    cases["port in use: broker start"] = (
        ["broker", "start", "--data-dir", str(d / "data2"), "--listen", f"127.0.0.1:{busy.getsockname()[1]}"], "")
    bad_json = d / "offsets.json"
    bad_json.write_text('{"partitions": [{"topic": "t"')
    cases["malformed config: records delete"] = (
        ["records", "delete", "--offset-json-file", str(bad_json), "--bootstrap-server", down, "--timeout",
         DOWN_TIMEOUT_S], "")
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = {name: pool.submit(run_process, args, stdin) for name, (args, stdin) in cases.items()}
            return {name: f.result() for name, f in futures.items()}
    finally:
        busy.close()


DOWN_CASES = sorted("down broker: " + " ".join(p) for p in [*BROKER_ARGS, *PIPELINE_ARGS])
CONFIG_CASES = sorted([*("malformed YAML: " + " ".join(p) for p in [*PIPELINE_ARGS, *PIPELINE_DIR_COMMANDS]),
                       *("invalid config: " + " ".join(p) for p in PIPELINE_ARGS),
                       "malformed config: broker start", "port in use: broker start",
                       "malformed config: records delete"])


@pytest.mark.parametrize("case", DOWN_CASES)
def test_down_broker(case: str, process_results) -> None:
    proc = process_results[case]
    assert proc.returncode == 1, proc.stderr
    line = assert_one_error_line(proc.stderr, proc.stdout)  # no librdkafka FAIL lines either
    assert "no Kafka broker answered" in line and f"within {DOWN_TIMEOUT_S}s" in line


def test_serve_with_a_down_broker_fails_fast(process_results) -> None:
    proc = process_results["down broker, no --timeout: pipeline serve"]
    assert proc.returncode == 1, proc.stderr
    assert "no Kafka broker answered" in assert_one_error_line(proc.stderr, proc.stdout)


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_malformed_config(case: str, process_results) -> None:
    proc = process_results[case]
    assert proc.returncode == 1, proc.stderr
    line = assert_one_error_line(proc.stderr, proc.stdout)
    expected = {"malformed YAML": "malformed YAML", "invalid config": "source.bootstrap_servers is required",
                "malformed config: broker start": "num.partitions='many'", "port in use": "address already in use",
                "malformed config: records delete": "malformed JSON"}
    assert next(v for k, v in expected.items() if case.startswith(k)) in line


def test_debug_prints_the_trace(tmp_path: Path) -> None:
    plain = run_process(["table", "describe", str(tmp_path / "none")])
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    debug = run_process(["--debug", "table", "describe", str(tmp_path / "none")])
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr and "TableNotFound" in debug.stderr
    assert debug.stderr.splitlines()[-1] == plain.stderr.strip()


def test_a_reader_that_goes_away_is_not_an_error(tmp_path: Path) -> None:
    """`tidelake table scan ... | head -1`: the closed pipe ends the command without an error line."""
    import pyarrow as pa

    from tidelake.table import Table
    table = Table.create(str(tmp_path / "big"), pa.schema([("id", pa.int64()), ("s", pa.string())]), ["id"])
    table.upsert(pa.table({"id": list(range(50_000)), "s": ["x" * 30] * 50_000}))  # far more than a pipe holds
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "table", "scan", table.path, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = proc.stdout.readline()
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=120)
    assert first.startswith(b'{"id": 0') and stderr == b""


@pytest.mark.parametrize("path", sorted(HEALTH_COMMANDS), ids=" ".join)
def test_health_of_a_listener_that_does_not_answer(path: tuple[str, ...]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        result = invoke([*path, "--url", url])
    assert result.exit_code == 1
    assert assert_one_error_line(result.stderr, result.stdout).startswith(f"tidelake: error: cannot reach {url}/")
