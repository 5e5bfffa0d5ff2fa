"""Avro record values in Confluent's wire format -> Arrow, a batch at once.

The values of a batch are grouped by schema id. Each group's payloads (schemaless Avro datums, the bytes a
Confluent ``AvroSerializer`` writes after the 5-byte header) are laid out as an in-memory Avro object
container file — the writer schema in its header (named types inlined: polars resolves no names), one datum per block — built with numpy from the Arrow
buffers, and that file is read by polars' Avro reader (Rust) into Arrow columns: no Python object per
record. One datum per block keeps every record inside its own bounds: a payload with trailing bytes cannot
shift its neighbours. The groups are made to the reader's schema (read_schema.py) and put back in the
values' order.

A group too small to be worth a file (and the one-record re-decodes that locate a bad record) is read with
fastavro's ``schemaless_reader`` instead, which also names what is wrong with a datum that does not decode.
"""
from __future__ import annotations

import io
import json

import fastavro
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from polars.exceptions import PanicException

from tidelake.spark.avro_types import UnsupportedAvroType, avro_field, inline_named_types, record_schema
from tidelake.spark.decode_errors import BadChangeEvent
from tidelake.spark.read_schema import SchemaConflict, conform_to
from tidelake.spark.registered_schemas import RegisteredSchema
from tidelake.spark.value_decoder import Decoded, RegistryDecoder
from tidelake.spark.wire_format import BadFraming, split_framed

SYNC_MARKER = b"tidelake-avro-ok"  # 16 bytes, the container's block separator
SMALL_GROUP = 8  # records; fewer are read with fastavro


def _zigzag_varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def container_header(schema_text: str) -> bytes:
    """An Avro object container file's header: magic, metadata (schema, null codec), sync marker."""
    meta = {"avro.schema": schema_text.encode(), "avro.codec": b"null"}
    out = bytearray(b"Obj\x01") + _zigzag_varint(len(meta))
    for k, v in meta.items():
        out += _zigzag_varint(len(k)) + k.encode() + _zigzag_varint(len(v)) + v
    return bytes(out + _zigzag_varint(0) + SYNC_MARKER)


def container_blocks(payloads: pa.BinaryArray) -> np.ndarray:
    """The container's blocks, one datum each: count 1, byte size, datum, sync marker (numpy, no loop over
    records)."""
    n = len(payloads)
    _, offsets_buffer, data_buffer = payloads.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=n + 1, offset=payloads.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    sizes = np.diff(offsets)
    zigzag = sizes << 1
    varint_len = np.ones(n, np.int64)
    for shift in (7, 14, 21, 28, 35):
        varint_len += zigzag >= (1 << shift)
    block_len = 1 + varint_len + sizes + len(SYNC_MARKER)
    starts = np.zeros(n, np.int64)
    np.cumsum(block_len[:-1], out=starts[1:])
    out = np.empty(int(block_len.sum()), np.uint8)
    out[starts] = 2  # zig-zag 1: one datum in the block
    for j in range(int(varint_len.max())):
        rows = np.flatnonzero(varint_len > j)
        byte = (zigzag[rows] >> (7 * j)) & 0x7F
        more = varint_len[rows] > j + 1
        out[starts[rows] + 1 + j] = (byte | (more.astype(np.int64) << 7)).astype(np.uint8)
    payload_starts = starts + 1 + varint_len
    total = int(sizes.sum())
    if total:
        first, last = int(offsets[0]), int(offsets[-1])
        shift = np.repeat(payload_starts - (offsets[:-1] - first), sizes)
        out[np.arange(total, dtype=np.int64) + shift] = data[first:last]
    sync = np.frombuffer(SYNC_MARKER, np.uint8)
    sync_starts = payload_starts + sizes
    out[(sync_starts[:, None] + np.arange(len(sync))).ravel()] = np.tile(sync, n)
    return out


class AvroDecoder(RegistryDecoder):
    """``avro`` and ``debezium-avro``: Confluent-framed Avro datums."""
    schema_type = "AVRO"

    def value_schema(self, registered: RegisteredSchema) -> pa.Schema:
        try:
            return record_schema(json.loads(registered.text))
        except (UnsupportedAvroType, ValueError) as e:
            raise BadChangeEvent(f"schema id {registered.schema_id}: {e}") from None

    def _writer(self, schema_id: int) -> RegisteredSchema:
        registered = self.writer_schema(schema_id)
        if registered.schema_type != "AVRO":
            raise BadChangeEvent(f"schema id {schema_id} is a {registered.schema_type} schema, not Avro")
        if registered.references:
            raise BadChangeEvent(f"schema id {schema_id}: Avro schema references are not supported")
        return registered

    def _read_group(self, schema_id: int, payloads: pa.BinaryArray) -> pa.Table:
        registered = self._writer(schema_id)
        parsed = json.loads(registered.text)
        try:
            arrow_type = avro_field(parsed).type
        except UnsupportedAvroType as e:
            raise BadChangeEvent(f"schema id {schema_id}: {e}") from None
        if not pa.types.is_struct(arrow_type):
            raise BadChangeEvent(f"schema id {schema_id}: a value schema must be an Avro record")
        if len(payloads) < SMALL_GROUP:
            return self._read_one_by_one(schema_id, parsed, payloads, pa.schema(list(arrow_type)))
        container = container_header(json.dumps(inline_named_types(parsed))) + container_blocks(payloads).tobytes()
        try:
            frame = pl.read_avro(io.BytesIO(container))
        except (PanicException, Exception):
            # find and name the datum at fault (this batch is then re-read record by record)
            self._read_one_by_one(schema_id, parsed, payloads, pa.schema(list(arrow_type)))
            raise BadChangeEvent(f"schema id {schema_id}: the batch does not decode") from None
        if frame.height != len(payloads):
            raise BadChangeEvent(f"schema id {schema_id}: {len(payloads)} datums decoded into {frame.height} rows")
        return frame.to_arrow()

    def _read_one_by_one(self, schema_id: int, parsed, payloads: pa.BinaryArray, schema: pa.Schema) -> pa.Table:
        writer = fastavro.parse_schema(parsed)
        rows = []
        for payload in payloads.to_pylist():
            try:
                rows.append(fastavro.schemaless_reader(io.BytesIO(payload), writer, None))
            except Exception as e:
                raise BadChangeEvent(f"schema id {schema_id}: Avro datum does not decode: "
                                     f"{type(e).__name__}: {e}".splitlines()[0]) from None
        try:
            return pa.Table.from_pylist(rows, schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise BadChangeEvent(f"schema id {schema_id}: {e}") from None

    def decode(self, values: pa.Array, read_schema: pa.Schema) -> Decoded:
        try:
            framed = split_framed(values)
        except BadFraming as e:
            raise BadChangeEvent(str(e)) from None
        ids = framed.schema_ids
        unique = np.unique(ids)
        parts, order = [], []
        for schema_id in unique.tolist():
            rows = np.flatnonzero(ids == schema_id) if len(unique) > 1 else None
            payloads = framed.payloads if rows is None else framed.payloads.take(pa.array(rows))
            try:
                parts.append(conform_to(self._read_group(schema_id, payloads), read_schema))
            except SchemaConflict as e:
                raise BadChangeEvent(f"schema id {schema_id}: {e}") from None
            if rows is not None:
                order.append(rows)
        if not parts:
            return Decoded(read_schema.empty_table())
        table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        if order:
            # rows are grouped by schema id; put them back in Kafka order
            table = table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))
        return Decoded(table, frozenset(int(i) for i in unique.tolist()))
