"""A commit clock the test sets by hand (milliseconds since the epoch), so that retention, expiry and time
travel are driven by the test instead of by waiting."""
from __future__ import annotations

HOUR = 3_600_000


class ManualClock:
    """Reads ``now``; with a ``step`` every read first moves it on by that much (distinct commit times)."""

    def __init__(self, now: int, step: int = 0):
        self.now = now
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now
