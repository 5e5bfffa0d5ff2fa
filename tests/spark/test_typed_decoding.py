"""The layers of typed ingestion that need no server: Confluent's wire format, Avro and Protobuf types mapped
to Arrow, Avro datums decoded in batches (as Confluent's AvroSerializer frames them), Protobuf messages
gathered into Arrow, a decoded batch made to the table's schema."""
from __future__ import annotations

import datetime
import decimal
import io
import json
import struct

import fastavro
import polars as pl
import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2, wrappers_pb2

from tidelake.spark.avro_decoder import container_block, container_header
from tidelake.spark.avro_sizes import encoded_sizes
from tidelake.spark.avro_types import UnsupportedAvroType, avro_field, inline_named_types, record_schema
from tidelake.spark.protobuf_types import message_type, messages_to_arrow
from tidelake.spark.read_schema import SchemaConflict, conform_to
from tidelake.spark.wire_format import BadFraming, split_framed, split_message_indexes
from typed_samples import AT, ORDER, order

def avro_datum(schema, record) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


# ------------------------------------------------------------------------------------------- wire format
def test_wire_format_reads_ids_and_cuts_payloads():
    values = pa.array([framed(1, b"abc"), framed(70000, b""), framed(3, b"\x00\x01")], pa.binary())
    got = split_framed(values)
    assert got.schema_ids.tolist() == [1, 70000, 3]
    assert got.payloads.to_pylist() == [b"abc", b"", b"\x00\x01"]
    # an Arrow slice (offset into shared buffers) reads the same
    assert split_framed(values.slice(1)).schema_ids.tolist() == [70000, 3]


@pytest.mark.parametrize("bad, message", [(b"\x00\x00\x01", "too short"), (b'{"id": 1}', "magic byte 0")])
def test_wire_format_names_the_value_at_fault(bad, message):
    with pytest.raises(BadFraming, match=message) as e:
        split_framed(pa.array([framed(1, b"x"), bad], pa.binary()))
    assert e.value.index == 1


def test_protobuf_message_indexes():
    payloads = pa.array([b"\x00msg", b"\x00"], pa.binary())
    got = split_message_indexes(payloads)
    assert got.message_indexes == [(0,), (0,)] and got.messages.to_pylist() == [b"msg", b""]
    # [1, 2]: count 2 (zig-zag 4), 1 (2), 2 (4); then the message
    got = split_message_indexes(pa.array([b"\x04\x02\x04m", b"\x00n"], pa.binary()))
    assert got.message_indexes == [(1, 2), (0,)] and got.messages.to_pylist() == [b"m", b"n"]


# ------------------------------------------------------------------------------------------- Avro types
def test_avro_types_map_to_table_columns():
    schema = record_schema(ORDER)
    assert schema.field("id").type == pa.int64()
    assert schema.field("note").type == pa.string()
    assert schema.field("price").type == pa.decimal128(10, 2)
    assert schema.field("day").type == pa.date32()
    assert schema.field("at").type == schema.field("at_ms").type == pa.timestamp("us", tz="UTC")
    assert schema.field("ref").type == pa.string()
    assert schema.field("address").type == pa.struct([("city", pa.string())])
    assert schema.field("previous").type == schema.field("address").type   # a named type used again
    assert schema.field("tags").type == pa.list_(pa.field("element", pa.string()))
    assert schema.field("state").type == pa.string()
    assert avro_field(["null", "long"]).nullable and not avro_field("long").nullable


def test_avro_union_of_two_types_has_no_column():
    with pytest.raises(UnsupportedAvroType, match="union"):
        avro_field(["null", "long", "string"])


# ------------------------------------------------------------------------------------------- Avro in batches
def read_container(schema: dict, payloads: list[bytes]) -> pa.Table:
    container = container_header(json.dumps(inline_named_types(schema))) + container_block(pa.array(payloads, pa.binary()))
    return pl.read_avro(io.BytesIO(container)).to_arrow()


def test_avro_batch_decodes_as_fastavro_does():
    records = [order(i) for i in range(50)]
    got = conform_to(read_container(ORDER, [avro_datum(ORDER, r) for r in records]), record_schema(ORDER))
    rows = got.to_pylist()
    assert len(rows) == 50
    for want, row in zip(records, rows):
        assert row["id"] == want["id"] and row["note"] == want["note"] and row["price"] == want["price"]
        assert row["day"] == want["day"] and row["at"] == want["at"] and row["at_ms"] == want["at_ms"]
        assert row["ref"] == want["ref"] and row["address"] == want["address"]
        assert row["previous"] == want["previous"] and row["tags"] == want["tags"] and row["state"] == "PAID"


def test_avro_sizes_computed_back_equal_the_payloads():
    """Every datum's encoded size, told from its decoded values, is its payload's length: the check that the
    back-to-back block was read datum by datum from the right bytes."""
    records = [order(i) for i in range(50)] + [{**order(1), "price": decimal.Decimal("-99999999.99"), "id": -2**40}]
    payloads = [avro_datum(ORDER, r) for r in records]
    decoded = read_container(ORDER, payloads)
    sizes = encoded_sizes(decoded.to_struct_array().combine_chunks(), ORDER)
    assert sizes.tolist() == [len(p) for p in payloads]


def test_avro_trailing_bytes_are_caught_by_the_sizes():
    """A payload with trailing bytes shifts the datums after it in a back-to-back block: the decode either
    fails or its sizes do not match the payloads."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": "string"}]}
    payloads = [avro_datum(schema, {"id": i, "s": "x" * (i * 70)}) for i in range(40)]
    assert encoded_sizes(read_container(schema, payloads).to_struct_array().combine_chunks(), schema).tolist() == [
        len(p) for p in payloads]   # multi-byte lengths too
    payloads[3] += b"\x02"
    try:
        decoded = read_container(schema, payloads)
    except BaseException:   # noqa: BLE001 (polars' PanicException is a BaseException)
        return
    sizes = encoded_sizes(decoded.to_struct_array().combine_chunks(), schema)
    assert decoded.num_rows != len(payloads) or sizes is None or sizes.tolist() != [len(p) for p in payloads]


# ------------------------------------------------------------------------------------------- conform
def test_conform_fills_missing_fields_and_refuses_a_conflict():
    decoded = pa.table({"id": pa.array([1, 2], pa.int32()), "extra": ["a", "b"],
                        "after": pa.array([{"x": 1}, None], pa.struct([("x", pa.int64())]))})
    wanted = pa.schema([("id", pa.int64()), ("after", pa.struct([("x", pa.int64()), ("y", pa.string())])),
                        ("missing", pa.string())])
    got = conform_to(decoded, wanted)
    assert got.schema == wanted
    assert got.to_pylist() == [{"id": 1, "after": {"x": 1, "y": None}, "missing": None},
                               {"id": 2, "after": None, "missing": None}]
    with pytest.raises(SchemaConflict, match="field extra is string"):
        conform_to(decoded, pa.schema([("extra", pa.int64())]))


# ------------------------------------------------------------------------------------------- Protobuf
def order_message_class():
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(wrappers_pb2.DESCRIPTOR.serialized_pb))
    f = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3",
                                           dependency=["google/protobuf/timestamp.proto",
                                                       "google/protobuf/wrappers.proto"])
    address = f.message_type.add(name="Address")
    address.field.add(name="city", number=1, type=9, label=1)
    m = f.message_type.add(name="Order")
    T = descriptor_pb2.FieldDescriptorProto
    m.field.add(name="id", number=1, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    m.field.add(name="at", number=2, type=T.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=1)
    m.field.add(name="note", number=3, type=T.TYPE_MESSAGE, type_name=".google.protobuf.StringValue", label=1)
    m.field.add(name="address", number=4, type=T.TYPE_MESSAGE, type_name=".shop.Address", label=1)
    m.field.add(name="tags", number=5, type=T.TYPE_STRING, label=T.LABEL_REPEATED)
    state = f.enum_type.add(name="State")
    state.value.add(name="NEW", number=0)
    state.value.add(name="PAID", number=1)
    m.field.add(name="state", number=6, type=T.TYPE_ENUM, type_name=".shop.State", label=1)
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_messages_gather_into_arrow():
    Order = order_message_class()
    assert message_type(Order.DESCRIPTOR) == pa.struct([
        ("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC")), ("note", pa.string()),
        ("address", pa.struct([("city", pa.string())])), ("tags", pa.list_(pa.field("element", pa.string()))),
        ("state", pa.string())])
    one = Order(id=7, note={"value": "hi"}, tags=["a", "b"], state=1)
    one.at.FromDatetime(AT.replace(tzinfo=None))
    one.address.city = "x"
    two = Order(id=8)   # no timestamp, no wrapper, no address: nulls; proto3 scalars read as their default
    parsed = [Order.FromString(m.SerializeToString()) for m in (one, two)]
    assert messages_to_arrow(parsed, Order.DESCRIPTOR).to_pylist() == [
        {"id": 7, "at": AT, "note": "hi", "address": {"city": "x"}, "tags": ["a", "b"], "state": "PAID"},
        {"id": 8, "at": None, "note": None, "address": None, "tags": [], "state": "NEW"}]


LOGICAL_CASES = {
    "time-millis": ({"type": "int", "logicalType": "time-millis"}, datetime.time(1, 2, 3, 4000)),
    "time-micros": ({"type": "long", "logicalType": "time-micros"}, datetime.time(1, 2, 3, 4567)),
    "local-timestamp-millis": ({"type": "long", "logicalType": "local-timestamp-millis"},
                               datetime.datetime(2026, 1, 2, 3, 4, 5, 6000)),
    "local-timestamp-micros": ({"type": "long", "logicalType": "local-timestamp-micros"},
                               datetime.datetime(2026, 1, 2, 3, 4, 5, 6789)),
    "fixed decimal": ({"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 10,
                       "scale": 3}, decimal.Decimal("-12.345")),
    "fixed": ({"type": "fixed", "name": "F", "size": 4}, b"abcd"),
    "float": ("float", 1.5), "double": ("double", 2.25), "boolean": ("boolean", True), "bytes": ("bytes", b"\0\1"),
    "int": ("int", -7),
    "array of records": ({"type": "array", "items": {"type": "record", "name": "I", "fields": [
        {"name": "x", "type": "int"}]}}, [{"x": 1}, {"x": 2}]),
}


@pytest.mark.parametrize("name", sorted(LOGICAL_CASES))
def test_the_batch_reader_agrees_with_fastavro_and_its_sizes_check_out(name):
    """Every type the batch path (polars) reads comes out as fastavro reads it, and the datum sizes computed back
    from the values equal the payloads (else every batch of that type would fall back to datum by datum)."""
    avro_type, value = LOGICAL_CASES[name]
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": avro_type}]}
    payloads = [avro_datum(schema, {"id": i, "v": value}) for i in range(10)]
    want = pa.Table.from_pylist([fastavro.schemaless_reader(io.BytesIO(p), fastavro.parse_schema(schema), None)
                                 for p in payloads], schema=record_schema(schema))
    decoded = read_container(schema, payloads)
    assert conform_to(decoded, record_schema(schema)).to_pylist() == want.to_pylist()
    assert encoded_sizes(decoded.to_struct_array().combine_chunks(), schema).tolist() == [len(p) for p in payloads]
