"""The data directory is held by one process at a time; the lock dies with its holder."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from tidelake.log.dir_lock import DataDirLock, DataDirLocked

HOLD = ("import sys, time; from tidelake.log.dir_lock import DataDirLock; "
        "DataDirLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)")


def test_second_holder_is_refused_naming_the_pid(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        holder = rf"\(pid {proc.pid} on {socket.gethostname()}\)"
        with pytest.raises(DataDirLocked, match=rf"in use by another process {holder}"):
            DataDirLock(tmp_path).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    # The kernel released the flock with the process: a restart after kill -9 is not blocked.
    with DataDirLock(tmp_path) as lock:
        assert lock.held
        assert (tmp_path / ".lock").read_text().split() == [str(os.getpid()), socket.gethostname()]


def test_same_process_second_lock_is_refused_until_release(tmp_path):
    first = DataDirLock(tmp_path).acquire()
    with pytest.raises(DataDirLocked):
        DataDirLock(tmp_path).acquire()
    first.release()
    DataDirLock(tmp_path).acquire().release()
