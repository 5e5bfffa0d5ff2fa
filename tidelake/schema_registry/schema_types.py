"""What the registry needs from a schema type (AVRO, PROTOBUF, JSON), and the types it serves.

A type parses a schema text with its references into a ``ParsedSchema`` (refusing an invalid one with
``InvalidSchema``), gives the canonical text that identity is decided on (registering the same schema twice
returns the same id), and lists why a reader schema cannot read what a writer schema wrote (compatibility).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol


class InvalidSchema(ValueError):
    """The schema text is not a valid schema of its type; the message says why."""


@dataclass(frozen=True)
class ParsedSchema:
    schema_type: str
    canonical: str           # the text compared: equal canonical texts are the same schema
    stored: str              # the text kept in _schemas and answered (the canonical one, or a .proto as written)
    parsed: Any              # the type's own object (avro Schema, FileDescriptorProto, JSON document)


class SchemaType(Protocol):
    name: str

    def parse(self, schema: str, references: Mapping[str, str]) -> ParsedSchema:
        """``references``: every schema this one refers to (transitively), by reference name, in dependency
        order (a reference's own references come before it)."""

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        """Why ``reader`` cannot read data written with ``writer`` (empty: it can)."""

    def answered_as_stored(self, stored: str, fmt: str | None) -> bool:
        """Whether the stored text is the answer for ``?format=fmt`` (else ``formatted`` makes it)."""

    def formatted(self, parsed: ParsedSchema, fmt: str | None) -> str:
        """The schema text for ``?format=`` (``serialized`` for Protobuf: a base64 FileDescriptorProto)."""
