"""A log that cannot be written (a full disk) answers KAFKA_STORAGE_ERROR: one line in the broker's log, no
traceback; `tidelake produce` names the error; nothing of the refused records stays, and the broker keeps
serving.

Two real ways to run out of room, each on a `tidelake broker start` process: a file-size limit (RLIMIT_FSIZE, set
in the broker's process only, no root needed: writes past it fail with EFBIG) and, as root, a 4 MiB tmpfs that a
filler file fills (ENOSPC), freed again to show appends succeed once there is room."""
from __future__ import annotations

import contextlib
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]
LINES = "".join(f"{i:06d}-" + "x" * 993 + "\n" for i in range(200))  # 200 records, ~200 KB


def tidelake(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


@contextlib.contextmanager
def broker_process(data_dir: Path, log_file: Path, file_size_limit: int | None = None):
    port = free_port()

    def limit() -> None:  # in the broker's process only
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    with open(log_file, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir",
                                 str(data_dir), "--listen", f"127.0.0.1:{port}"], cwd=ROOT, stdout=log, stderr=log,
                                preexec_fn=limit if file_size_limit else None)
    try:
        wait_port(port, 60)
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


@contextlib.contextmanager
def small_tmpfs(mount_point: Path, size: str):
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], check=True, timeout=30)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True, timeout=30)


def produce_until_refused(bootstrap: str, topic: str) -> tuple[int, str]:
    """Produce LINES until a produce fails: (records delivered, the failure's error line). The failing command may
    still have delivered its first batches (the producer sends 200 lines in as many requests as its linger makes):
    its line says how many of them were not."""
    delivered = 0
    for _ in range(40):
        r = tidelake("produce", topic, "-b", bootstrap, stdin=LINES)
        if r.returncode != 0:
            refused = re.search(r"(\d+) of 200 records not delivered", r.stderr)
            assert refused, r.stderr
            return delivered + 200 - int(refused.group(1)), r.stderr
        delivered += 200
    raise AssertionError("the log was never refused")


def assert_refused_as_storage_error(error: str, log_file: Path, topic: str) -> None:
    lines = error.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tidelake: error: "), error
    assert f"not delivered to {topic}: KAFKA_STORAGE_ERROR" in lines[0], lines[0]
    log = log_file.read_text()
    assert f"append to {topic}-0 failed: KAFKA_STORAGE_ERROR: cannot write to {topic}-0" in log, log
    assert "Traceback" not in log, log


def consumed(bootstrap: str, topic: str) -> list[str]:
    r = tidelake("consume", topic, "-b", bootstrap, "--from-beginning", "--timeout-ms", "3000")
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_a_file_size_limit_is_a_storage_error(tmp_path):
    log_file = tmp_path / "broker.log"
    with broker_process(tmp_path / "data", log_file, file_size_limit=1_000_000) as bootstrap:
        assert tidelake("topics", "create", "full", "-b", bootstrap, "--partitions", "1").returncode == 0
        delivered, error = produce_until_refused(bootstrap, "full")
        assert_refused_as_storage_error(error, log_file, "full")
        assert "File too large" in log_file.read_text()
        # nothing of the refused request stays; the broker still serves other logs
        assert len(consumed(bootstrap, "full")) == delivered > 0
        assert tidelake("produce", "other", "-b", bootstrap, stdin="fine\n").returncode == 0
        assert consumed(bootstrap, "other") == ["fine"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (the file-size test covers the path)")
def test_a_full_disk_is_a_storage_error_until_there_is_room(tmp_path):
    log_file = tmp_path / "broker.log"
    with small_tmpfs(tmp_path / "disk", "4m") as disk, broker_process(disk / "data", log_file) as bootstrap:
        assert tidelake("topics", "create", "full", "-b", bootstrap, "--partitions", "1").returncode == 0
        filler = disk / "filler"
        with open(filler, "wb") as f:  # leave about 300 KB free
            free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            f.write(b"\0" * max(0, free - 300_000))
        delivered, error = produce_until_refused(bootstrap, "full")
        assert_refused_as_storage_error(error, log_file, "full")
        assert "No space left on device" in log_file.read_text()
        filler.unlink()  # room again: the same log takes appends, and holds exactly what was acknowledged
        assert tidelake("produce", "full", "-b", bootstrap, stdin=LINES).returncode == 0
        assert len(consumed(bootstrap, "full")) == delivered + 200
