"""``sink.schema``, Spark SQL's DDL column list (``"id long, amount decimal(10,2)"``), parsed without a JVM.

A typo (``region strng``) is then one line when the file is checked, not a ``ParseException`` 15 s later once
Spark has started. The grammar is Spark's own (``SqlBaseParser.colType`` / ``dataType``: names case-insensitive,
``name[:] type [NOT NULL] [COMMENT '...']``, nested ``array<T>``, ``map<K, V>``, ``struct<name: T, ...>``) cut to
the types a table can hold: Spark's which pyspark converts to Arrow (``to_arrow_schema``), less those the table
has no column type for (char/varchar, intervals, time, void, variant, geometry, collations). The Arrow schema it
returns is the one ``to_arrow_schema`` gives, timestamps in UTC as the table keeps them; tests/pipeline/
test_ddl_schema.py checks both against a Spark session for a list of samples. No pyspark imports.
"""
from __future__ import annotations

import re

import pyarrow as pa

MAX_DECIMAL_PRECISION = 38  # Spark's DecimalType.MAX_PRECISION (and Arrow's decimal128)
DEFAULT_DECIMAL = (10, 0)   # Spark: a bare "decimal" is decimal(10,0)

PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "tinyint": pa.int8(), "byte": pa.int8(),
    "smallint": pa.int16(), "short": pa.int16(),
    "int": pa.int32(), "integer": pa.int32(),
    "bigint": pa.int64(), "long": pa.int64(),
    "float": pa.float32(), "real": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ltz": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
DECIMALS = ("decimal", "dec", "numeric")
VALID_TYPES = ("boolean, tinyint, smallint, int, bigint, float, double, decimal(p,s) (p 1-38, s 0-p), string, "
               "binary, date, timestamp, timestamp_ntz, array<T>, map<K,V>, struct<name: T, ...>")

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(\w+)|(<>|.))", re.S)


class DdlError(ValueError):
    """A column list Spark would refuse, or holding a type a table cannot store."""


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:  # trailing whitespace
                break
            self.tokens.append(m.group(0).strip())
            pos = m.end()
        self.tokens = [t for t in self.tokens if t]
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise DdlError("ends too early")
        self.at += 1
        return token

    def expect(self, token: str, after: str) -> None:
        got = self.peek()
        if got is None or got.lower() != token:
            raise DdlError(f"expected '{token}' after {after}, got {_shown(got)}")
        self.at += 1

    def name(self, what: str) -> str:
        token = self.peek()
        if token is None or not (token.startswith("`") or re.fullmatch(r"\w+", token)):
            raise DdlError(f"expected {what}, got {_shown(token)}")
        self.at += 1
        return token[1:-1].replace("``", "`") if token.startswith("`") else token

    def column(self, inside: str) -> pa.Field:
        """``name[:] type [NOT NULL] [COMMENT '...']``."""
        name = self.name(f"a column name{inside}")
        if self.peek() == ":":
            self.at += 1
        if self.peek() in (None, ",", ">"):
            raise DdlError(f"column {name}{inside}: no type (valid types: {VALID_TYPES})")
        try:
            kind = self.data_type()
        except DdlError as e:
            raise DdlError(f"column {name}{inside}: {e}") from None
        nullable = True
        if (self.peek() or "").lower() == "not":
            self.at += 1
            self.expect("null", f"column {name}'s NOT")
            nullable = False
        if (self.peek() or "").lower() == "comment":
            self.at += 1
            token = self.peek()
            if token is None or token[0] not in "'\"":
                raise DdlError(f"column {name}{inside}: COMMENT needs a quoted string, got {_shown(token)}")
            self.at += 1
        return pa.field(name, kind, nullable=nullable)

    def data_type(self) -> pa.DataType:
        token = self.take()
        word = token.lower()
        if word == "array":
            self.expect("<", "array")
            item = self.data_type()
            self.expect(">", "array<...")
            return pa.list_(pa.field("element", item))
        if word == "map":
            self.expect("<", "map")
            key = self.data_type()
            self.expect(",", "map<KEY")
            value = self.data_type()
            self.expect(">", "map<KEY, VALUE")
            return pa.map_(pa.field("key", key, nullable=False), pa.field("value", value))
        if word == "struct":
            if self.peek() == "<>":  # Spark's lexer reads struct<> as struct NEQ
                self.at += 1
                return pa.struct([])
            self.expect("<", "struct")
            fields: list[pa.Field] = []
            while self.peek() != ">":
                if fields:
                    self.expect(",", "a struct field")
                fields.append(self.column(" in struct<...>"))
            self.at += 1
            _no_duplicates(fields, "struct<...>")
            return pa.struct(fields)
        if word in DECIMALS:
            precision, scale = self.decimal_arguments(word)
            return pa.decimal128(precision, scale)
        if word in PRIMITIVES:
            if self.peek() == "(":
                raise DdlError(f"{word} takes no arguments")
            return PRIMITIVES[word]
        raise DdlError(f"unknown type '{token}' (valid types: {VALID_TYPES})")

    def decimal_arguments(self, word: str) -> tuple[int, int]:
        if self.peek() != "(":
            return DEFAULT_DECIMAL
        self.at += 1
        args = [self.integer(word)]
        if self.peek() == ",":
            self.at += 1
            args.append(self.integer(word))
        self.expect(")", f"{word}(...")
        precision, scale = args[0], args[1] if len(args) > 1 else 0
        if not 1 <= precision <= MAX_DECIMAL_PRECISION:
            raise DdlError(f"{word}({', '.join(map(str, args))}): precision must be 1 to {MAX_DECIMAL_PRECISION}")
        if scale > precision:
            raise DdlError(f"{word}({precision}, {scale}): scale must be 0 to the precision {precision}")
        return precision, scale

    def integer(self, word: str) -> int:
        token = self.take()
        if not token.isdigit():
            raise DdlError(f"{word}(...): expected a whole number, got {_shown(token)}")
        return int(token)


def _shown(token: str | None) -> str:
    return "the end" if token is None else repr(token)


def _no_duplicates(fields: list[pa.Field], where: str) -> None:
    seen: set[str] = set()
    for f in fields:
        if f.name.lower() in seen:  # Spark's column names are case-insensitive
            raise DdlError(f"column {f.name} twice in {where}")
        seen.add(f.name.lower())


def parse_ddl_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a Spark DDL column list; a DdlError names the column and the bad type."""
    parser = _Parser(ddl)
    fields: list[pa.Field] = []
    while parser.peek() is not None:
        if fields:
            parser.expect(",", f"column {fields[-1].name}'s type")
        fields.append(parser.column(""))
    if not fields:
        raise DdlError("no columns")
    _no_duplicates(fields, "the schema")
    return pa.schema(fields)
