"""Progress bars for long CLI work, on stderr and only on a terminal: piped or redirected, a command
prints exactly what it printed before (nothing extra). The bar is transient: it is gone when the work
ends, leaving the command's own summary line."""
from __future__ import annotations

import os
import sys
import time


def stderr_is_terminal() -> bool:
    try:
        return os.isatty(sys.stderr.fileno()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, OSError, ValueError):  # a replaced stderr without a file descriptor
        return False


def stdout_is_terminal() -> bool:
    try:
        return os.isatty(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return False


class ProgressBar:
    """``with ProgressBar("produced", total=n, unit="bytes") as bar: bar.advance(k)``; ``total=None``: a
    running count. Disabled (every call a no-op) unless ``enabled`` (default: stderr is a terminal).
    ``advance`` is cheap enough per record: the bar is redrawn at most ten times a second."""

    REFRESH_S = 0.1

    def __init__(self, description: str, total: int | None = None, *, unit: str = "records",
                 enabled: bool | None = None):
        self.enabled = stderr_is_terminal() if enabled is None else enabled
        self.description, self.total, self.unit = description, total, unit
        self.completed = 0
        self._shown = 0
        self._next_refresh = 0.0
        self._progress = None
        self._task = None

    def __enter__(self) -> "ProgressBar":
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                       TextColumn, TimeElapsedColumn, TimeRemainingColumn)
            count = DownloadColumn() if self.unit == "bytes" else MofNCompleteColumn()
            columns = [TextColumn("{task.description}"), BarColumn(), count, TimeElapsedColumn(),
                       TimeRemainingColumn()] if self.total is not None else [
                SpinnerColumn(), TextColumn("{task.description}"), TextColumn(f"{{task.completed:,}} {self.unit}"),
                TimeElapsedColumn()]
            self._progress = Progress(*columns, console=Console(stderr=True, force_terminal=True),
                                      transient=True, refresh_per_second=10)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total)
        return self

    def advance(self, n: int = 1) -> None:
        self.completed += n
        if self._progress is not None:
            now = time.monotonic()
            if now >= self._next_refresh:
                self._next_refresh = now + self.REFRESH_S
                self._progress.update(self._task, completed=self.completed)

    def update(self, completed: int | None = None, total: int | None = None,
               description: str | None = None) -> None:
        if completed is not None:
            self.completed = completed
        if total is not None:
            self.total = total
        if self._progress is not None:
            self._progress.update(self._task, completed=self.completed, total=self.total,
                                  description=description or self.description)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=self.completed)
            self._progress.stop()
            self._progress = None
