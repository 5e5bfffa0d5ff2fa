"""JSON Schemas -> Arrow types of table columns.

``type`` integer -> int64, number -> float64, boolean, string -> string (``format`` date -> date32, date-time
-> timestamp[us, UTC]), object with ``properties`` -> struct, array with ``items`` -> list; a ``type`` list
or a ``oneOf`` / ``anyOf`` of null and one type -> that type (nullable). Local ``$ref``s (``#/definitions/X``,
``#/$defs/X``) are followed. Anything else (a free-form object, a union of several types) has no column type.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa


class UnsupportedJsonSchema(ValueError):
    """A JSON Schema no table column can hold."""


STRING_FORMATS = {"date": pa.date32(), "date-time": pa.timestamp("us", tz="UTC")}
SIMPLE = {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}


def _resolve(schema: Any, root: dict) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            raise UnsupportedJsonSchema(f"$ref {ref!r}: only references inside the schema are followed")
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part]
        schema = node
    return schema


def json_schema_type(schema: Any, root: dict | None = None) -> pa.DataType:
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        raise UnsupportedJsonSchema(f"not a JSON Schema: {schema!r}")
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            branches = [b for b in schema[combinator] if _resolve(b, root).get("type") != "null"]
            if len(branches) != 1:
                raise UnsupportedJsonSchema(f"{combinator} of several types has no column type")
            return json_schema_type(branches[0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise UnsupportedJsonSchema(f"type {kind!r} has no column type")
        kind = kinds[0]
    if kind in SIMPLE:
        return SIMPLE[kind]
    if kind == "string":
        return STRING_FORMATS.get(schema.get("format"), pa.string())
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        if not properties:
            raise UnsupportedJsonSchema("an object without properties has no column type")
        return pa.struct([pa.field(name, json_schema_type(p, root)) for name, p in properties.items()])
    if kind == "array":
        return pa.list_(pa.field("element", json_schema_type(schema.get("items", {}), root)))
    raise UnsupportedJsonSchema(f"type {kind!r} has no column type")


def object_schema(schema: dict) -> pa.Schema:
    """The table schema of a JSON Schema object: one column per property."""
    struct = json_schema_type(schema)
    if not pa.types.is_struct(struct):
        raise UnsupportedJsonSchema("a table is made from a JSON Schema object")
    return pa.schema(list(struct))
