"""An Avro record schema with every type typed ingestion maps (logical types, unions with null, a named type
used twice, arrays, enums) and records of it, shared by the decoding tests."""
from __future__ import annotations

import datetime
import decimal
import uuid

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}},
    {"name": "previous", "type": ["null", "Address"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
]}
AT = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc)


def order(i: int) -> dict:
    return {"id": i, "note": None if i % 2 else f"n{i}", "price": decimal.Decimal(f"{i}.25"),
            "day": datetime.date(2026, 1, 1) + datetime.timedelta(days=i), "at": AT, "at_ms": AT.replace(microsecond=678000),
            "ref": str(uuid.UUID(int=i)), "address": {"city": f"c{i}"},
            "previous": {"city": "old"} if i % 3 == 0 else None, "tags": ["a"] * (i % 3), "state": "PAID"}
