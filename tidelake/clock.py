"""The wall clock in milliseconds since the epoch: Kafka's unit for timestamps, timeouts and retention.

Components take a ``clock_ms`` callable (defaulting to :func:`wall_ms`) so tests can inject time.
"""
from __future__ import annotations

import time


def wall_ms() -> int:
    """Milliseconds since the Unix epoch, as Kafka's ``Time.milliseconds()``."""
    return time.time_ns() // 1_000_000
