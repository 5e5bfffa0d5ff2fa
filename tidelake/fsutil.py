"""File-system durability helpers shared by the broker, the table and the pipeline's offset stores."""
from __future__ import annotations

import os
from pathlib import Path


def fsync_file(path: str | Path) -> None:
    """fsync a file written through another handle (a library's writer), so its bytes survive a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | Path) -> None:
    """fsync a directory, so a file just created, renamed or linked into it survives a power loss."""
    fsync_file(path)  # a directory opened read-only fsyncs like a file
