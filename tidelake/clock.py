"""The wall clock in milliseconds since the epoch: Kafka's unit for timestamps, timeouts and retention.

Components take a ``clock_ms`` callable (defaulting to :func:`wall_ms`) so tests can inject time.
``parse_timestamp_ms`` is the one reading of a point in time a user typed (command line, console, Spark options).
"""
from __future__ import annotations

import datetime as dt
import re
import time


def wall_ms() -> int:
    """Milliseconds since the Unix epoch, as Kafka's ``Time.milliseconds()``."""
    return time.time_ns() // 1_000_000


def parse_timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch from epoch milliseconds (digits) or ISO-8601 (2026-01-31T12:00:00Z,
    2026-01-31; UTC unless it names a zone). ValueError for anything else."""
    text = str(text).strip()
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000)
