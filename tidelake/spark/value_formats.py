"""``sink.format``: each name is a value decoder (the encoding) and an envelope (plain row or Debezium event).

    json, debezium-json                 schemaless JSON text (json_decoder.py)
    avro, debezium-avro                 Confluent wire format + Avro (avro_decoder.py)
    protobuf, debezium-protobuf         Confluent wire format + Protobuf (protobuf_decoder.py)
    json-schema, debezium-json-schema   Confluent wire format + JSON (json_schema_decoder.py)

The registry-backed ones need ``schema_registry:``; no pyspark imports.
"""
from __future__ import annotations

from dataclasses import dataclass

from tidelake.spark.avro_decoder import AvroDecoder
from tidelake.spark.envelopes import DEBEZIUM, PLAIN, Envelope
from tidelake.spark.json_decoder import JsonDecoder
from tidelake.spark.json_schema_decoder import JsonSchemaDecoder
from tidelake.spark.protobuf_decoder import ProtobufDecoder
from tidelake.spark.registered_schemas import RegisteredSchemas, SchemaRegistryConfig
from tidelake.spark.value_decoder import RegistryDecoder, ValueDecoder

ENCODINGS = {"json": None, "avro": AvroDecoder, "protobuf": ProtobufDecoder, "json-schema": JsonSchemaDecoder}
FORMATS = tuple(name for encoding in ENCODINGS for name in (encoding, f"debezium-{encoding}"))
REGISTRY_FORMATS = tuple(f for f in FORMATS if f not in ("json", "debezium-json"))


@dataclass(frozen=True)
class ValueFormat:
    name: str
    decoder: ValueDecoder
    envelope: Envelope
    # table key columns the value lacks, decoded from the record key (a registered key schema's record fields,
    # as Kafka Connect's JDBC sink's pk.mode=record_key); set once the sink table is known
    key_columns: tuple[str, ...] = ()
    # sink.tombstones: delete: the table's primary key, which a tombstone's record key is decoded as to delete
    # that row; empty (ignore, the default): a tombstone is no change
    tombstone_key: tuple[str, ...] = ()

    @property
    def kafka_columns(self) -> tuple[str, ...]:
        """The Kafka row columns parsing needs."""
        keyed = self.key_columns or self.tombstone_key
        return ("key", "value", "partition", "offset") if keyed else ("value", "partition", "offset")

    @property
    def registry_decoder(self) -> RegistryDecoder | None:
        """The decoder when it reads schemas from a registry, else None."""
        return self.decoder if isinstance(self.decoder, RegistryDecoder) else None


def value_format(name: str, registry: SchemaRegistryConfig | None = None) -> ValueFormat:
    """The format ``name`` (one of FORMATS); a registry-backed one reads schemas from ``registry``."""
    if name not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {name!r}")
    envelope = DEBEZIUM if name.startswith("debezium-") else PLAIN
    decoder_class = ENCODINGS[name.removeprefix("debezium-")]
    if decoder_class is None:
        return ValueFormat(name, JsonDecoder(), envelope)
    if registry is None:
        raise ValueError(f"format {name} needs a schema registry (schema_registry: {{url: ...}})")
    return ValueFormat(name, decoder_class(RegisteredSchemas(registry)), envelope)
