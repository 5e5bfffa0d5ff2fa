"""Values typed by the user, parsed once at the option (a bad one is a usage error naming the option):
points in time, ISO-8601 durations, KEY=VALUE pairs."""
from __future__ import annotations

import datetime as dt
import re
from typing import Iterable

import click

from tidelake.clock import parse_timestamp_ms


class TimestampMs(click.ParamType):
    """A point in time -> milliseconds since the epoch: ISO-8601 (UTC unless it names a zone) or epoch ms."""

    name = "TIME"

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_timestamp_ms(value)
        except ValueError:
            self.fail(f"{value!r} is not a time: use ISO-8601 (2026-01-31T12:00:00Z, 2026-01-31) "
                      f"or milliseconds since the epoch", param, ctx)


class IsoDuration(click.ParamType):
    """An ISO-8601 duration, as Kafka's ``--by-duration`` takes it (PnDTnHnMnS, e.g. PT1H30M, P1D,
    -PT10M) -> milliseconds."""

    name = "DURATION"
    _PATTERN = re.compile(r"(-)?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        m = self._PATTERN.fullmatch(str(value).strip().upper())
        if not m or not any(m.group(i) for i in range(2, 6)):
            self.fail(f"{value!r} is not an ISO-8601 duration (e.g. PT1H30M, P1D, PT0.5S)", param, ctx)
        sign, days, hours, minutes, seconds = m.groups()
        ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + float(seconds or 0) * 1000
        return -int(ms) if sign else int(ms)


def format_ms(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds."""
    if ms is None or ms < 0:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def parse_pairs(items: Iterable[str], option: str) -> dict[str, str]:
    """KEY=VALUE strings -> dict; a malformed one is a usage error naming the option."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        out[key.strip()] = value.strip()
    return out
