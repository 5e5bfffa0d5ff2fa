"""How many bytes each decoded Avro datum took, computed back from its decoded Arrow columns with numpy.

The batch decoder reads a group's datums back to back in one container block; a datum whose payload is longer
than the datum itself (trailing bytes) would shift every datum after it. ``encoded_sizes`` gives each datum's
binary-encoding size (Avro's specification: zig-zag varints for int/long and lengths, 4/8 bytes for
float/double, a varint branch index before a union's value, one block for a non-empty array); when every size
equals its payload's length, each datum was read from exactly its own bytes. Where a size cannot be told from
the values (maps, arrays written in several blocks, decimals beyond 63 bits) the answer is None, and so is a
mismatch's consequence: the caller reads that group datum by datum.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelake.spark.avro_types import named_type, remember_name

FIXED_SIZES = {"boolean": 1, "float": 4, "double": 8, "null": 0}
# the unit each logical type's integer is written in (a reader may hand the values over in another unit)
LOGICAL_UNITS = {"date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
                 "timestamp-millis": pa.timestamp("ms"), "timestamp-micros": pa.timestamp("us"),
                 "local-timestamp-millis": pa.timestamp("ms"), "local-timestamp-micros": pa.timestamp("us")}


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of the zig-zag varint of each int64."""
    v = values.astype(np.int64)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    sizes = np.ones(len(v), np.int64)
    for k in range(1, 10):
        sizes += z >= np.uint64(1 << (7 * k))
    return sizes


def _ints(array: pa.Array) -> np.ndarray:
    if pa.types.is_temporal(array.type):
        array = array.view(pa.int32() if array.type.bit_width == 32 else pa.int64())
    return np.asarray(pc.fill_null(array.cast(pa.int64()), 0).to_numpy(zero_copy_only=False))


def _lengths(array: pa.Array) -> np.ndarray:
    lengths = np.asarray(pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False), np.int64)
    return varint_sizes(lengths) + lengths


def _decimal_lengths(array: pa.Array) -> np.ndarray | None:
    """Bytes of each unscaled value as Java's BigInteger.toByteArray (minimal two's complement), plus its
    length varint."""
    array = array.cast(pa.decimal128(array.type.precision, array.type.scale))
    words = np.frombuffer(array.buffers()[1], dtype=np.int64, count=2 * (len(array) + array.offset))
    words = words[2 * array.offset:].reshape(-1, 2)
    lo, hi = words[:, 0], words[:, 1]
    if np.any(hi != (lo >> 63)):
        return None   # beyond 63 bits
    magnitude = np.where(lo < 0, ~lo, lo).astype(np.uint64)
    bits = np.zeros(len(lo), np.int64)
    for b in range(63):   # bit length of the magnitude
        bits += magnitude >= np.uint64(1 << b)
    lengths = bits // 8 + 1
    return varint_sizes(lengths) + lengths


def encoded_sizes(array: pa.Array, schema: Any, names: dict | None = None, namespace: str | None = None
                  ) -> np.ndarray | None:
    """Each value's Avro binary size under ``schema`` (the writer schema it was decoded with), or None."""
    names = {} if names is None else names
    schema = named_type(schema, names, namespace)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(schema, list):
        if len(schema) > 2 or ("null" not in schema and len(schema) > 1):
            return None
        branch = next((b for b in schema if b != "null"), "null")
        inner = encoded_sizes(array, branch, names, namespace) if len(array) else np.zeros(0, np.int64)
        if inner is None:
            return None
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), bool)
        return 1 + np.where(valid, inner, 0)   # branch index 0 or 1: one byte
    kind = schema if isinstance(schema, str) else schema.get("type")
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if isinstance(kind, (dict, list)):
        return encoded_sizes(array, kind, names, namespace)
    if kind in FIXED_SIZES:
        return np.full(len(array), FIXED_SIZES[kind], np.int64)
    if kind in ("int", "long"):
        if logical in LOGICAL_UNITS and pa.types.is_temporal(array.type):
            unit = LOGICAL_UNITS[logical]
            if pa.types.is_timestamp(array.type) and pa.types.is_timestamp(unit):
                unit = pa.timestamp(unit.unit, array.type.tz)
            array = array.cast(unit)
        return varint_sizes(_ints(array))
    if logical == "decimal" and kind == "bytes":
        return _decimal_lengths(array)
    if kind in ("string", "bytes"):
        return _lengths(array)
    if kind == "fixed":
        remember_name(schema, names, namespace)
        return np.full(len(array), int(schema["size"]), np.int64)
    if kind == "enum":
        remember_name(schema, names, namespace)
        index = pc.index_in(array.cast(pa.string()), pa.array(schema["symbols"]))
        return varint_sizes(_ints(index))
    if kind in ("record", "error"):
        ns = remember_name(schema, names, namespace)
        total = np.zeros(len(array), np.int64)
        for field in schema["fields"]:
            sizes = encoded_sizes(pc.struct_field(array, field["name"]), field["type"], names, ns)
            if sizes is None:
                return None
            total += sizes
        return total
    if kind == "array":
        counts = np.asarray(pc.list_value_length(array).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        items = encoded_sizes(pc.list_flatten(array), schema["items"], names, namespace)
        if items is None:
            return None
        running = np.concatenate([[0], np.cumsum(items)])
        ends = np.cumsum(counts)
        item_sums = running[ends] - running[ends - counts]
        return np.where(counts > 0, varint_sizes(counts) + item_sums + 1, 1)
    return None   # maps, and anything else: told datum by datum
