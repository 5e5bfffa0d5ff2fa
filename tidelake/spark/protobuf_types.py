"""Protobuf message descriptors -> Arrow types of table columns, and messages -> Arrow arrays.

- scalars: int32 / sint32 / sfixed32 -> int32; int64 / sint64 / sfixed64 / uint32 / fixed32 / uint64 / fixed64
  -> int64 (as Kafka Connect's Protobuf converter maps them; a uint64 above 2^63 does not fit: a bad
  record); float, double, bool, string; bytes -> binary; enum -> string (the value's name);
- well-known types: google.protobuf.Timestamp -> timestamp[us, UTC]; Duration -> int64 microseconds; the
  wrappers (Int64Value, StringValue, ...) -> their value, null when unset; google.type.Date -> date32;
- message -> struct; repeated -> list; map<K, V> -> map<K, V>.
A field with presence (proto2, proto3 ``optional``, a oneof member, a message) is null when unset; a
proto3 scalar without presence reads as its default, as every Protobuf reader does.

Messages are parsed by the protobuf runtime (upb, C); ``messages_to_arrow`` gathers each field over the
batch into one Arrow array (one list per field, built from the parsed messages by the runtime's field
access), recursively for nested messages.
"""
from __future__ import annotations

import datetime

import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor

F = FieldDescriptor
SCALARS = {F.TYPE_INT32: pa.int32(), F.TYPE_SINT32: pa.int32(), F.TYPE_SFIXED32: pa.int32(),
           F.TYPE_INT64: pa.int64(), F.TYPE_SINT64: pa.int64(), F.TYPE_SFIXED64: pa.int64(),
           F.TYPE_UINT32: pa.int64(), F.TYPE_FIXED32: pa.int64(), F.TYPE_UINT64: pa.int64(),
           F.TYPE_FIXED64: pa.int64(), F.TYPE_FLOAT: pa.float32(), F.TYPE_DOUBLE: pa.float64(),
           F.TYPE_BOOL: pa.bool_(), F.TYPE_STRING: pa.string(), F.TYPE_BYTES: pa.binary(), F.TYPE_ENUM: pa.string()}
WRAPPERS = {"google.protobuf.DoubleValue": pa.float64(), "google.protobuf.FloatValue": pa.float32(),
            "google.protobuf.Int64Value": pa.int64(), "google.protobuf.UInt64Value": pa.int64(),
            "google.protobuf.Int32Value": pa.int32(), "google.protobuf.UInt32Value": pa.int64(),
            "google.protobuf.BoolValue": pa.bool_(), "google.protobuf.StringValue": pa.string(),
            "google.protobuf.BytesValue": pa.binary()}
TIMESTAMP, DURATION, DATE = "google.protobuf.Timestamp", "google.protobuf.Duration", "google.type.Date"
WELL_KNOWN = {TIMESTAMP: pa.timestamp("us", tz="UTC"), DURATION: pa.int64(), DATE: pa.date32(), **WRAPPERS}
EPOCH = datetime.date(1970, 1, 1)


def _is_map(field: FieldDescriptor) -> bool:
    return field.type == F.TYPE_MESSAGE and field.is_repeated and field.message_type.GetOptions().map_entry


def message_type(descriptor: Descriptor) -> pa.StructType:
    """The Arrow struct of a message: one field per Protobuf field, in declaration order."""
    return pa.struct([pa.field(f.name, field_type(f)) for f in descriptor.fields])


def _single_type(field: FieldDescriptor) -> pa.DataType:
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        name = field.message_type.full_name
        return WELL_KNOWN[name] if name in WELL_KNOWN else message_type(field.message_type)
    return SCALARS[field.type]


def field_type(field: FieldDescriptor) -> pa.DataType:
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return pa.map_(_single_type(key), pa.field("value", _single_type(value)))
    if field.is_repeated:
        return pa.list_(pa.field("element", _single_type(field)))
    return _single_type(field)


def _convert(value, field: FieldDescriptor):
    """One Python value of a field (not repeated) as Arrow takes it."""
    if field.type == F.TYPE_ENUM:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        name = field.message_type.full_name
        if name == TIMESTAMP:
            return value.seconds * 1_000_000 + value.nanos // 1000
        if name == DURATION:
            return value.seconds * 1_000_000 + value.nanos // 1000
        if name == DATE:
            return (datetime.date(value.year, value.month, value.day) - EPOCH).days
        if name in WRAPPERS:
            return value.value
    return value


def _singles(values: list, field: FieldDescriptor) -> pa.Array:
    """Values of a non-repeated field (None for unset) -> one Arrow array."""
    arrow_type = _single_type(field)
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP) and field.message_type.full_name not in WELL_KNOWN:
        return messages_to_arrow(values, field.message_type, pa.array([v is None for v in values]))
    converted = [None if v is None else _convert(v, field) for v in values]
    if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type):
        storage = pa.int64() if pa.types.is_timestamp(arrow_type) else pa.int32()
        return pa.array(converted, storage).cast(arrow_type)
    return pa.array(converted, arrow_type)


def _column(messages: list, field: FieldDescriptor) -> pa.Array:
    name = field.name
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        offsets, keys, values = [0], [], []
        for m in messages:
            entries = getattr(m, name) if m is not None else {}
            for k in entries:
                keys.append(k)
                values.append(entries[k])
            offsets.append(len(keys))
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), _singles(keys, key), _singles(values, value))
    if field.is_repeated:
        offsets, items = [0], []
        for m in messages:
            if m is not None:
                items.extend(getattr(m, name))
            offsets.append(len(items))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), _singles(items, field))
    if field.has_presence:
        values = [getattr(m, name) if m is not None and m.HasField(name) else None for m in messages]
    else:
        values = [getattr(m, name) if m is not None else None for m in messages]
    return _singles(values, field)


def messages_to_arrow(messages: list, descriptor: Descriptor, mask: pa.Array | None = None) -> pa.StructArray:
    """Parsed messages (None: null) -> a struct array of :func:`message_type`."""
    if not descriptor.fields:
        return pa.array([None if m is None else {} for m in messages], pa.struct([]))
    children = [_column(messages, f) for f in descriptor.fields]
    return pa.StructArray.from_arrays(children, fields=list(message_type(descriptor)), mask=mask)
