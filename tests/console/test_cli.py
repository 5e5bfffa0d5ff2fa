"""``tidelake console`` start-up failures: one line on stderr naming what is wrong, no traceback (a broker that
does not answer: tests/cli/test_errors.py, with every broker command)."""
from __future__ import annotations

import socket
import subprocess
import sys

from console_fixtures import ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", "console", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_malformed_listen_address_is_a_usage_error(broker) -> None:
    done = run("-b", broker.bootstrap_servers, "--listen", "localhost")
    assert done.returncode == 2
    assert "--listen" in done.stderr and "HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_busy_port_is_one_line(broker) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = run("-b", broker.bootstrap_servers, "--listen", f"127.0.0.1:{port}")
    assert done.returncode == 1
    assert one_line(done.stderr) == (f"tidelake: error: --listen 127.0.0.1:{port}: Address already in use "
                                     f"(tidelake console)")


def test_a_metrics_url_must_be_http(broker) -> None:
    done = run("-b", broker.bootstrap_servers, "--metrics-url", "localhost:9100/metrics")
    assert done.returncode == 2
    assert "--metrics-url" in done.stderr
