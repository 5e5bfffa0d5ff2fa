"""Kafka record values -> table changes, in Arrow: Debezium's change-event envelope and plain JSON (SPEC P2).

Debezium (https://debezium.io/documentation/reference/stable/connectors/mysql.html#mysql-events) writes one
event per row change: ``{"before": {...}|null, "after": {...}|null, "op": "c"|"u"|"d"|"r"|"t", "ts_ms": ...,
"source": {...}}``, with the JSON converter's ``{"schema": ..., "payload": <that>}`` wrapper when
``schemas.enable=true``. ``c`` (create), ``u`` (update) and ``r`` (snapshot read) upsert ``after``;
``d`` deletes the key of ``before``; a null value (the tombstone after a delete, for log compaction)
and events that carry no row (heartbeats) are skipped; ``t`` (truncate) is reported to the caller, which
empties the table in the batch's commit. Plain JSON: the value object is
the row, upserted (or appended).

A batch of values is parsed at once by pyarrow's JSON reader (the values joined into one newline-delimited
buffer, read with an explicit schema: the table's columns inside ``before`` / ``after`` / ``payload``),
then the envelope is resolved with Arrow compute: no Python work per record. The result has the table's
columns (fields the schema does not name are dropped, missing ones are null), the change operation ``_op``
in the table's own encoding (int8: 0 upsert, 1 delete) and the record's Kafka partition and offset, which
order the changes: the table keeps the last change per key in that order.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from tidelake.table.files import OP, OP_DELETE, OP_UPSERT

PARTITION_COLUMN = "_kafka_partition"
OFFSET_COLUMN = "_kafka_offset"
ORDER_COLUMNS = (PARTITION_COLUMN, OFFSET_COLUMN)
FORMATS = ("debezium-json", "json")

UPSERT_OPS = ["c", "u", "r"]


class BadChangeEvent(ValueError):
    """A record value that is not a change event of the configured format; ``partition`` and ``offset``
    name the record once it has been located (``parse_changes_located``)."""

    def __init__(self, reason: str, *, partition: int | None = None, offset: int | None = None):
        self.reason, self.partition, self.offset = reason, partition, offset
        where = f"partition {partition} offset {offset}: " if partition is not None else ""
        super().__init__(where + reason)


def changes_schema(schema: pa.Schema) -> pa.Schema:
    """The parsed changes: the table's columns (nullable while parsing), ``_op`` and the ordering columns."""
    return pa.schema([f.with_nullable(True) for f in schema]
                     + [pa.field(OP, pa.int8()), pa.field(PARTITION_COLUMN, pa.int32()),
                        pa.field(OFFSET_COLUMN, pa.int64())])


def _json_type(t: pa.DataType) -> pa.DataType:
    """The type the JSON reader fills for a table column of type ``t``. Times and dates arrive as numbers
    (epoch units, as Debezium sends them) and are cast afterwards; the reader only parses them from text."""
    if pa.types.is_temporal(t):
        return pa.int32() if t.bit_width == 32 else pa.int64()
    return t


def _row_type(schema: pa.Schema) -> pa.StructType:
    return pa.struct([pa.field(f.name, _json_type(f.type)) for f in schema])


def _json_texts(values: pa.Array) -> tuple[pa.Array, pa.Array | None]:
    """Record values (no nulls) -> (their JSON object texts, one per line, the values that are the JSON
    ``null`` left out; the mask of kept values, None when all are kept)."""
    try:
        texts = values.cast(pa.string())
    except pa.ArrowInvalid as e:
        raise BadChangeEvent(f"value is not UTF-8 JSON: {e}") from None
    # Newline-delimited JSON needs one value per line; a raw newline in a JSON text can only be whitespace.
    if pc.any(pc.match_substring_regex(texts, "[\r\n]")).as_py():
        texts = pc.replace_substring_regex(texts, "[\r\n]", " ")
    if pc.all(pc.starts_with(texts, "{"), min_count=0).as_py():
        return texts, None
    texts = pc.utf8_trim_whitespace(texts)
    keep = pc.not_equal(texts, "null")  # a JSON null value is a tombstone too
    texts = texts.filter(keep)
    objects = pc.starts_with(texts, "{")
    if not pc.all(objects, min_count=0).as_py():
        first = texts.filter(pc.invert(objects))[0].as_py()
        raise BadChangeEvent(f"value is not a JSON object: {first[:80]!r}")
    return texts, keep


def _read_objects(texts: pa.Array, read_schema: pa.Schema) -> pa.Table:
    """Parse JSON object texts with pyarrow's JSON reader; one row per text, in order."""
    if len(texts) == 0:
        return read_schema.empty_table()
    lines = pc.binary_join_element_wise(texts, pa.scalar(""), "\n")
    _, offsets, data = lines.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32, count=len(lines) + 1, offset=lines.offset * 4)
    start, end = int(bounds[0]), int(bounds[-1])
    try:
        parsed = pajson.read_json(
            pa.BufferReader(data.slice(start, end - start)),
            read_options=pajson.ReadOptions(use_threads=False, block_size=max(1 << 20, end - start)),
            parse_options=pajson.ParseOptions(explicit_schema=read_schema, unexpected_field_behavior="ignore"))
    except pa.ArrowInvalid as e:
        raise BadChangeEvent(f"value is not a change event: {e}") from None
    if parsed.num_rows != len(texts):
        raise BadChangeEvent(f"{len(texts)} values parsed into {parsed.num_rows} rows")
    return parsed


def _resolve_debezium(events: pa.Table, schema: pa.Schema
                      ) -> tuple[pa.ChunkedArray, pa.ChunkedArray, dict, pa.ChunkedArray]:
    """(op, keep mask, {column: value}, truncate mask) of Debezium events, the ``payload`` wrapper unwrapped."""
    payload = events.column("payload")
    wrapped = pc.and_(payload.is_valid(), events.column("op").is_null())

    def pick(name: str):
        return pc.if_else(wrapped, pc.struct_field(payload, name), events.column(name))

    op, before, after = pick("op"), pick("before"), pick("after")
    is_upsert = pc.is_in(op, pa.array(UPSERT_OPS))
    is_delete = pc.equal(op, "d")
    no_row = pc.and_(op.is_null(), pc.and_(before.is_null(), after.is_null()))
    is_truncate = pc.fill_null(pc.equal(op, "t"), False)
    skip = pc.or_(pc.fill_null(no_row, False), is_truncate)
    unknown = pc.invert(pc.or_(pc.fill_null(pc.or_(is_upsert, is_delete), False), pc.fill_null(skip, False)))
    if pc.any(unknown).as_py():
        raise BadChangeEvent(f"unknown Debezium op {pc.filter(op, unknown)[0].as_py()!r}")
    is_upsert, is_delete = pc.fill_null(is_upsert, False), pc.fill_null(is_delete, False)
    if pc.any(pc.and_(is_upsert, after.is_null())).as_py():
        raise BadChangeEvent(f"op {pc.filter(op, pc.and_(is_upsert, after.is_null()))[0].as_py()!r} "
                             "without an 'after' row")
    if pc.any(pc.and_(is_delete, before.is_null())).as_py():
        raise BadChangeEvent("op 'd' without a 'before' row")
    # A delete's row is its 'before' image (the table needs only its key), an upsert's is 'after'.
    columns = {f.name: pc.if_else(is_delete, pc.struct_field(before, f.name), pc.struct_field(after, f.name))
               for f in schema}
    return is_delete, pc.or_(is_upsert, is_delete), columns, is_truncate


def parse_changes(kafka_rows: pa.RecordBatch | pa.Table, schema: pa.Schema, fmt: str,
                  truncates: list[tuple[int, int]] | None = None) -> pa.Table:
    """Kafka rows (``value``, ``partition``, ``offset``) -> changes of :func:`changes_schema` (the table's
    ``schema``), in the rows' order, skipped records left out. A Debezium truncate carries no row: its
    (partition, offset) is appended to ``truncates`` for the caller to apply; without that list it is a
    BadChangeEvent (never silently ignored)."""
    out_schema = changes_schema(schema)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
    rows = pa.table(kafka_rows).select(["value", "partition", "offset"])
    rows = rows.filter(rows.column("value").is_valid())  # tombstones carry no change
    if rows.num_rows == 0:
        return out_schema.empty_table()
    texts, keep_texts = _json_texts(rows.column("value").combine_chunks())
    if keep_texts is not None:
        rows = rows.filter(keep_texts)
    if rows.num_rows == 0:
        return out_schema.empty_table()
    row_type = _row_type(schema)
    if fmt == "json":
        parsed = _read_objects(texts, pa.schema(list(row_type)))
        op = pa.array(np.full(parsed.num_rows, OP_UPSERT, np.int8))
        keep = None
        columns = {f.name: parsed.column(f.name) for f in schema}
    else:
        envelope = [pa.field("before", row_type), pa.field("after", row_type), pa.field("op", pa.string())]
        parsed = _read_objects(texts, pa.schema(envelope + [pa.field("payload", pa.struct(envelope))]))
        is_delete, keep, columns, is_truncate = _resolve_debezium(parsed, schema)
        if pc.any(is_truncate).as_py():
            if truncates is None:
                raise BadChangeEvent("Debezium truncate (op 't') cannot be applied here")
            at = rows.filter(is_truncate)
            truncates.extend(zip(at.column("partition").to_pylist(), at.column("offset").to_pylist()))
        op = pc.if_else(is_delete, pa.scalar(OP_DELETE, pa.int8()), pa.scalar(OP_UPSERT, pa.int8()))
    arrays = [pc.cast(columns[f.name], f.type) for f in schema]
    arrays += [op, rows.column("partition").cast(pa.int32()), rows.column("offset").cast(pa.int64())]
    changes = pa.Table.from_arrays(arrays, schema=out_schema)
    return changes if keep is None else changes.filter(keep)


def parse_changes_located(kafka_rows: pa.RecordBatch | pa.Table, schema: pa.Schema, fmt: str,
                          primary_key: list[str], *, skip_bad: bool = False,
                          truncates: list[tuple[int, int]] | None = None
                          ) -> tuple[pa.Table, list[tuple[int, int, str]]]:
    """``parse_changes`` + ``check_primary_key`` that names the record at fault: (changes, bad records as
    (partition, offset, reason)).

    The batch is parsed whole; only when that fails is each record parsed on its own, to find the bad
    ones. Without ``skip_bad`` the first bad record raises BadChangeEvent naming its partition and
    offset; with it, bad records are left out and listed."""
    found: list[tuple[int, int]] = []
    try:
        changes = parse_changes(kafka_rows, schema, fmt, found if truncates is not None else None)
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
    return parse_changes(rows.take(pa.array(good, pa.int64())), schema, fmt, [] if truncates is not None else None
                         ), skipped


def check_primary_key(changes: pa.Table, primary_key: list[str]) -> None:
    """Every change must name its key (a Debezium row without it is not a change of this table)."""
    for key in primary_key:
        if changes.column(key).null_count:
            raise BadChangeEvent(f"change event without primary key column {key!r}")
