"""Plain JSON record values, a batch at once, with pyarrow's JSON reader (no Python work per record).

The values are joined into one newline-delimited buffer and read with an explicit schema (the reader's
columns); fields the schema does not name are ignored, missing ones are null. Times and dates arrive as
numbers (epoch units, as Debezium's JSON converter sends them) and are read as integers (or, for JSON Schema's
``date`` / ``date-time`` formats, as text), cast to the table's types afterwards. A value that is the JSON ``null`` carries no row
(``Decoded.present`` is false for it), like a tombstone.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from tidelake.spark.decode_errors import BadChangeEvent
from tidelake.spark.value_decoder import Decoded, ValueDecoder


def json_type(t: pa.DataType, times_as_text: bool = False) -> pa.DataType:
    """The type the JSON reader fills for a column of type ``t``: a temporal one as its epoch integer, or with
    ``times_as_text`` as a string (ISO 8601, cast afterwards)."""
    if pa.types.is_temporal(t):
        if times_as_text:
            return pa.string()
        return pa.int32() if t.bit_width == 32 else pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, json_type(f.type, times_as_text)) for f in t])
    return t


def json_texts(values: pa.Array) -> tuple[pa.Array, pa.Array | None]:
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


def read_objects(texts: pa.Array, read_schema: pa.Schema) -> pa.Table:
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


def scatter(table: pa.Table, present: pa.Array, schema: pa.Schema) -> pa.Table:
    """``table``'s rows placed at the true positions of ``present``, null rows elsewhere."""
    positions = np.cumsum(np.asarray(present.to_numpy(zero_copy_only=False), dtype=np.int64)) - 1
    indices = pa.array(positions, pa.int64())
    indices = pc.if_else(present, indices, pa.scalar(None, pa.int64()))
    return table.take(indices).cast(schema)


class JsonDecoder(ValueDecoder):
    """Schemaless JSON objects (``json``, ``debezium-json``): times as epoch numbers; with ``times_as_text``
    as ISO 8601 strings (JSON Schema's ``date`` / ``date-time`` formats)."""

    def __init__(self, times_as_text: bool = False):
        self.times_as_text = times_as_text

    def decode(self, values: pa.Array, read_schema: pa.Schema) -> Decoded:
        texts, present = json_texts(values)
        schema = pa.schema([pa.field(f.name, json_type(f.type, self.times_as_text)) for f in read_schema])
        parsed = read_objects(texts, schema)
        if present is None:
            return Decoded(parsed)
        return Decoded(scatter(parsed, present, schema), present=present)

    def __reduce__(self):
        return JsonDecoder, (self.times_as_text,)
