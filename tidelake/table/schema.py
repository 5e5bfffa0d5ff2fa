"""Parse Spark/MaxCompute-style schema strings: ``"id long, name string, price decimal(10,2)"``."""
from __future__ import annotations

import re
from typing import Sequence

import pyarrow as pa

from .errors import SchemaError

_SIMPLE = {
    "long": pa.int64(), "bigint": pa.int64(), "int": pa.int32(), "integer": pa.int32(),
    "short": pa.int16(), "smallint": pa.int16(), "byte": pa.int8(), "tinyint": pa.int8(),
    "double": pa.float64(), "float": pa.float32(), "real": pa.float32(),
    "string": pa.string(), "varchar": pa.string(), "boolean": pa.bool_(), "bool": pa.bool_(),
    "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


def parse_type(s: str) -> pa.DataType:
    s = s.strip().lower()
    m = re.fullmatch(r"decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)", s)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    if s in _SIMPLE:
        return _SIMPLE[s]
    raise SchemaError(f"unknown type {s!r} (known: {', '.join(sorted(_SIMPLE))}, decimal(p,s))")


def parse_schema(ddl: str) -> pa.Schema:
    """``"id long, amount long"`` -> pa.schema. Commas inside parentheses do not split fields."""
    fields, depth, cur = [], 0, ""
    for ch in ddl + ",":
        if ch == "," and depth == 0:
            if cur.strip():
                parts = cur.strip().split(None, 1)
                if len(parts) != 2:
                    raise SchemaError(f"field {cur.strip()!r} needs a name and a type")
                fields.append(pa.field(parts[0].strip("`"), parse_type(parts[1])))
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if not fields:
        raise SchemaError("empty schema")
    return pa.schema(fields)


def schema_mismatch(table_schema: pa.Schema, table_key: Sequence[str], wanted: pa.Schema,
                    wanted_key: Sequence[str]) -> tuple[list[str], list[pa.Field]]:
    """How a table differs from the schema and primary key a writer expects: (problems, addable).

    ``addable`` are the writer's columns the table lacks, in order: adding them as nullable columns
    is the one evolution that changes no existing row. ``problems`` is everything else, one line
    each: a different key, a column of another type, a table column the writer does not know."""
    problems: list[str] = []
    if wanted_key and list(wanted_key) != list(table_key):
        problems.append(f"primary key is ({', '.join(table_key)}), the config says ({', '.join(wanted_key)})")
    have = {f.name: f for f in table_schema}
    addable = []
    for f in wanted:
        if f.name not in have:
            addable.append(f)
        elif not have[f.name].type.equals(f.type):
            problems.append(f"column {f.name} is {have[f.name].type} in the table, {f.type} in the config")
    known = set(wanted.names)
    for f in table_schema:
        if f.name not in known:
            problems.append(f"column {f.name} ({f.type}) is in the table, not in the config")
    return problems, addable
