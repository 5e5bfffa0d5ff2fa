"""Merge engines: how the rows written for one key combine into its live row (table property
``merge-engine``, fixed at creation; Apache Paimon's merge engines are the model).

The changes of a key are applied in the order they were written (commit order, then arrival order in a
commit) to its live row, ``None`` when the key has none:

- ``deduplicate`` (the default): an upsert replaces the row, a delete removes it.
- ``partial-update``: an upsert's non-null columns overwrite the row's, its null columns leave them as
  they are (a new key starts as the upsert, nulls included); a delete removes the whole row, and the
  key's next upsert starts a new one.
- ``aggregation``: every non-key column combines by its ``fields.<column>.aggregate-function``
  (default ``last_non_null_value``): sum, min, max (nulls ignored), count (of non-null values written),
  last_value, last_non_null_value, first_value (the first upsert's, null included), bool_and, bool_or
  (nulls ignored), listagg (strings joined by ","; nulls ignored). A delete removes the row only with
  ``aggregation.remove-record-on-delete=true``; otherwise the write is refused (no function retracts).
- ``first-row``: the first upsert of a key is kept, later upserts are ignored; a delete removes the
  row, and the key's next upsert is its first row again.

``sequence.field`` (deduplicate, partial-update, aggregation): an upsert whose value in that column is
smaller than the live row's is dropped whole (out-of-order input); the column of the live row is the
value of the last upsert applied. An upsert with a null sequence value is refused. Deletes carry only
the key and are always applied.

Only the engine's fold is here; ``engine_commit.py`` applies it when a commit is published, so every data
file holds resolved rows and reads, compaction and the change feed need no engine of their own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from .errors import TableError
from .files import OP_DELETE
from .properties import (AGGREGATION_REMOVE_RECORD_ON_DELETE, MERGE_ENGINE, SEQUENCE_FIELD, InvalidProperty,
                         aggregate_function, aggregated_column)

Row = dict[str, Any]


class MergeRefused(TableError):
    """A write the table's merge engine cannot apply (the whole commit is refused)."""


def _ignoring_nulls(combine: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda acc, v: acc if v is None else v if acc is None else combine(acc, v)


#: fn(accumulated, value) -> accumulated, for a key's second and later upserts
_COMBINE: dict[str, Callable[[Any, Any], Any]] = {
    "sum": _ignoring_nulls(lambda a, v: a + v),
    "min": _ignoring_nulls(min),
    "max": _ignoring_nulls(max),
    "count": lambda acc, v: (acc or 0) + (v is not None),
    "last_value": lambda acc, v: v,
    "last_non_null_value": lambda acc, v: acc if v is None else v,
    "first_value": lambda acc, v: acc,
    "bool_and": _ignoring_nulls(lambda a, v: a and v),
    "bool_or": _ignoring_nulls(lambda a, v: a or v),
    "listagg": _ignoring_nulls(lambda a, v: f"{a},{v}"),
}

#: which column types each function takes
_TYPES: dict[str, Callable[[pa.DataType], bool]] = {
    "sum": lambda t: pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t),
    "count": pa.types.is_integer,
    "bool_and": pa.types.is_boolean,
    "bool_or": pa.types.is_boolean,
    "listagg": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
}


@dataclass(frozen=True)
class MergeEngine:
    """One table's merge engine: its kind and what the kind reads from the properties."""
    kind: str
    primary_key: tuple[str, ...]
    sequence_field: str | None = None
    #: aggregation: (column, function) of every non-key column but the sequence field
    functions: tuple[tuple[str, str], ...] = ()
    remove_record_on_delete: bool = False

    @classmethod
    def of(cls, properties: Mapping[str, str], schema: pa.Schema, primary_key: Sequence[str]) -> "MergeEngine":
        """The engine ``properties`` describe for ``schema``; InvalidProperty naming the property that does not
        fit (a sequence field or aggregated column that is no column, a function the column's type lacks)."""
        pk = tuple(primary_key)
        kind = MERGE_ENGINE.of(properties)
        sequence = SEQUENCE_FIELD.of(properties) or None
        if sequence is not None:
            if kind == "first-row":
                raise InvalidProperty(SEQUENCE_FIELD.name, "first-row keeps the first row written; a sequence "
                                                           "field has no meaning there")
            if sequence not in schema.names or sequence in pk:
                raise InvalidProperty(SEQUENCE_FIELD.name, f"{sequence!r} is not a non-key column of {schema.names}")
        named = {aggregated_column(n): v for n, v in properties.items() if aggregated_column(n) is not None}
        if named and kind != "aggregation":
            raise InvalidProperty(aggregate_function(next(iter(named))).name, "only merge-engine=aggregation "
                                                                              "aggregates columns")
        functions = []
        for column in named:
            if column not in schema.names or column in pk or column == sequence:
                raise InvalidProperty(aggregate_function(column).name,
                                      f"{column!r} is not a non-key column of {schema.names} (nor the sequence field)")
        if kind == "aggregation":
            for field in schema:
                if field.name in pk or field.name == sequence:
                    continue
                prop = aggregate_function(field.name)
                fn = prop.parse(named.get(field.name, prop.default))
                if fn in _TYPES and not _TYPES[fn](field.type):
                    raise InvalidProperty(prop.name, f"{fn} does not apply to column {field.name!r} of type "
                                                     f"{field.type}")
                functions.append((field.name, fn))
        return cls(kind, pk, sequence, tuple(functions), AGGREGATION_REMOVE_RECORD_ON_DELETE.of(properties))

    @property
    def resolves_on_commit(self) -> bool:
        """Whether a commit must combine its rows with the live ones (anything but plain deduplication)."""
        return self.kind != "deduplicate" or self.sequence_field is not None

    def apply(self, live: Row | None, op: int, row: Row) -> Row | None:
        """The key's row after ``row`` (an upsert, or with ``op`` a delete) is applied to ``live`` (None:
        absent). MergeRefused if the engine cannot apply it."""
        if op == OP_DELETE:
            if self.kind == "aggregation" and not self.remove_record_on_delete:
                raise MergeRefused(f"merge-engine=aggregation refuses the delete of key {self._key(row)} (set "
                                   f"{AGGREGATION_REMOVE_RECORD_ON_DELETE.name}=true to let a delete remove the row)")
            return None
        seq = self.sequence_field
        if seq is not None:
            if row[seq] is None:
                raise MergeRefused(f"sequence.field {seq!r} is null in the upsert of key {self._key(row)}")
            if live is not None and row[seq] < live[seq]:
                return live
        if live is None:
            first = dict(row)
            for c, fn in self.functions:
                if fn == "count":
                    first[c] = int(row[c] is not None)
            return first
        if self.kind == "deduplicate":
            return dict(row)
        if self.kind == "first-row":
            return live
        if self.kind == "partial-update":
            return {c: live[c] if v is None else v for c, v in row.items()}
        out = dict(live)
        for c, fn in self.functions:
            out[c] = _COMBINE[fn](live[c], row[c])
        if seq is not None:
            out[seq] = row[seq]
        return out

    def _key(self, row: Row) -> str:
        return ", ".join(f"{k}={row[k]!r}" for k in self.primary_key)
