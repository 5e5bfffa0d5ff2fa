"""AVRO schemas, parsed and checked with Apache Avro's Python library (``avro.schema``, ``avro.compatibility``:
the reader/writer resolution rules of the Avro specification)."""
from __future__ import annotations

import copy
import json
from typing import Mapping

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from tidelake.schema_registry.schema_types import InvalidSchema, ParsedSchema


class AvroType:
    name = "AVRO"

    def parse(self, schema: str, references: Mapping[str, str]) -> ParsedSchema:
        names = avro.name.Names()
        try:
            for ref_name, ref_schema in references.items():   # named types the schema may use by name
                avro.schema.make_avsc_object(json.loads(ref_schema), names)
            referenced = copy.deepcopy(names)
            parsed = avro.schema.make_avsc_object(json.loads(schema), names)
        except json.JSONDecodeError as e:
            raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None
        except (avro.errors.AvroException, TypeError, KeyError, AttributeError) as e:
            raise InvalidSchema(f"Invalid schema {schema}: {e}") from None
        canonical = json.dumps(parsed.to_json(referenced), separators=(",", ":"))
        return ParsedSchema(self.name, canonical, canonical, parsed)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(reader.parsed, writer.parsed)
        if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
            return []
        kinds = [k.value.upper() for k in result.incompatibilities]
        return [f"{{errorType:'{kind}', description:'The new schema cannot read data written by the old one "
                f"({', '.join(sorted(map(str, result.messages)))})', location:'{', '.join(sorted(result.locations))}'}}"
                for kind in kinds]

    def answered_as_stored(self, stored: str, fmt: str | None) -> bool:
        return True

    def formatted(self, parsed: ParsedSchema, fmt: str | None) -> str:
        return parsed.canonical
