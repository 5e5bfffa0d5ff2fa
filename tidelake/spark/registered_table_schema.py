"""The sink table's schema as the schema registry says it (the driver's side of typed ingestion).

With TopicNameStrategy (Confluent's default), a topic's value schemas are the versions of subject
``<topic>-value`` and its key schemas those of ``<topic>-key``:

- a sink table that does not exist is created with the columns of the latest value schema (for a Debezium
  envelope, of its ``after`` record) and keyed by ``sink.primary_key`` or else the fields of the latest key
  schema (a record: Debezium's key is the row's primary key);
- before each batch, ``candidates`` are the latest value schema's columns the table lacks (a compatible
  version adds a field with a default); the batch is decoded and staged with them, and ``carried`` picks
  those a schema the batch's records were written with actually has: the batch's commit adds exactly those,
  so the version that first holds a record of the new schema is the one that first has its columns.

The registry refuses an incompatible version at registration (HTTP 409), so a producer cannot write one
under the subject; a record whose schema does not fit the table's columns anyway (another subject, or
compatibility NONE) fails to decode and is a bad record: never half-applied.
"""
from __future__ import annotations

import pyarrow as pa

from tidelake.spark.decode_errors import BadChangeEvent
from tidelake.spark.value_formats import ValueFormat


class RegistrySchemaError(ValueError):
    """The registry has no usable schema for what the pipeline needs (one line, naming the subject)."""


class RegisteredTableSchema:
    def __init__(self, fmt: ValueFormat, topic: str):
        decoder = fmt.registry_decoder
        if decoder is None:
            raise ValueError(f"format {fmt.name} reads no registered schemas")
        self.format, self.decoder, self.topic = fmt, decoder, topic
        self.value_subject, self.key_subject = f"{topic}-value", f"{topic}-key"
        self._rows_by_id: dict[int, pa.Schema] = {}

    def latest_row_schema(self) -> pa.Schema | None:
        """The table columns of the subject's latest value schema (None: nothing registered yet)."""
        latest = self.decoder.registry.latest(self.value_subject, self.decoder.registry_format)
        if latest is None:
            return None
        return self._row_schema(latest.schema.schema_id)

    def _row_schema(self, schema_id: int) -> pa.Schema:
        found = self._rows_by_id.get(schema_id)
        if found is None:
            registered = self.decoder.writer_schema(schema_id)
            try:
                found = self.format.envelope.row_schema(self.decoder.value_schema(registered))
            except BadChangeEvent as e:
                raise RegistrySchemaError(f"subject {self.value_subject}, schema id {schema_id}: {e.reason}") from None
            self._rows_by_id[schema_id] = found
        return found

    def table_schema(self) -> pa.Schema:
        """The columns of a new sink table: the latest value schema's."""
        schema = self.latest_row_schema()
        if schema is None:
            raise RegistrySchemaError(f"no schema registered under subject {self.value_subject}: the sink table "
                                      f"cannot be created from it (register one, or set sink.schema)")
        return schema

    def key_schema(self) -> pa.Schema:
        """The columns of the latest key schema (a record)."""
        latest = self.decoder.registry.latest(self.key_subject, self.decoder.registry_format)
        if latest is None:
            raise RegistrySchemaError(f"sink.primary_key is not set and no key schema is registered under "
                                      f"subject {self.key_subject}")
        try:
            return self.decoder.value_schema(latest.schema)
        except BadChangeEvent as e:
            raise RegistrySchemaError(f"sink.primary_key is not set and the key schema of subject "
                                      f"{self.key_subject} gives none: {e.reason}") from None

    def key_columns(self) -> list[str]:
        """The fields of the latest key schema, the table's primary key."""
        return self.key_schema().names

    def candidates(self, table_schema: pa.Schema) -> list[pa.Field]:
        """Columns of the latest value schema the table lacks."""
        latest = self.latest_row_schema()
        if latest is None:
            return []
        return [f.with_nullable(True) for f in latest if f.name not in table_schema.names]

    def carried(self, schema_ids: set[int], candidates: list[pa.Field]) -> list[pa.Field]:
        """Of ``candidates``, the columns one of these writer schemas has."""
        names: set[str] = set()
        for schema_id in schema_ids:
            names.update(self._row_schema(schema_id).names)
        return [f for f in candidates if f.name in names]
