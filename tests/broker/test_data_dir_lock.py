"""A data directory serves one broker: a second one on it fails at once, naming the holder (Kafka's .lock)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tidelake.broker import EmbeddedBroker
from tidelake.log.dir_lock import DataDirLocked


def test_second_embedded_broker_on_the_same_dir_is_refused(tmp_path):
    with EmbeddedBroker(tmp_path, port=0):
        with pytest.raises(DataDirLocked, match=rf"pid {os.getpid()}"):
            EmbeddedBroker(tmp_path, port=0).start()
    # stopped: the directory is free again
    with EmbeddedBroker(tmp_path, port=0) as again:
        assert again.port > 0


def test_cli_broker_start_on_a_held_dir_is_one_line(tmp_path):
    with EmbeddedBroker(tmp_path, port=0):
        r = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir", str(tmp_path),
                            "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"is in use by another process (pid {os.getpid()} on {socket.gethostname()})" in lines[0]
