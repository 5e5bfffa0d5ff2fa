"""Progress bars of long commands: on a terminal (stderr on a pseudo-terminal) `produce` from a file,
`consume --max-messages`, `table compact` and `pipeline run --once` draw one; piped, their output is
exactly the lines they always printed, nothing more. Real commands in their own processes, a real broker."""
from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from clients import Rec, create_topics, produce_confluent, running_broker
from tidelake.table import Table

RECORDS = 20_000
ENV = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
ENV.pop("FORCE_COLOR", None)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with running_broker("tidelake", tmp_path_factory.mktemp("cli-progress")) as bs:
        create_topics(bs, ["big"], 2)
        yield bs


def tl_piped(*args: str, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args], stdin=stdin, capture_output=True,
                          timeout=300, env=ENV)


def tl_on_terminal(*args: str, stdin=None, stdout_file: Path, timeout: float = 300) -> tuple[int, bytes]:
    """Run with stderr on a pseudo-terminal (stdout to a file): (exit code, what the terminal showed)."""
    master, slave = pty.openpty()
    with open(stdout_file, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", *args], stdin=stdin, stdout=out,
                                stderr=slave, env=ENV)
    os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal (it exited)
                break
            if not data:
                break
            shown += data
        return proc.wait(max(1.0, deadline - time.monotonic())), bytes(shown)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        os.close(master)


def test_produce_from_a_file_and_consume(bootstrap, tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"".join(b"record %d\n" % i for i in range(RECORDS)))
    with open(lines, "rb") as f:
        piped = tl_piped("produce", "big", "-b", bootstrap, stdin=f)
    assert piped.returncode == 0 and piped.stdout == b""
    assert piped.stderr == f"Produced {RECORDS} records to big.\n".encode()

    with open(lines, "rb") as f:
        # (another topic: "big" keeps exactly one copy, so both consumers below read the same records)
        code, shown = tl_on_terminal("produce", "big2", "-b", bootstrap, stdin=f, stdout_file=tmp_path / "p.out")
    assert code == 0
    assert b"producing to big2" in shown  # the bar
    assert f"Produced {RECORDS} records to big2.".encode() in shown  # the summary line stays

    piped = tl_piped("consume", "big", "-b", bootstrap, "--from-beginning", "--max-messages", str(RECORDS))
    assert piped.returncode == 0 and len(piped.stdout.splitlines()) == RECORDS
    assert piped.stderr == f"Processed a total of {RECORDS} messages\n".encode()

    out = tmp_path / "c.out"
    code, shown = tl_on_terminal("consume", "big", "-b", bootstrap, "--from-beginning", "--max-messages",
                                 str(RECORDS), stdout_file=out)
    assert code == 0
    assert b"consuming big" in shown and f"Processed a total of {RECORDS} messages".encode() in shown
    # the records themselves are untouched: RECORDS produced lines (the topic holds both produce runs, and the
    # two partitions interleave differently from run to run), no terminal control codes among them
    written = set(lines.read_bytes().splitlines())
    for output in (out.read_bytes(), piped.stdout):
        assert b"\x1b" not in output
        got = output.splitlines()
        assert len(got) == RECORDS and set(got) <= written


def test_table_compact(tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, pa.schema([("id", pa.int64()), ("v", pa.int64())]), ["id"],
                     {"write.bucket.num": "4", "clustering.auto": "false"})
    for i in range(3):
        t.upsert(pa.table({"id": list(range(100)), "v": [i] * 100}))
    t.close()
    piped = tl_piped("table", "compact", path)
    assert piped.returncode == 0 and piped.stdout == b"compact: committed version 4\n" and piped.stderr == b""
    t = Table.open(path)
    t.upsert(pa.table({"id": [1], "v": [9]}))
    t.close()
    code, shown = tl_on_terminal("table", "compact", path, stdout_file=tmp_path / "out")
    assert code == 0 and b"compacting buckets" in shown
    assert (tmp_path / "out").read_bytes() == b"compact: committed version 6\n"


@pytest.mark.spark
def test_pipeline_run_once(bootstrap, tmp_path):
    create_topics(bootstrap, ["events"], 2)
    produce_confluent(bootstrap, "events", [Rec(i % 2, None, b'{"id": %d}' % i, 1_700_000_000_000 + i)
                                            for i in range(3000)])

    def config(name: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"source: {{bootstrap_servers: '{bootstrap}', topic: events, group_id: {name}}}\n"
                        f"sink: {{table: ./{name}, format: json, primary_key: [id], schema: 'id long'}}\n"
                        "spark: {master: 'local[1]'}\n")
        return path
    env_spark = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    ENV.update(env_spark)
    piped = tl_piped("pipeline", "run", str(config("piped")), "--once", "-q")
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert piped.stdout.decode().startswith("exactly-once: ") and b"-> table" not in piped.stderr
    code, shown = tl_on_terminal("pipeline", "run", str(config("tty")), "--once", "-q",
                                 stdout_file=tmp_path / "out")
    assert code == 0, shown[-2000:]
    assert b"events -> table" in shown
    assert (tmp_path / "out").read_bytes().startswith(b"exactly-once: ")
