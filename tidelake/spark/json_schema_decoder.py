"""JSON record values in Confluent's wire format (a ``JSONSerializer``'s) -> Arrow.

The 5-byte header is cut off with Arrow (wire_format.py) and the JSON texts are read as plain JSON
(json_decoder.py: pyarrow's JSON reader, a batch at once) into the reader's schema; the registered JSON
Schema gives the table's columns (json_schema_types.py). Values are not validated against the schema again:
the serializer validated them when they were produced.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from tidelake.spark.decode_errors import BadChangeEvent
from tidelake.spark.json_decoder import JsonDecoder
from tidelake.spark.json_schema_types import UnsupportedJsonSchema, object_schema
from tidelake.spark.registered_schemas import RegisteredSchema
from tidelake.spark.value_decoder import Decoded, RegistryDecoder
from tidelake.spark.wire_format import BadFraming, split_framed


class JsonSchemaDecoder(RegistryDecoder):
    """``json-schema`` and ``debezium-json-schema``."""
    schema_type = "JSON"

    def value_schema(self, registered: RegisteredSchema) -> pa.Schema:
        try:
            return object_schema(json.loads(registered.text))
        except (UnsupportedJsonSchema, ValueError) as e:
            raise BadChangeEvent(f"schema id {registered.schema_id}: {e}") from None

    def decode(self, values: pa.Array, read_schema: pa.Schema) -> Decoded:
        try:
            framed = split_framed(values)
        except BadFraming as e:
            raise BadChangeEvent(str(e)) from None
        ids = frozenset(int(i) for i in np.unique(framed.schema_ids).tolist())
        for schema_id in ids:   # an unknown id is a bad record, even though JSON decodes without it
            registered = self.writer_schema(schema_id)
            if registered.schema_type != "JSON":
                raise BadChangeEvent(f"schema id {schema_id} is a {registered.schema_type} schema, not JSON")
        decoded = JsonDecoder(times_as_text=True).decode(framed.payloads, read_schema)
        return Decoded(decoded.table, ids, decoded.present)
