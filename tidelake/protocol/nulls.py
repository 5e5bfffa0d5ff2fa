"""Spec nullability enforced on decoded requests.

kafka-python's generated decoders read a null (length -1) for any string, bytes or array field,
whether or not the field's JSON spec lists the version in ``nullableVersions``. Kafka's generated
readers throw on such a null ("non-nullable field topics was serialized as null"), the request is
unparseable (``InvalidRequestException``) and the broker closes the connection before any handler
runs. ``NullChecks.find`` is that rule, derived from the specs once per (message, version): it
walks only the fields that could hold a forbidden null, and names the first one it finds.
"""
from __future__ import annotations

from typing import Any, Callable

# Simple types whose wire form has a null (length -1); the numeric ones, bools and UUIDs do not.
_NULLABLE_WIRE_TYPES = frozenset({"string", "bytes", "records"})

Check = Callable[[Any], "str | None"]


def _compile(fields, version: int, path: str) -> Check | None:
    """A function returning the dotted path of the first forbidden null under an object with
    ``fields`` at ``version``, or None when nothing there can be null."""
    required: list[str] = []  # attribute names that must not be None
    nested: list[tuple[str, bool, Check]] = []  # (attribute, is an array of structs, check)
    for field in fields:
        if not field.for_version_q(version):
            continue
        can_be_null = field.is_array() or field.type_str in _NULLABLE_WIRE_TYPES
        if can_be_null and not field.nullable_for_version_q(version):
            required.append(field.name)
        if field.is_struct_array() or field.is_struct():
            sub = _compile(field.fields.values(), version, f"{path}{field.name}.")
            if sub is not None:
                nested.append((field.name, field.is_struct_array(), sub))
    if not required and not nested:
        return None

    def check(obj) -> str | None:
        for name in required:
            if getattr(obj, name) is None:
                return path + name
        for name, is_array, sub in nested:
            value = getattr(obj, name)
            if value is None:  # a nullable array or struct that is null has nothing inside
                continue
            for item in (value if is_array else (value,)):
                found = sub(item)
                if found is not None:
                    return found
        return None

    return check


class NullChecks:
    """Per (message class, version) checks, compiled on first use."""

    def __init__(self) -> None:
        self._checks: dict[tuple[type, int], Check | None] = {}

    def find(self, message_cls, version: int, message) -> str | None:
        """The path of the first field of ``message`` that is null where the spec forbids it."""
        key = (message_cls, version)
        try:
            check = self._checks[key]
        except KeyError:
            check = self._checks[key] = _compile(message_cls.fields.values(), version, "")
        return None if check is None else check(message)
