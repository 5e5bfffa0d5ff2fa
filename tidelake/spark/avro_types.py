"""Avro schemas -> Arrow types of table columns (the Avro specification's types and logical types).

- primitives: null, boolean, int -> int32, long -> int64, float, double, bytes -> binary, string;
- logical types: decimal (bytes or fixed) -> decimal128(precision, scale), date -> date32, time-millis ->
  time32[ms], time-micros -> time64[us], timestamp-millis / timestamp-micros -> timestamp[us, UTC] (the table's
  one timestamp type), local-timestamp-* -> timestamp[us], uuid -> string; an unknown logical type is its
  underlying type, as the specification says;
- a union of null and one type -> that type, nullable; other unions are refused (no table column holds them);
- record -> struct, enum -> string, array -> list, map -> map<string, V>, fixed -> fixed_size_binary.

``record_schema`` maps a record's fields to a table schema (the columns of a sink table created from a
registered schema); every column is nullable there (the table makes its primary key not null).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa


class UnsupportedAvroType(ValueError):
    """An Avro type no table column can hold."""


PRIMITIVES = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
              "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(), "null": pa.null()}
TIMESTAMP = pa.timestamp("us", tz="UTC")
LOCAL_TIMESTAMP = pa.timestamp("us")
LOGICAL = {"date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
           "timestamp-millis": TIMESTAMP, "timestamp-micros": TIMESTAMP, "timestamp-nanos": TIMESTAMP,
           "local-timestamp-millis": LOCAL_TIMESTAMP, "local-timestamp-micros": LOCAL_TIMESTAMP,
           "uuid": pa.string()}
MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True)
class AvroField:
    """A field's Arrow type and whether it may be null (a union with null)."""
    type: pa.DataType
    nullable: bool


def named_type(schema: Any, names: dict[str, Any], namespace: str | None) -> Any:
    """Resolve a reference to a named type defined earlier in the schema."""
    if isinstance(schema, str) and schema not in PRIMITIVES:
        full = schema if "." in schema or namespace is None else f"{namespace}.{schema}"
        for candidate in (full, schema):
            if candidate in names:
                return names[candidate]
        raise UnsupportedAvroType(f"unknown Avro type name {schema!r}")
    return schema


def remember_name(schema: dict, names: dict[str, Any], namespace: str | None) -> str | None:
    name = schema.get("name")
    ns = schema.get("namespace", namespace)
    if name:
        full = name if "." in name or not ns else f"{ns}.{name}"
        names[full] = schema
        names.setdefault(name, schema)
        if "." in full:
            ns = full.rsplit(".", 1)[0]
    return ns


def avro_field(schema: Any, names: dict[str, Any] | None = None, namespace: str | None = None) -> AvroField:
    """The Arrow type of an Avro schema (a parsed JSON value) and whether it admits null."""
    names = {} if names is None else names
    schema = named_type(schema, names, namespace)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise UnsupportedAvroType(f"union {schema!r}: only a union of null and one type maps to a column")
        return AvroField(avro_field(branches[0], names, namespace).type, "null" in schema)
    if isinstance(schema, str):
        if schema == "null":
            return AvroField(pa.null(), True)
        return AvroField(PRIMITIVES[schema], False)
    if not isinstance(schema, dict) or "type" not in schema:
        raise UnsupportedAvroType(f"not an Avro schema: {schema!r}")
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if precision > MAX_DECIMAL_PRECISION:
            raise UnsupportedAvroType(f"decimal({precision}, {scale}): at most {MAX_DECIMAL_PRECISION} digits")
        if kind == "fixed":
            remember_name(schema, names, namespace)
        return AvroField(pa.decimal128(precision, scale), False)
    if logical in LOGICAL and not isinstance(kind, (dict, list)):
        if kind in ("fixed", "enum", "record"):
            remember_name(schema, names, namespace)
        return AvroField(LOGICAL[logical], False)
    if kind == "record" or kind == "error":
        ns = remember_name(schema, names, namespace)
        # nested fields stay nullable in Arrow: a null record (a Debezium delete's 'after') has null children
        fields = [pa.field(f["name"], avro_field(f["type"], names, ns).type) for f in schema["fields"]]
        return AvroField(pa.struct(fields), False)
    if kind == "enum":
        remember_name(schema, names, namespace)
        return AvroField(pa.string(), False)
    if kind == "fixed":
        remember_name(schema, names, namespace)
        return AvroField(pa.binary(int(schema["size"])), False)
    if kind == "array":
        item = avro_field(schema["items"], names, namespace)
        return AvroField(pa.list_(pa.field("element", item.type)), False)
    if kind == "map":
        value = avro_field(schema["values"], names, namespace)
        return AvroField(pa.map_(pa.string(), pa.field("value", value.type)), False)
    # {"type": "long"} and the like: a primitive (its logical type, if any, unknown to us)
    return avro_field(kind, names, namespace)


def inline_named_types(schema: Any, names: dict[str, Any] | None = None, namespace: str | None = None) -> Any:
    """The schema with every reference to a named type replaced by a copy of its definition (the same datum
    layout), for readers that do not resolve names (polars' Avro reader)."""
    names = {} if names is None else names
    if isinstance(schema, str):
        return named_type(schema, names, namespace) if schema not in PRIMITIVES else schema
    if isinstance(schema, list):
        return [inline_named_types(b, names, namespace) for b in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in ("record", "error", "enum", "fixed"):
        ns = remember_name(schema, names, namespace)
        if kind in ("record", "error"):
            out = {**schema, "fields": [{**f, "type": inline_named_types(f["type"], names, ns)}
                                        for f in schema["fields"]]}
            names[(ns + "." if ns and "." not in schema["name"] else "") + schema["name"]] = out
            names[schema["name"]] = out
            return out
        return schema
    if kind == "array":
        return {**schema, "items": inline_named_types(schema["items"], names, namespace)}
    if kind == "map":
        return {**schema, "values": inline_named_types(schema["values"], names, namespace)}
    if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in PRIMITIVES):
        return inline_named_types(kind, names, namespace)
    return schema


def record_schema(schema: Any) -> pa.Schema:
    """The table schema of an Avro record: one column per field."""
    struct = avro_field(schema).type
    if not pa.types.is_struct(struct):
        raise UnsupportedAvroType(f"a table is made from an Avro record, not {schema!r}")
    return pa.schema(list(struct))
