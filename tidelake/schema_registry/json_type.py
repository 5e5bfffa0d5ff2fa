"""JSON Schema schemas: validity by ``jsonschema`` (the metaschema of the schema's ``$schema`` draft).

No library compares two JSON Schemas, so compatibility is written here, after the rules of Confluent's
``JsonSchemaDiff`` that matter in practice: can everything the writer schema accepts be read by the reader
schema? Types may only widen (integer -> number), enums only grow, a property the writer's open content model
could hold may not appear in the reader, a closed reader may not lose a writer's property, a reader may not
newly require a property, and string/number/array bounds may only loosen. Constructs it does not compare
(``allOf``/``anyOf``/``oneOf`` changes, ``$ref`` targets) count as compatible only when unchanged.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from tidelake.schema_registry.schema_types import InvalidSchema, ParsedSchema

_ACCEPTED_AS = {"integer": {"integer", "number"}}     # a writer's integer is read by a reader's number
_LOWER_BOUNDS = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_UPPER_BOUNDS = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_COMBINERS = ("allOf", "anyOf", "oneOf", "not", "$ref")


class JsonType:
    name = "JSON"

    def parse(self, schema: str, references: Mapping[str, str]) -> ParsedSchema:
        try:
            document = json.loads(schema)
        except json.JSONDecodeError as e:
            raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None
        if not isinstance(document, (dict, bool)):
            raise InvalidSchema(f"Invalid schema {schema}: a JSON Schema is an object or a boolean")
        for ref_name, ref_schema in references.items():
            try:
                json.loads(ref_schema)
            except json.JSONDecodeError as e:
                raise InvalidSchema(f"Invalid reference {ref_name}: not JSON: {e}") from None
        try:
            jsonschema.validators.validator_for(document).check_schema(document)
        except jsonschema.exceptions.SchemaError as e:
            raise InvalidSchema(f"Invalid schema {schema}: {e.message}") from None
        canonical = json.dumps(document, separators=(",", ":"))
        return ParsedSchema(self.name, canonical, canonical, document)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        problems: list[str] = []
        _compare(reader.parsed, writer.parsed, "#", problems)
        return problems

    def answered_as_stored(self, stored: str, fmt: str | None) -> bool:
        return True

    def formatted(self, parsed: ParsedSchema, fmt: str | None) -> str:
        return parsed.canonical


def _types(schema: dict) -> set[str] | None:
    t = schema.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _is_open(schema: dict) -> bool:
    return schema.get("additionalProperties", True) is not False


def _compare(reader: Any, writer: Any, where: str, problems: list[str]) -> None:
    if reader is True or reader == {}:
        return
    if writer is True or writer == {} or reader is False:
        if reader != writer:
            problems.append(f"{where}: the reader accepts less than the writer (TYPE_NARROWED)")
        return
    if writer is False:
        return
    reader_types, writer_types = _types(reader), _types(writer)
    if reader_types is not None:
        if writer_types is None:
            problems.append(f"{where}: type {sorted(reader_types)} added (TYPE_NARROWED)")
        else:
            lost = {t for t in writer_types if not (_ACCEPTED_AS.get(t, {t}) & reader_types)}
            if lost:
                problems.append(f"{where}: type {sorted(lost)} no longer accepted (TYPE_CHANGED)")
    if "enum" in reader:
        if "enum" not in writer or not all(v in reader["enum"] for v in writer["enum"]):
            problems.append(f"{where}: enum values removed (ENUM_ARRAY_NARROWED)")
    if "const" in reader and reader.get("const") != writer.get("const"):
        problems.append(f"{where}: const changed (CONST_CHANGED)")
    for bound in _LOWER_BOUNDS:
        if bound in reader and (bound not in writer or reader[bound] > writer[bound]):
            problems.append(f"{where}: {bound} raised (TYPE_NARROWED)")
    for bound in _UPPER_BOUNDS:
        if bound in reader and (bound not in writer or reader[bound] < writer[bound]):
            problems.append(f"{where}: {bound} lowered (TYPE_NARROWED)")
    if reader.get("pattern") is not None and reader.get("pattern") != writer.get("pattern"):
        problems.append(f"{where}: pattern changed (PATTERN_CHANGED)")
    for combiner in _COMBINERS:
        if combiner in reader and reader.get(combiner) != writer.get(combiner):
            problems.append(f"{where}: {combiner} changed (COMBINED_TYPE_CHANGED)")
    _compare_objects(reader, writer, where, problems)
    if isinstance(reader.get("items"), (dict, bool)) and isinstance(writer.get("items"), (dict, bool)):
        _compare(reader["items"], writer["items"], f"{where}/items", problems)
    elif "items" in reader and "items" not in writer:
        problems.append(f"{where}: items constrained (TYPE_NARROWED)")


def _compare_objects(reader: dict, writer: dict, where: str, problems: list[str]) -> None:
    reader_props: dict = reader.get("properties", {})
    writer_props: dict = writer.get("properties", {})
    for name, sub in reader_props.items():
        if name in writer_props:
            _compare(sub, writer_props[name], f"{where}/properties/{name}", problems)
        elif _is_open(writer):
            problems.append(f"{where}/properties/{name}: property added to an open content model "
                            "(PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL)")
    for name in writer_props:
        if name not in reader_props and not _is_open(reader):
            extra = reader.get("additionalProperties")
            if isinstance(extra, dict):
                _compare(extra, writer_props[name], f"{where}/properties/{name}", problems)
            else:
                problems.append(f"{where}/properties/{name}: property removed from a closed content model "
                                "(PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL)")
    newly_required = set(reader.get("required", ())) - set(writer.get("required", ()))
    for name in sorted(newly_required):
        problems.append(f"{where}/required/{name}: required property added (REQUIRED_PROPERTY_ADDED)")
    if not _is_open(writer) or not _is_open(reader):
        reader_extra, writer_extra = reader.get("additionalProperties", True), writer.get("additionalProperties", True)
        if writer_extra is not False and reader_extra is False:
            problems.append(f"{where}: additional properties no longer allowed (ADDITIONAL_PROPERTIES_REMOVED)")
