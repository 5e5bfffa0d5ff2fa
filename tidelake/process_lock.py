"""``ProcessLock``: one live process holding a path, as Kafka's ``.lock`` file in every log dir.

The lock is an ``flock`` on the file: the kernel drops it when the holder dies (kill -9 included), so a stale
file never blocks a restart, and nothing has to be cleaned up. The holder writes its pid and host into the file
only so that the refusal can name it. Used by the broker's data directory (log/dir_lock.py) and by a running
pipeline (spark/pipeline_lock.py).
"""
from __future__ import annotations

import fcntl
import os
import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Holder:
    pid: str
    host: str

    def __str__(self) -> str:
        return f"pid {self.pid}" + (f" on {self.host}" if self.host else "")


class ProcessLocked(OSError):
    """Another live process (or another holder in this one) has the lock."""

    def __init__(self, path: Path, holder: Holder):
        super().__init__(f"{path} is held by {holder}")
        self.path, self.holder = path, holder


class ProcessLock:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self) -> "ProcessLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # (not inherited: a child must not keep it)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, _, host = os.pread(fd, 300, 0).decode("utf-8", "replace").strip().partition(" ")
            os.close(fd)
            raise ProcessLocked(self.path, Holder(pid or "unknown", host)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            # Unlock before close so a waiting starter sees it free at once; the file stays (as Kafka's).
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "ProcessLock":
        return self if self.held else self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
