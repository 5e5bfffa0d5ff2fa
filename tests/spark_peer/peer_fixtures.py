"""The peer Spark process of a test module (Spark's own engines, in the peer venv: jvm/spark-peer/) and a
tidelake broker process that a test can restart on the same port and data dir.

``make test`` builds the peer venv (``make peer-venv``); a module is skipped, with the command that builds
it, only where that was not run.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, free_port, stop_process, wait_port

sys.path.insert(0, str(ROOT / "jvm" / "spark-peer"))
from peer_client import PeerSpark, missing  # noqa: E402


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    """One peer SparkSession for the module (its log in the module's temporary folder)."""
    why = missing()
    if why:
        # make test builds it (make peer-venv): a missing one is a broken set-up, never a skip counted as a pass
        pytest.fail(f"no Spark peer environment: {why} (run: make peer-venv)", pytrace=False)
    log = tmp_path_factory.mktemp("peer") / "peer-spark.log"
    with PeerSpark(log_path=log) as p:
        yield p


class BrokerProcess:
    """A ``tidelake broker start`` process on a fixed port and data dir, restartable on both."""

    def __init__(self, data_dir: Path):
        self.data_dir, self.port = data_dir, free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir", str(self.data_dir),
               "--listen", self.bootstrap, "--log-level", "WARNING"]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_port(self.port, timeout=60)
        except TimeoutError:
            self.proc.kill()
            raise AssertionError(self.proc.communicate(timeout=10)[1].decode()[-3000:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc)
        self.proc = None
