"""The one interface of every value encoding the pipeline reads: a batch of Kafka record values in, an Arrow
table out.

``decode(values, read_schema)``: the values (binary, no nulls, in Kafka order) -> a table of exactly
``read_schema``'s columns (in the encoding's types where it cannot hold the table's: JSON's epoch numbers for
times), one row per value, in the same order; a value that does not decode raises
BadChangeEvent (the caller locates it). ``schema_ids`` of the result are the registered schemas the batch
was written with (none for schemaless JSON): the driver adds the columns they carry to the table.
``value_schema(registered)`` is the table schema of a registered value schema (each of its fields a column),
for creating a sink table and for schema evolution; schemaless encodings have none.

Implementations: json_decoder.py (plain JSON text), json_schema_decoder.py, avro_decoder.py,
protobuf_decoder.py. Each pickles small (its settings only): Spark ships it to the tasks, where the schemas
it needs are fetched once per process (registered_schemas.py).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import pyarrow as pa

from tidelake.spark.registered_schemas import RegisteredSchema, RegisteredSchemas


@dataclass(frozen=True)
class Decoded:
    table: pa.Table
    schema_ids: frozenset[int] = frozenset()
    present: pa.Array | None = None  # false where a value carries no row (a JSON ``null``); None: all carry one


class ValueDecoder(ABC):
    #: the registry's schema type this decoder reads (AVRO, PROTOBUF, JSON), None when schemaless
    schema_type: str | None = None
    #: the format in which to ask the registry for schemas (``serialized``: Protobuf descriptors)
    registry_format: str | None = None

    @abstractmethod
    def decode(self, values: pa.Array, read_schema: pa.Schema) -> Decoded:
        """Values -> ``read_schema``'s columns, one row per value, in order."""

    def value_schema(self, registered: RegisteredSchema) -> pa.Schema:
        """The table schema of a registered value schema (registry-backed decoders only)."""
        raise TypeError(f"{type(self).__name__} reads no registered schemas")


class RegistryDecoder(ValueDecoder):
    """A decoder of Confluent's wire format: schemas by id from the registry."""

    def __init__(self, registry: RegisteredSchemas):
        self.registry = registry

    def __reduce__(self):
        return type(self), (self.registry,)

    def writer_schema(self, schema_id: int) -> RegisteredSchema:
        return self.registry.by_id(schema_id, self.registry_format)
