"""Compatibility levels: which earlier versions a new schema is checked against, and in which direction.

BACKWARD: the new schema reads data written with the latest version; FORWARD: the latest reads data written with
the new one; FULL: both. The ``_TRANSITIVE`` levels check against every earlier version instead of the latest.
NONE checks nothing. (Confluent's ``CompatibilityLevel`` / ``CompatibilityChecker``.)
"""
from __future__ import annotations

from typing import Sequence

from tidelake.schema_registry.schema_types import ParsedSchema, SchemaType


def incompatibilities(level: str, schema_type: SchemaType, new: ParsedSchema,
                      previous: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) at ``level``; empty when it may."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    problems: list[str] = []
    for old in reversed(against):    # newest first, as Confluent reports
        if backward:
            problems += schema_type.incompatibilities(new, old)
        if forward:
            problems += schema_type.incompatibilities(old, new)
        if problems:
            break
    return problems
