"""What the pipeline's driver loop counts, batch by batch (plain numbers; only the driver writes them):
batches, records, upserts/deletes, records left out and dead-lettered, batch and commit durations,
end-to-end freshness (a record's produce timestamp to the table commit that holds it), the lag per
partition after each pass, and when the loop last made progress (for /health/ready)."""
from __future__ import annotations

import time

from tidelake.observability.histogram import SLOW_BUCKETS, FastHistogram


class PipelineStats:
    def __init__(self, batch_interval: float, ready_intervals: int = 3):
        self.batch_interval = batch_interval
        self.ready_intervals = ready_intervals
        self.batches = self.records = self.upserts = self.deletes = self.skipped = self.dead_lettered = 0
        self.batch_seconds = FastHistogram(SLOW_BUCKETS)
        self.commit_seconds = FastHistogram(SLOW_BUCKETS)
        # per batch: commit time minus the produce time of its oldest record (the longest any record waited)
        self.freshness = FastHistogram(SLOW_BUCKETS)
        self.last_oldest_age: float | None = None  # of the last batch: its oldest record's wait, seconds
        self.last_newest_age: float | None = None  # and its newest record's
        self.last_version: int | None = None
        self.lag: dict[int, int] = {}  # partition -> records between the pipeline's position and the log end
        self.last_progress: float | None = None  # monotonic time of the last finished pass

    def batch(self, *, records: int, upserts: int, deletes: int, skipped: int, dead_lettered: int, seconds: float,
              commit_seconds: float, version: int | None, committed_at_ms: int, oldest_record_ms: int | None,
              newest_record_ms: int | None) -> None:
        """One batch committed."""
        self.batches += 1
        self.records += records
        self.upserts += upserts
        self.deletes += deletes
        self.skipped += skipped
        self.dead_lettered += dead_lettered
        self.batch_seconds.observe(seconds)
        self.commit_seconds.observe(commit_seconds)
        self.last_version = version
        if oldest_record_ms is not None:
            self.last_oldest_age = max(0.0, (committed_at_ms - oldest_record_ms) / 1000)
            self.freshness.observe(self.last_oldest_age)
        if newest_record_ms is not None:
            self.last_newest_age = max(0.0, (committed_at_ms - newest_record_ms) / 1000)

    def pass_done(self, lag: dict[int, int]) -> None:
        """The loop finished a pass (a batch committed, or nothing to read): its lag afterwards."""
        self.lag = dict(lag)
        self.last_progress = time.monotonic()

    def ready(self) -> tuple[bool, str]:
        """Ready while the last pass finished within ``ready_intervals`` batch intervals."""
        if self.last_progress is None:
            return False, "no batch committed yet"
        since = time.monotonic() - self.last_progress
        limit = self.ready_intervals * self.batch_interval
        if since > limit:
            return False, f"last batch committed {since:.1f}s ago (limit {limit:g}s: {self.ready_intervals} intervals)"
        return True, f"last batch committed {since:.1f}s ago"
