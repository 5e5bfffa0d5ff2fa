"""``parse_timestamp_ms``: the one reading of a point in time a user types, for the command line, the web
console and the Spark options alike."""
from __future__ import annotations

import pytest

from tidelake.clock import parse_timestamp_ms

JAN_31_NOON_UTC = 1_769_860_800_000


@pytest.mark.parametrize("text, expected", [
    ("1769860800000", JAN_31_NOON_UTC),
    (" -5 ", -5),
    ("2026-01-31T12:00:00Z", JAN_31_NOON_UTC),
    ("2026-01-31T12:00:00+00:00", JAN_31_NOON_UTC),
    ("2026-01-31T13:00:00+01:00", JAN_31_NOON_UTC),
    ("2026-01-31T12:00:00", JAN_31_NOON_UTC),          # no zone: UTC
    ("2026-01-31T12:00:00.250Z", JAN_31_NOON_UTC + 250),
    ("2026-01-31", JAN_31_NOON_UTC - 12 * 3_600_000),
])
def test_epoch_milliseconds_and_iso_8601(text, expected):
    assert parse_timestamp_ms(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01", "12:00Z!", "1e3"])
def test_anything_else_is_a_value_error(text):
    with pytest.raises(ValueError):
        parse_timestamp_ms(text)
