"""Kafka record values -> table changes, in Arrow, for every ``sink.format`` (value_formats.py).

A batch of values is decoded at once by the format's decoder (one interface, value_decoder.py: JSON text,
or Confluent-framed Avro / Protobuf / JSON with their registered schemas) into the envelope's read schema,
then the envelope (envelopes.py: the value is the row, or a Debezium change event) is resolved with Arrow
compute: no Python work per record. A null value (a tombstone, e.g. after a Debezium delete, for log
compaction) carries no change, unless ``sink.tombstones: delete`` (``ValueFormat.tombstone_key``): then it
deletes the row its record key names, the key decoded as the table's primary key. The result has the table's columns (fields the table lacks are dropped,
missing ones are null), the change operation ``_op`` in the table's own encoding (int8: 0 upsert, 1 delete)
and the record's Kafka partition and offset, which order the changes: the table keeps the last change per
key in that order.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.decode_errors import BadChangeEvent
from tidelake.spark.value_formats import ValueFormat
from tidelake.table.files import OP, OP_DELETE, OP_UPSERT

__all__ = ["BadChangeEvent", "ORDER_COLUMNS", "changes_schema", "parse_changes", "parse_changes_located",
           "check_primary_key"]

PARTITION_COLUMN = "_kafka_partition"
OFFSET_COLUMN = "_kafka_offset"
ORDER_COLUMNS = (PARTITION_COLUMN, OFFSET_COLUMN)


def changes_schema(schema: pa.Schema) -> pa.Schema:
    """The parsed changes: the table's columns (nullable while parsing), ``_op`` and the ordering columns."""
    return pa.schema([f.with_nullable(True) for f in schema]
                     + [pa.field(OP, pa.int8()), pa.field(PARTITION_COLUMN, pa.int32()),
                        pa.field(OFFSET_COLUMN, pa.int64())])


def parse_changes(kafka_rows: pa.RecordBatch | pa.Table, schema: pa.Schema, fmt: ValueFormat,
                  truncates: list[tuple[int, int]] | None = None, schema_ids: set[int] | None = None) -> pa.Table:
    """Kafka rows (``value``, ``partition``, ``offset``) -> changes of :func:`changes_schema` (the table's
    ``schema``), in the rows' order, skipped records left out. A Debezium truncate carries no row: its
    (partition, offset) is appended to ``truncates`` for the caller to apply; without that list it is a
    BadChangeEvent (never silently ignored). The registered schemas the values were written with are added
    to ``schema_ids``."""
    out_schema = changes_schema(schema)
    rows = pa.table(kafka_rows).select(list(fmt.kafka_columns))
    if fmt.tombstone_key and rows.column("value").null_count:
        values = parse_changes(rows.filter(rows.column("value").is_valid()), schema, fmt, truncates, schema_ids)
        deletes = _tombstone_deletes(rows.filter(rows.column("value").is_null()), schema, fmt, out_schema)
        # (one order for both: the table keeps the last change of a key in Kafka order)
        return pa.concat_tables([values, deletes]).sort_by([(c, "ascending") for c in ORDER_COLUMNS])
    rows = rows.filter(rows.column("value").is_valid())  # tombstones carry no change
    if rows.num_rows == 0:
        return out_schema.empty_table()
    row_type = pa.struct([f.with_nullable(True) for f in schema])
    decoded = fmt.decoder.decode(rows.column("value").combine_chunks(), fmt.envelope.read_schema(row_type))
    if schema_ids is not None:
        schema_ids.update(decoded.schema_ids)
    parsed = decoded.table
    if decoded.present is not None:
        rows, parsed = rows.filter(decoded.present), parsed.filter(decoded.present)
    if rows.num_rows == 0:
        return out_schema.empty_table()
    resolved = fmt.envelope.resolve(parsed, schema)
    columns = resolved.columns
    if fmt.key_columns:
        columns = {**columns, **_record_key_columns(rows.column("key"), schema, fmt, fmt.key_columns)}
    if resolved.is_truncate is not None and pc.any(resolved.is_truncate).as_py():
        if truncates is None:
            raise BadChangeEvent("Debezium truncate (op 't') cannot be applied here")
        at = rows.filter(resolved.is_truncate)
        truncates.extend(zip(at.column("partition").to_pylist(), at.column("offset").to_pylist()))
    if resolved.is_delete is None:
        op = pa.array(np.full(rows.num_rows, OP_UPSERT, np.int8))
    else:
        op = pc.if_else(resolved.is_delete, pa.scalar(OP_DELETE, pa.int8()), pa.scalar(OP_UPSERT, pa.int8()))
    try:
        arrays = [pc.cast(columns[f.name], f.type) for f in schema]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise BadChangeEvent(f"value does not fit the table's columns: {str(e).splitlines()[0]}") from None
    arrays += [op, rows.column("partition").cast(pa.int32()), rows.column("offset").cast(pa.int64())]
    changes = pa.Table.from_arrays(arrays, schema=out_schema)
    return changes if resolved.keep is None else changes.filter(resolved.keep)


def _record_key_columns(keys: pa.ChunkedArray, schema: pa.Schema, fmt: ValueFormat,
                        columns: tuple[str, ...]) -> dict[str, pa.Array]:
    """The table's key ``columns`` that come from the record key, decoded by the format's decoder (a JSON key in
    the JSON converter's ``{"schema": ..., "payload": {...}}`` wrapper too)."""
    if keys.null_count:
        raise BadChangeEvent(f"record without a key: the table's key ({', '.join(columns)}) comes from "
                             f"the record key")
    fields = [schema.field(k).with_nullable(True) for k in columns]
    read = pa.schema(fields + [pa.field("payload", pa.struct(fields))])
    decoded = fmt.decoder.decode(keys.combine_chunks(), read).table
    payload = decoded.column("payload")
    return {k: pc.coalesce(decoded.column(k), pc.struct_field(payload, k)) if payload.null_count < len(payload)
            else decoded.column(k) for k in columns}


def _tombstone_deletes(rows: pa.Table, schema: pa.Schema, fmt: ValueFormat, out_schema: pa.Schema) -> pa.Table:
    """Tombstones as deletes of the rows their record keys name (``sink.tombstones: delete``)."""
    try:
        key = _record_key_columns(rows.column("key"), schema, fmt, fmt.tombstone_key)
    except BadChangeEvent as e:
        raise BadChangeEvent(f"tombstone (sink.tombstones: delete): {e}") from None
    n = rows.num_rows
    try:
        arrays = [pc.cast(key[f.name], f.type) if f.name in key else pa.nulls(n, f.type) for f in schema]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise BadChangeEvent(f"tombstone key does not fit the table's key: {str(e).splitlines()[0]}") from None
    arrays += [pa.array(np.full(n, OP_DELETE, np.int8)), rows.column("partition").cast(pa.int32()),
               rows.column("offset").cast(pa.int64())]
    return pa.Table.from_arrays(arrays, schema=out_schema)


def parse_changes_located(kafka_rows: pa.RecordBatch | pa.Table, schema: pa.Schema, fmt: ValueFormat,
                          primary_key: list[str], *, skip_bad: bool = False,
                          truncates: list[tuple[int, int]] | None = None, schema_ids: set[int] | None = None
                          ) -> tuple[pa.Table, list[tuple[int, int, str]]]:
    """``parse_changes`` + ``check_primary_key`` that names the record at fault: (changes, bad records as
    (partition, offset, reason)).

    The batch is parsed whole; only when that fails is each record parsed on its own, to find the bad
    ones. Without ``skip_bad`` the first bad record raises BadChangeEvent naming its partition and
    offset; with it, bad records are left out and listed."""
    found: list[tuple[int, int]] = []
    try:
        changes = parse_changes(kafka_rows, schema, fmt, found if truncates is not None else None, schema_ids)
        check_primary_key(changes, primary_key)
        if truncates is not None:
            truncates.extend(found)
        return changes, []
    except BadChangeEvent:
        pass
    rows = pa.table(kafka_rows)
    good, skipped = [], []
    for i in range(rows.num_rows):
        one = rows.slice(i, 1)
        try:
            changes = parse_changes(one, schema, fmt, truncates)
            check_primary_key(changes, primary_key)
        except BadChangeEvent as e:
            partition, offset = one.column("partition")[0].as_py(), one.column("offset")[0].as_py()
            if not skip_bad:
                raise BadChangeEvent(str(e), partition=partition, offset=offset) from None
            skipped.append((partition, offset, str(e)))
            continue
        good.append(i)
    return parse_changes(rows.take(pa.array(good, pa.int64())), schema, fmt, [] if truncates is not None else None,
                         schema_ids), skipped


def check_primary_key(changes: pa.Table, primary_key: list[str]) -> None:
    """Every change must name its key (a Debezium row without it is not a change of this table)."""
    for key in primary_key:
        if changes.column(key).null_count:
            raise BadChangeEvent(f"change event without primary key column {key!r}")
