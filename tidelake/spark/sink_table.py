"""The pipeline's sink table: opened, or created from the config (or the schema registry), checked against
the config; and, batch by batch, the columns a batch's commit adds (schema evolution from registered schemas).

No pyspark imports: the Spark DDL of ``sink.schema`` is parsed by the runner and handed in as a function.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable

import pyarrow as pa

from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError
from tidelake.spark.registered_table_schema import RegisteredTableSchema, RegistrySchemaError
from tidelake.spark.value_formats import ValueFormat
from tidelake.table import Table, TableExists, TableNotFound
from tidelake.table.properties import BUCKET_NUM
from tidelake.table.schema import schema_mismatch

log = logging.getLogger("tidelake.pipeline")


class SinkTable:
    def __init__(self, config: PipelineConfig, registered: RegisteredTableSchema | None,
                 config_schema: Callable[[], pa.Schema]):
        self.config, self.registered, self.config_schema = config, registered, config_schema

    def _primary_key(self, schema: pa.Schema) -> list[str]:
        """``sink.primary_key``; else, with a schema registry, the record key schema's fields; else (append) the
        first column."""
        sink = self.config.sink
        if sink.primary_key:
            return list(sink.primary_key)
        if self.registered is not None and sink.mode == "upsert":
            return self.registered.key_columns()
        return [schema.names[0]]

    def open(self) -> Table:
        """Open the sink table, creating it (schema, primary key, buckets, properties) if absent: the schema is
        ``sink.schema``, or else the latest registered value schema's columns."""
        sink = self.config.sink
        options = sink.storage_options or None
        try:
            return self._checked(Table.open(sink.table, storage_options=options))
        except TableNotFound:
            pass
        properties = {BUCKET_NUM.name: str(sink.buckets), **sink.properties}
        schema = self.config_schema() if sink.schema else self.registered.table_schema()
        primary_key = self._primary_key(schema)
        missing = [k for k in primary_key if k not in schema.names]
        if missing and self.registered is not None and not self.format_is_debezium():
            # the key's fields the value lacks come from the record key (its schema gives their types)
            key_schema = self.registered.key_schema()
            schema = pa.schema([key_schema.field(k) for k in missing] + list(schema))
        elif missing:
            raise RegistrySchemaError(f"primary key field(s) {', '.join(missing)} are not columns of the "
                                      f"{'registered value' if self.registered is not None else 'configured'} "
                                      f"schema: set sink.primary_key")
        if not sink.schema:
            log.info("sink table %s: created from subject %s (%s), primary key (%s)", sink.table,
                     self.registered.value_subject, ", ".join(f"{f.name} {f.type}" for f in schema),
                     ", ".join(primary_key))
        try:
            return Table.create(sink.table, schema, primary_key, properties, storage_options=options)
        except TableExists:  # another process created it first
            return Table.open(sink.table, storage_options=options)

    def _checked(self, table: Table) -> Table:
        """An existing table must have the config's primary key and schema; with
        ``sink.schema_evolution: add-columns`` the config's columns it lacks are added (nullable)."""
        sink = self.config.sink
        if not sink.schema:
            if sink.primary_key and list(sink.primary_key) != list(table.primary_key):
                raise PipelineConfigError(f"sink table {sink.table} has primary key ({', '.join(table.primary_key)}), "
                                          f"the config says ({', '.join(sink.primary_key)})", ("sink", "primary_key"))
            return table
        problems, addable = schema_mismatch(table.schema, table.primary_key, self.config_schema(), sink.primary_key)
        if addable and sink.schema_evolution != "add-columns":
            problems += [f"column {f.name} ({f.type}) is in the config, not in the table (set "
                         f"sink.schema_evolution: add-columns to add it)" for f in addable]
        if problems:
            raise PipelineConfigError(f"sink table {sink.table} does not match the pipeline config: "
                                      + "; ".join(problems), ("sink", "schema"))
        for f in addable:
            table.add_column(f.name, f.type)
            log.info("sink table %s: added column %s %s (sink.schema_evolution: add-columns)", sink.table, f.name,
                     f.type)
        return table

    def format_is_debezium(self) -> bool:
        return self.config.sink.format.startswith("debezium-")

    def with_record_key(self, fmt: ValueFormat, table: Table) -> ValueFormat:
        """``fmt`` reading from the record key what it must: the table's key columns that the registered value schema
        lacks, and with ``sink.tombstones: delete`` the key a tombstone deletes."""
        if self.config.sink.tombstones == "delete":
            fmt = replace(fmt, tombstone_key=tuple(table.primary_key))
        if self.registered is None or self.format_is_debezium():
            return fmt
        value = self.registered.latest_row_schema()
        if value is None:
            return fmt
        return replace(fmt, key_columns=tuple(k for k in table.primary_key if k not in value.names))

    def batch_columns(self, table_schema: pa.Schema) -> list[pa.Field]:
        """The columns the next batch may add: the latest registered value schema's that the table (of
        ``table_schema``) lacks (none when the table follows ``sink.schema``)."""
        if self.registered is None or self.config.sink.schema:
            return []
        return self.registered.candidates(table_schema)

    def columns_to_add(self, batch_id: int, candidates: list[pa.Field], schema_ids: set[int]) -> list[pa.Field]:
        """Of ``candidates``, those the batch's writer schemas (``schema_ids``) carry: its commit adds them; an
        error if the config does not let the table evolve."""
        if not candidates:
            return []
        carried = self.registered.carried(schema_ids, candidates)
        if carried and self.config.sink.schema_evolution != "add-columns":
            raise PipelineConfigError(
                f"batch {batch_id}: records of {self.config.source.topic} carry column(s) "
                f"{', '.join(f'{f.name} ({f.type})' for f in carried)} the sink table {self.config.sink.table} "
                f"lacks (set sink.schema_evolution: add-columns to add them); nothing of the batch was committed",
                ("sink", "schema_evolution"))
        for f in carried:
            log.info("batch %d: column %s %s added to %s with the records that first carry it "
                     "(sink.schema_evolution: add-columns)", batch_id, f.name, f.type, self.config.sink.table)
        return carried
