"""LogMaintenance: the log layer's background thread.

It runs LogManager's maintenance pass (roll by segment.ms, flush by flush.ms and fsync of closed
segments, retention deletes, compaction) every interval, or sooner when triggered, so that none of it
runs on the broker's event loop. PartitionLog keeps the slow parts (fsync, compaction) outside its
lock, so appends and reads on the event loop go on while a pass runs.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class LogMaintenance:
    def __init__(self, run_pass: Callable[[], None], interval_s: float, *, name: str = "log-maintenance"):
        self._run_pass = run_pass
        self.interval_s = interval_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def trigger(self) -> None:
        """Run a pass now rather than at the next interval."""
        self._wake.set()

    def stop(self) -> None:
        """Ask the thread to stop after the current step (see ``join``)."""
        self._stopping.set()
        self._wake.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self._run_pass()
            except Exception:  # keep maintaining: the next pass may well succeed
                log.exception("%s pass failed", self._thread.name)
