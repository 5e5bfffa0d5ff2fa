"""Single-offset checkpoint files of a partition directory (``log-start-offset``, ``recovery-point``):
the offset as decimal text, replaced rename-atomically."""
from __future__ import annotations

import os
from pathlib import Path

LOG_START_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"  # empty marker: written by a clean close, removed on open


def write_offset(path: Path, value: int, *, sync: bool = True) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def read_offset(path: Path) -> int | None:
    """The checkpointed offset; None if the file is missing or unreadable."""
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
