"""The engines benchmark (benchmarks/table_engines.py, issue 38.3b) still runs end to end on its local engines
(tidelake, tidelake with changelog.producer=lookup, delta-rs; Spark's need the peer venv and are left out here):
every step answers, on every engine, the rows and checksum computed from the generated rows, and each step has
its wall seconds, CPU seconds and peak RSS."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "table_engines.py"


def test_local_engines_agree_with_the_generated_rows(tmp_path):
    out = tmp_path / "results.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    run = subprocess.run([sys.executable, str(SCRIPT), "--rows", "2000", "--repeats", "1", "--engines",
                          "tidelake,tidelake-lookup,delta-rs", "--json", str(out)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["equal"] is True, run.stdout
    assert set(got["results"]) == {"tidelake", "tidelake-lookup", "delta-rs"}
    # 20 upserted rows (10 updates, 10 new keys), 20 deleted keys
    assert got["expected"]["changes"]["rows"] == 20
    assert got["expected"]["changes_before"]["rows"] == 30
    assert got["expected"]["read_after"]["rows"] == 2000 + 10 - 20
    for engine, steps in got["results"].items():
        assert list(steps) == ["load", "read", "upsert", "changes", "changes_before", "delete", "point",
                               "read_after"], engine
        for step, r in steps.items():
            assert r["seconds"] > 0 and r["cpu_s"] >= 0 and r["peak_rss_mb"] > 0, (engine, step, r)
    assert "results equal (rows, checksum) across engines and to the generated rows: True" in run.stdout
