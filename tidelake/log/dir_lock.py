"""``DataDirLock``: one process per data directory, as Kafka's ``.lock`` file in every log dir.

Two brokers on one directory would both acknowledge writes into the same segment files and lose
records, so the second one must refuse to start. The lock is an ``flock`` on ``<dir>/.lock``: the
kernel drops it when the holder dies (kill -9 included), so a stale file never blocks a restart.
The holder's pid is written into the file only to name it in the error.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class DataDirLocked(OSError):
    """Another live process (or another broker in this one) holds the data directory."""


class DataDirLock:
    def __init__(self, data_dir: str | Path):
        self.path = Path(data_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> "DataDirLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise DataDirLocked(
                f"data directory {self.path.parent} is in use by another process (pid {holder}); "
                f"stop it first, or use another --data-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
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

    def __enter__(self) -> "DataDirLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
