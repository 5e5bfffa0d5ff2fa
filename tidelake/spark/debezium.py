"""Kafka record values -> table changes: Debezium's change-event envelope and plain JSON (SPEC P2).

Debezium (https://debezium.io/documentation/reference/stable/connectors/mysql.html#mysql-events) writes one
event per row change: ``{"before": {...}|null, "after": {...}|null, "op": "c"|"u"|"d"|"r"|"t", "ts_ms": ...,
"source": {...}}``, with the JSON converter's ``{"schema": ..., "payload": <that>}`` wrapper when
``schemas.enable=true``. ``c`` (create), ``u`` (update) and ``r`` (snapshot read) upsert ``after``;
``d`` deletes the key of ``before``; a null value (the tombstone after a delete, for log compaction) and
``t`` (truncate) carry no row change and are skipped.

Within one batch several events may hit one key; the last in offset order wins (:func:`fold_last_per_key`).
Debezium keys records by primary key, so all events of a key are in one partition and offset order is
their real order; ties across partitions (which would mean a producer did not key by primary key) are
resolved by (partition, offset), i.e. deterministically.

Pure Python + pyarrow: the Spark stages call these functions inside ``mapInArrow``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping

import pyarrow as pa
import pyarrow.compute as pc

OP_COLUMN = "_op"  # "upsert" | "delete"
PARTITION_COLUMN = "_kafka_partition"
OFFSET_COLUMN = "_kafka_offset"
ORDER_COLUMNS = (PARTITION_COLUMN, OFFSET_COLUMN)

UPSERT_OPS = {"c", "u", "r"}


@dataclass(frozen=True)
class RowChange:
    op: Literal["upsert", "delete"]
    row: dict[str, Any]  # the full row for an upsert, at least the primary key for a delete


class BadChangeEvent(ValueError):
    """A record value that is not a change event of the configured format."""


def _loads(value: bytes | str | Mapping | None) -> Any:
    if value is None or isinstance(value, Mapping):
        return value
    try:
        return json.loads(value)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadChangeEvent(f"value is not JSON: {value[:80]!r}") from e


def parse_debezium(value: bytes | str | Mapping | None) -> RowChange | None:
    """One Debezium event -> a row change, or None for tombstones, truncates and heartbeats."""
    event = _loads(value)
    if event is None:
        return None
    if not isinstance(event, Mapping):
        raise BadChangeEvent(f"Debezium event is not an object: {event!r:.80}")
    if "payload" in event and "op" not in event:  # JsonConverter with schemas.enable=true
        event = event["payload"]
        if event is None:
            return None
    op = event.get("op")
    if op in UPSERT_OPS:
        after = event.get("after")
        if not isinstance(after, Mapping):
            raise BadChangeEvent(f"op {op!r} without an 'after' row")
        return RowChange("upsert", dict(after))
    if op == "d":
        before = event.get("before")
        if not isinstance(before, Mapping):
            raise BadChangeEvent("op 'd' without a 'before' row")
        return RowChange("delete", dict(before))
    if op == "t" or op is None and "before" not in event and "after" not in event:
        return None  # truncate, or not a row event (heartbeat / schema change)
    raise BadChangeEvent(f"unknown Debezium op {op!r}")


def parse_json(value: bytes | str | Mapping | None) -> RowChange | None:
    """Plain JSON format: the value object is the row (upserted or appended); a null value is skipped."""
    row = _loads(value)
    if row is None:
        return None
    if not isinstance(row, Mapping):
        raise BadChangeEvent(f"JSON value is not an object: {row!r:.80}")
    return RowChange("upsert", dict(row))


PARSERS = {"debezium-json": parse_debezium, "json": parse_json}


def changes_to_arrow(values: Iterable[bytes | str | None], partitions: Iterable[int], offsets: Iterable[int],
                     schema: pa.Schema, fmt: str = "debezium-json") -> pa.Table:
    """Parse record values into a table of the target ``schema`` plus the op and ordering columns.

    Columns of the row that the schema does not name are dropped; missing ones are null.
    """
    parse = PARSERS[fmt]
    names = schema.names
    columns: dict[str, list] = {n: [] for n in names}
    ops, parts, offs = [], [], []
    for value, partition, offset in zip(values, partitions, offsets):
        change = parse(value)
        if change is None:
            continue
        for n in names:
            columns[n].append(change.row.get(n))
        ops.append(change.op)
        parts.append(partition)
        offs.append(offset)
    arrays = [pa.array(columns[n], type=schema.field(n).type) for n in names]
    arrays += [pa.array(ops, pa.string()), pa.array(parts, pa.int32()), pa.array(offs, pa.int64())]
    out_schema = pa.schema(list(schema) + [pa.field(OP_COLUMN, pa.string()),
                                           pa.field(PARTITION_COLUMN, pa.int32()),
                                           pa.field(OFFSET_COLUMN, pa.int64())])
    return pa.Table.from_arrays(arrays, schema=out_schema)


def fold_last_per_key(changes: pa.Table, primary_key: list[str]) -> tuple[pa.Table, pa.Table]:
    """Keep only the last change per key in (partition, offset) order; split into (upserts, deletes).

    Both results have the table's columns only (the op/ordering columns are dropped); deletes keep the key
    columns (and whatever ``before`` carried).
    """
    data_columns = [n for n in changes.column_names if n not in (OP_COLUMN, *ORDER_COLUMNS)]
    if changes.num_rows == 0:
        empty = changes.select(data_columns)
        return empty, empty
    for key in primary_key:
        if changes.column(key).null_count:
            raise BadChangeEvent(f"change event without primary key column {key!r}")
    indexed = changes.sort_by([(c, "ascending") for c in ORDER_COLUMNS])
    indexed = indexed.append_column("_row", pa.array(range(indexed.num_rows), pa.int64()))
    last = indexed.group_by(primary_key).aggregate([("_row", "max")]).column("_row_max")
    winners = indexed.take(pc.take(last, pc.array_sort_indices(last)))  # keep offset order
    is_delete = pc.equal(winners.column(OP_COLUMN), "delete")
    upserts = winners.filter(pc.invert(is_delete)).select(data_columns)
    deletes = winners.filter(is_delete).select(data_columns)
    return upserts, deletes
