"""What one process's ``Table`` object counts as it works (no prometheus import: tables live in Spark
tasks too): commit retries (a lost race for the next version) and conflicts, and the runs and durations
of compaction, clustering and retention. ``TableCollector`` exposes them with the table's state."""
from __future__ import annotations

import threading

from tidelake.observability.histogram import SLOW_BUCKETS, FastHistogram


class TableStats:
    def __init__(self) -> None:
        self.commit_retries = 0  # counted under the committer's lock
        self.commit_conflicts = 0
        self.maintenance: dict[str, FastHistogram] = {}  # operation -> seconds per run that committed
        self._lock = threading.Lock()  # maintenance runs in a background thread and on demand

    def maintenance_run(self, operation: str, seconds: float) -> None:
        with self._lock:
            h = self.maintenance.get(operation)
            if h is None:
                h = self.maintenance[operation] = FastHistogram(SLOW_BUCKETS)
            h.observe(seconds)
