"""The README's own command sequences, run as written (through bash, ``tidelake`` being this checkout's CLI)
against a real broker: a command the README shows must work on the data the README's earlier commands made."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from clients import running_broker

ROOT = Path(__file__).resolve().parent.parent.parent


def readme_block(containing: str) -> list[str]:
    """The lines of the README's code block that holds ``containing``."""
    blocks = re.findall(r"^```\w*\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    (block,) = [b for b in blocks if containing in b]
    return block.splitlines()


def readme_lines(*starts: str) -> list[str]:
    """The lines of the README's "Using it" commands beginning with each of ``starts``, in that order (each must
    be there once)."""
    text = readme_block("# the broker (Kafka's tools' spirit")
    found = []
    for start in starts:
        hits = [line for line in text if line.startswith(start)]
        assert len(hits) == 1, f"README.md's commands have {len(hits)} lines starting {start!r}"
        found.append(hits[0])
    return found


def run_in_bash(lines: list[str], bootstrap: str) -> subprocess.CompletedProcess:
    script = "\n".join([f'tidelake() {{ "{sys.executable}" -m tidelake.cli.main "$@"; }}', "set -e -o pipefail",
                        *lines])
    env = dict(os.environ, TIDELAKE_BOOTSTRAP_SERVER=bootstrap, PYTHONPATH=str(ROOT))
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=180)


def test_records_delete_works_on_the_readmes_own_data(tmp_path):
    """issue 35: `records delete --topic orders --partition 0 --offset 100` failed on the README's two records."""
    lines = readme_lines("tidelake topics create orders", "printf 'k1:hello", "tidelake records delete")
    with running_broker("tidelake", tmp_path) as bootstrap:
        done = run_in_bash(lines, bootstrap)
        assert done.returncode == 0, done.stderr
        delete = readme_lines("tidelake records delete")[0]
        partition = int(re.search(r"--partition (\d+)", delete).group(1))
        offset = int(re.search(r"--offset (\d+)", delete).group(1))
        rows = [line.split() for line in done.stdout.splitlines() if line.startswith("orders")]
        assert rows == [["orders", str(partition), str(offset)]], done.stdout   # TOPIC PARTITION LOW-WATERMARK
