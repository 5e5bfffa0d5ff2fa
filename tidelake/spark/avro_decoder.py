"""Avro record values in Confluent's wire format -> Arrow, a batch at once.

The values of a batch are grouped by schema id. Each group's payloads (schemaless Avro datums, the bytes a
Confluent ``AvroSerializer`` writes after the 5-byte header) become an in-memory Avro object container file —
the writer schema in its header (named types inlined: polars resolves no names), the payloads' Arrow data
buffer as its one block — read by polars' Avro reader (Rust) into Arrow columns: no Python object per record.
(One block per datum would keep each datum in its bounds, but costs polars ~50 us a block: 50x slower.) Back
to back, a payload with trailing bytes would shift the datums after it, so each datum's encoded size is
computed back from its decoded values (avro_sizes.py) and must equal its payload's length. The groups are
made to the reader's schema (read_schema.py) and put back in the values' order.

A group too small to be worth a file, one whose sizes do not check out, or one that does not decode is read
with fastavro's ``schemaless_reader`` datum by datum, which also names what is wrong with a bad datum.
"""
from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import numpy as np
import polars as pl
import pyarrow as pa
from polars.exceptions import PanicException

from tidelake.spark.avro_sizes import encoded_sizes
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


def container_block(payloads: pa.BinaryArray) -> bytes:
    """The container's one data block: the datum count, the byte size, the datums back to back (the payloads'
    Arrow data buffer as it is), the sync marker."""
    _, offsets_buffer, data_buffer = payloads.buffers()
    n = len(payloads)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=n + 1, offset=payloads.offset * 4)
    first, last = int(offsets[0]), int(offsets[-1])
    data = data_buffer.slice(first, last - first).to_pybytes() if data_buffer is not None and last > first else b""
    return _zigzag_varint(n) + _zigzag_varint(last - first) + data + SYNC_MARKER


def _uuids_as_strings(schema: Any) -> Any:
    """The schema without the ``uuid`` logical type (fastavro would return uuid.UUID objects; the column is a
    string, as polars reads it)."""
    if isinstance(schema, list):
        return [_uuids_as_strings(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("logicalType") == "uuid":
        return {k: v for k, v in schema.items() if k != "logicalType"}
    out = dict(schema)
    if "fields" in out:
        out["fields"] = [{**f, "type": _uuids_as_strings(f["type"])} for f in out["fields"]]
    for key in ("items", "values", "type"):
        if isinstance(out.get(key), (dict, list)):
            out[key] = _uuids_as_strings(out[key])
    return out


def _has_map(schema: Any) -> bool:
    if isinstance(schema, list):
        return any(_has_map(s) for s in schema)
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "map":
        return True
    return any(_has_map(f["type"]) for f in schema.get("fields", ())) or any(
        _has_map(schema[k]) for k in ("items", "values", "type") if isinstance(schema.get(k), (dict, list)))


def _offsets(payloads: pa.BinaryArray) -> np.ndarray:
    return np.frombuffer(payloads.buffers()[1], dtype=np.int32, count=len(payloads) + 1,
                         offset=payloads.offset * 4).astype(np.int64)


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
        if len(payloads) < SMALL_GROUP or _has_map(parsed):   # polars reads no Avro maps
            return self._read_one_by_one(schema_id, parsed, payloads, pa.schema(list(arrow_type)))
        container = container_header(json.dumps(inline_named_types(parsed))) + container_block(payloads)
        try:
            decoded = pl.read_avro(io.BytesIO(container)).to_arrow()
        except (PanicException, Exception):
            decoded = None
        if decoded is not None and decoded.num_rows == len(payloads):
            sizes = encoded_sizes(pa.Table.to_struct_array(decoded).combine_chunks(), parsed)
            if sizes is not None and np.array_equal(sizes, np.diff(_offsets(payloads))):
                return decoded
        # a datum that does not decode, trailing bytes, or sizes the values cannot tell: datum by datum
        # (which also names the datum at fault)
        return self._read_one_by_one(schema_id, parsed, payloads, pa.schema(list(arrow_type)))

    def _read_one_by_one(self, schema_id: int, parsed, payloads: pa.BinaryArray, schema: pa.Schema) -> pa.Table:
        writer = fastavro.parse_schema(_uuids_as_strings(parsed))
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
