"""kill -9 of ``pipeline serve`` mid-chain: every stage's sink, at the upstream version it recorded, equals the
full recompute of its query there (nothing lost, nothing applied twice), and a restart catches up."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from conftest import stop_process
from tidelake.table import Table, TableNotFound

ORDERS = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.int64())])
TIDELAKE = str(Path(sys.executable).with_name("tidelake"))


def _chain(root: Path) -> Path:
    chain = root / "chain"
    chain.mkdir()
    (chain / "big.yaml").write_text("source: {table: ../orders}\ntransform: SELECT id, region, amount FROM source "
                                    "WHERE amount > 20\nsink: {table: ../big}\ntrigger: {interval: 0s}\n")
    (chain / "revenue.yaml").write_text("source: {table: ../big}\ntransform: SELECT region, count(*) AS n, "
                                        "sum(amount) AS total, max(amount) AS hi FROM source GROUP BY region\n"
                                        "sink: {table: ../revenue}\ntrigger: {interval: 0s}\n")
    (chain / "top.yaml").write_text("source: {table: ../revenue}\ntransform: SELECT region, total FROM source "
                                    "ORDER BY total DESC, region LIMIT 2\nrefresh: full\n"
                                    "sink: {table: ../top, primary_key: [region]}\ntrigger: {interval: 0s}\n")
    return chain


def _serve(chain: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(log, "ab") as out:
        return subprocess.Popen([TIDELAKE, "pipeline", "serve", str(chain), "-q"], stdout=out,
                                stderr=subprocess.STDOUT, env=env)


def _table(path: Path) -> Table | None:
    try:
        return Table.open(str(path))
    except TableNotFound:
        return None


STAGES = (  # sink, upstream, app id, the query in DuckDB over the upstream snapshot as "up", key
    ("big", "orders", "SELECT id, region, amount FROM up WHERE amount > 20", "id"),
    ("revenue", "big", "SELECT region, count(*) AS n, sum(amount) AS total, max(amount) AS hi FROM up GROUP BY region",
     "region"),
    ("top", "revenue", "SELECT region, total FROM up ORDER BY total DESC, region LIMIT 2", "region"),
)


def _consistent(root: Path) -> list[str]:
    """Stages whose sink differs from the recompute at the upstream version it recorded."""
    wrong = []
    for sink_name, upstream_name, sql, key in STAGES:
        sink = _table(root / sink_name)
        state = sink.app_state(f"table-pipeline:{upstream_name}") if sink is not None else None
        if state is None:
            continue
        up = Table.open(str(root / upstream_name)).scan(version=state["extra"]["to_version"])  # noqa: F841
        want = duckdb.sql(sql).to_arrow_table()
        got = sink.scan(version=state["version"]).select(want.column_names)
        rows = sorted(got.to_pylist(), key=lambda r: r[key]), sorted(want.to_pylist(), key=lambda r: r[key])
        if rows[0] != [{k: (int(v) if isinstance(v, (int, float)) and k != key else v) for k, v in r.items()}
                       for r in rows[1]]:
            wrong.append(f"{sink_name} at upstream version {state['extra']['to_version']}")
    return wrong


@pytest.mark.slow_faults
def test_kill_9_anywhere_in_the_chain_loses_and_duplicates_nothing(tmp_path):
    rng = random.Random(11)
    orders = Table.create(str(tmp_path / "orders"), ORDERS, ["id"], {"write.bucket.num": "2"})
    chain, log = _chain(tmp_path), tmp_path / "serve.log"

    def commit():
        ids = sorted({rng.randrange(300) for _ in range(40)})
        orders.upsert(pa.table({"id": ids, "region": [rng.choice("abcde") for _ in ids],
                                "amount": [rng.randrange(100) for _ in ids]}, schema=ORDERS))
        if rng.random() < 0.3:
            orders.delete(pa.table({"id": [rng.randrange(300) for _ in range(5)]}))

    commit()
    for trial in range(2):
        proc = _serve(chain, log)
        try:
            before = (_table(tmp_path / "top").version if _table(tmp_path / "top") else -1)
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:   # writes keep coming while the stages work
                assert proc.poll() is None, f"serve exited ({proc.returncode}): {log.read_text()[-2000:]}"
                commit()
                top = _table(tmp_path / "top")
                if top is not None and top.version > before + trial:
                    break
                time.sleep(0.3)
            else:
                pytest.fail(f"trial {trial}: the last stage did not commit within 240 s: {log.read_text()[-2000:]}")
            time.sleep(rng.uniform(0.0, 2.0))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                stop_process(proc)
        assert _consistent(tmp_path) == [], f"trial {trial}"
    proc = _serve(chain, log)   # restarted after the last kill: catches up with every commit
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"serve exited ({proc.returncode}): {log.read_text()[-2000:]}"
            graph = subprocess.run([TIDELAKE, "pipeline", "graph", str(chain), "--json"], capture_output=True,
                                   text=True, timeout=60)
            if graph.returncode == 0 and all(s["lag"] == 0 for s in json.loads(graph.stdout)["stages"]):
                break
            time.sleep(1)
        else:
            pytest.fail(f"serve did not catch up: {log.read_text()[-2000:]}")
    finally:
        stop_process(proc)
    assert _consistent(tmp_path) == []
    assert Table.open(str(tmp_path / "big")).app_state("table-pipeline:orders")["extra"]["to_version"] == orders.version
