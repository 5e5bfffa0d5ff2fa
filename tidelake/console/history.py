"""Time series the console keeps in memory: per series a bounded deque of (unix seconds, value), newest last.
Nothing is persisted; a restarted console starts with empty charts."""
from __future__ import annotations

import threading
from collections import deque
from typing import Hashable

Point = tuple[float, float]


class History:
    def __init__(self, max_points: int = 720):
        self.max_points = max_points
        self._series: dict[Hashable, deque[Point]] = {}
        self._lock = threading.Lock()

    def add(self, key: Hashable, t: float, value: float) -> None:
        with self._lock:
            self._series.setdefault(key, deque(maxlen=self.max_points)).append((t, float(value)))

    def points(self, key: Hashable) -> list[Point]:
        with self._lock:
            return list(self._series.get(key, ()))

    def keys(self, kind: str) -> list[Hashable]:
        """The series whose key is a tuple starting with ``kind``."""
        with self._lock:
            return sorted((k for k in self._series if isinstance(k, tuple) and k and k[0] == kind), key=str)


def rate(points: list[Point]) -> list[Point]:
    """Per-second increase between consecutive points (a counter's rate); a decrease (a reset) counts as 0."""
    return [(t1, max(0.0, (v1 - v0) / (t1 - t0))) for (t0, v0), (t1, v1) in zip(points, points[1:]) if t1 > t0]
