"""The console's roles: a ``viewer`` sees the pages; an ``operator`` may also run actions (compact a table,
reset a group's offsets) when the console offers them (``--allow-actions``)."""
from __future__ import annotations

VIEWER, OPERATOR = "viewer", "operator"
ROLES = (VIEWER, OPERATOR)   # in order: each role may do what the ones before it may


def role_allows(role: str, needed: str) -> bool:
    return ROLES.index(role) >= ROLES.index(needed)
