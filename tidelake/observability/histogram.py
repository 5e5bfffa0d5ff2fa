"""A histogram cheap enough for a request path: one ``bisect`` and two additions per observation, no
lock (every observation comes from one thread, the broker's event loop or the pipeline's driver); a
collector turns it into Prometheus' cumulative buckets at scrape time."""
from __future__ import annotations

import bisect
from typing import Sequence

# Prometheus client's default buckets, with a finer start: broker requests take tens of microseconds
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 10.0)
# seconds for work measured in seconds to minutes (pipeline batches, compactions, freshness)
SLOW_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class FastHistogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS):
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus' buckets: (upper bound, observations <= it), ending with +Inf."""
        out, running = [], 0
        for bound, n in zip(self.bounds + (float("inf"),), list(self.counts)):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out
