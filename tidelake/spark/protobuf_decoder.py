"""Protobuf record values in Confluent's wire format -> Arrow.

The writer schema is fetched in the registry's ``serialized`` format (a base64 ``FileDescriptorProto``, with
the files it imports), built into a descriptor pool of its own per schema id (the well-known types and
Google's common types preloaded, as Confluent's deserializer does), and the message type is the one the
record's message indexes point at. Each value's message is parsed by the protobuf runtime (upb), then the
batch's fields are gathered into Arrow arrays (protobuf_types.py) and made to the reader's schema.
"""
from __future__ import annotations

import base64
import binascii
import threading

import numpy as np
import pyarrow as pa
from google.protobuf import (any_pb2, api_pb2, descriptor_pb2, descriptor_pool, duration_pb2, empty_pb2,
                             field_mask_pb2, message_factory, source_context_pb2, struct_pb2, timestamp_pb2, type_pb2,
                             wrappers_pb2)
from google.protobuf.message import DecodeError
from google.type import date_pb2, decimal_pb2, money_pb2, timeofday_pb2

from tidelake.spark.decode_errors import BadChangeEvent
from tidelake.spark.protobuf_types import message_type, messages_to_arrow
from tidelake.spark.read_schema import SchemaConflict, conform_to
from tidelake.spark.registered_schemas import RegisteredSchema
from tidelake.spark.value_decoder import Decoded, RegistryDecoder
from tidelake.spark.wire_format import BadFraming, split_framed, split_message_indexes


# Serialized descriptors of the well-known types and Google's common types a schema may import (in
# dependency order).
_PRELOADED = [m.DESCRIPTOR.serialized_pb for m in (
    any_pb2, source_context_pb2, type_pb2, api_pb2, descriptor_pb2, duration_pb2, empty_pb2, field_mask_pb2,
    struct_pb2, timestamp_pb2, wrappers_pb2, date_pb2, decimal_pb2, money_pb2, timeofday_pb2)]
_POOLS: dict[tuple, "SchemaMessages"] = {}
_POOLS_LOCK = threading.Lock()


def _file(text: str, schema_id: int) -> descriptor_pb2.FileDescriptorProto:
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode(text.encode("ascii")))
    except (binascii.Error, UnicodeEncodeError, DecodeError, ValueError):
        raise BadChangeEvent(f"schema id {schema_id}: the registry did not return a serialized Protobuf "
                             f"descriptor (format=serialized)") from None
    return proto


class SchemaMessages:
    """The message types of one registered Protobuf schema."""

    def __init__(self, registered: RegisteredSchema):
        pool = descriptor_pool.DescriptorPool()
        loaded = set()
        for serialized in _PRELOADED:
            proto = descriptor_pb2.FileDescriptorProto.FromString(serialized)
            pool.Add(proto)
            loaded.add(proto.name)
        for name, text in registered.references:
            if name not in loaded:
                proto = _file(text, registered.schema_id)
                proto.name = name
                pool.Add(proto)
                loaded.add(name)
        main = _file(registered.text, registered.schema_id)
        if not main.name or main.name in loaded:
            main.name = f"schema-{registered.schema_id}.proto"
        try:
            self.file = pool.AddSerializedFile(main.SerializeToString())
        except (TypeError, ValueError) as e:
            raise BadChangeEvent(f"schema id {registered.schema_id}: Protobuf schema unusable: {e}") from None
        self.schema_id = registered.schema_id

    def root_message(self):
        """The message a record of this schema most likely is, for a table's columns: the first top-level message
        no other message of the file holds (a Debezium envelope, not its Value or Source)."""
        top = list(self.file.message_types_by_name.values())
        held = set()

        def visit(message):
            for field in message.fields:
                if field.message_type is not None:
                    held.add(field.message_type.full_name)
            for nested in message.nested_types:
                visit(nested)
        for message in top:
            visit(message)
        roots = [m for m in top if m.full_name not in held]
        if not top:
            raise BadChangeEvent(f"schema id {self.schema_id}: the Protobuf schema defines no message")
        return (roots or top)[0]

    def descriptor(self, indexes: tuple[int, ...]):
        try:
            found = self.file.message_types_by_name[list(self.file.message_types_by_name)[indexes[0]]]
            for i in indexes[1:]:
                found = found.nested_types[i]
        except (IndexError, KeyError):
            raise BadChangeEvent(f"schema id {self.schema_id}: no message at index path {list(indexes)}") from None
        return found


class ProtobufDecoder(RegistryDecoder):
    """``protobuf`` and ``debezium-protobuf``: Confluent-framed Protobuf messages."""
    schema_type = "PROTOBUF"
    registry_format = "serialized"

    def _messages(self, schema_id: int) -> SchemaMessages:
        registered = self.writer_schema(schema_id)
        if registered.schema_type != "PROTOBUF":
            raise BadChangeEvent(f"schema id {schema_id} is a {registered.schema_type} schema, not Protobuf")
        key = (self.registry.config, schema_id)
        with _POOLS_LOCK:
            found = _POOLS.get(key)
        if found is None:
            found = SchemaMessages(registered)
            with _POOLS_LOCK:
                _POOLS[key] = found
        return found

    def value_schema(self, registered: RegisteredSchema) -> pa.Schema:
        return pa.schema(list(message_type(SchemaMessages(registered).root_message())))

    def decode(self, values: pa.Array, read_schema: pa.Schema) -> Decoded:
        try:
            framed = split_framed(values)
            indexed = split_message_indexes(framed.payloads)
        except BadFraming as e:
            raise BadChangeEvent(str(e)) from None
        ids = framed.schema_ids
        keys = list(zip(ids.tolist(), indexed.message_indexes))
        groups: dict[tuple, list[int]] = {}
        for i, key in enumerate(keys):
            groups.setdefault(key, []).append(i)
        parts, order = [], []
        for (schema_id, indexes), rows in groups.items():
            descriptor = self._messages(schema_id).descriptor(indexes)
            parse = message_factory.GetMessageClass(descriptor).FromString
            payloads = (indexed.messages if len(groups) == 1 else indexed.messages.take(pa.array(rows))).to_pylist()
            try:
                messages = [parse(p) for p in payloads]
            except DecodeError as e:
                raise BadChangeEvent(f"schema id {schema_id}: Protobuf message does not decode: {e}") from None
            try:
                struct = messages_to_arrow(messages, descriptor)
                parts.append(conform_to(pa.Table.from_struct_array(struct), read_schema))
            except (SchemaConflict, pa.ArrowInvalid, OverflowError) as e:
                raise BadChangeEvent(f"schema id {schema_id}: {e}") from None
            order.append(rows)
        if not parts:
            return Decoded(read_schema.empty_table())
        table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        if len(parts) > 1:
            table = table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))
        return Decoded(table, frozenset(int(i) for i in np.unique(ids).tolist()))
