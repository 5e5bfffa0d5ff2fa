"""``DataDirLock``: one process per data directory, as Kafka's ``.lock`` file in every log dir.

Two brokers on one directory would both acknowledge writes into the same segment files and lose
records, so the second one must refuse to start. The lock is a ``ProcessLock`` (an ``flock``, dropped by the
kernel when the holder dies) on ``<dir>/.lock``.
"""
from __future__ import annotations

from pathlib import Path

from tidelake.process_lock import ProcessLock, ProcessLocked

LOCK_FILE = ".lock"


class DataDirLocked(OSError):
    """Another live process (or another broker in this one) holds the data directory."""


class DataDirLock(ProcessLock):
    def __init__(self, data_dir: str | Path):
        super().__init__(Path(data_dir) / LOCK_FILE)

    def acquire(self) -> "DataDirLock":
        try:
            super().acquire()
        except ProcessLocked as e:
            raise DataDirLocked(
                f"data directory {self.path.parent} is in use by another process ({e.holder}); "
                f"stop it first, or use another --data-dir") from None
        return self
