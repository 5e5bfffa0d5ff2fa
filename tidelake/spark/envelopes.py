"""How a decoded record value becomes a table change: the value is the row (``Plain``), or a Debezium
change-event envelope around it (``Debezium``), whatever encoding the value was decoded from.

Debezium (https://debezium.io/documentation/reference/stable/connectors/mysql.html#mysql-events) writes one
event per row change: ``{"before": {...}|null, "after": {...}|null, "op": "c"|"u"|"d"|"r"|"t", "ts_ms": ...,
"source": {...}}`` (with the JSON converter's ``{"schema": ..., "payload": <that>}`` wrapper when
``schemas.enable=true``; the Avro and Protobuf converters write the envelope as a record / message of those
fields). ``c`` (create), ``u`` (update) and ``r`` (snapshot read) upsert ``after``; ``d`` deletes the key of
``before``; events that carry no row (heartbeats) are skipped; ``t`` (truncate) is reported to the caller,
which empties the table in the batch's commit. The envelope is resolved with Arrow compute, no Python work
per record.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.decode_errors import BadChangeEvent

UPSERT_OPS = ["c", "u", "r"]


@dataclass(frozen=True)
class Resolved:
    """Per decoded value: whether it deletes (else upserts), whether it is a change at all (None: every one
    is), the table's columns, whether it is a Debezium truncate (None: none is)."""
    is_delete: pa.Array | None
    keep: pa.Array | None
    columns: dict[str, pa.Array]
    is_truncate: pa.Array | None = None


class Envelope:
    """Plain: each value is a row, upserted."""

    def read_schema(self, row_type: pa.StructType) -> pa.Schema:
        """What to decode a value into, given the table's row."""
        return pa.schema(list(row_type))

    def resolve(self, decoded: pa.Table, schema: pa.Schema) -> Resolved:
        return Resolved(None, None, {f.name: decoded.column(f.name) for f in schema})

    def row_schema(self, value_schema: pa.Schema) -> pa.Schema:
        """The table's columns in a registered value schema."""
        return value_schema


class Debezium(Envelope):
    def read_schema(self, row_type: pa.StructType) -> pa.Schema:
        envelope = [pa.field("before", row_type), pa.field("after", row_type), pa.field("op", pa.string())]
        return pa.schema(envelope + [pa.field("payload", pa.struct(envelope))])

    def row_schema(self, value_schema: pa.Schema) -> pa.Schema:
        for name in ("after", "before"):
            if name in value_schema.names and pa.types.is_struct(value_schema.field(name).type):
                return pa.schema(list(value_schema.field(name).type))
        raise BadChangeEvent("the registered value schema is not a Debezium envelope (no 'after' record)")

    def resolve(self, events: pa.Table, schema: pa.Schema) -> Resolved:
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
        return Resolved(is_delete, pc.or_(is_upsert, is_delete), columns, is_truncate)


PLAIN, DEBEZIUM = Envelope(), Debezium()

