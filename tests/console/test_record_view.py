"""Keys and values made readable: text, JSON, binary as hex, and Debezium envelopes with or without their
schema/payload wrapper."""
from __future__ import annotations

import json

from tidelake.console.record_view import ChangeEvent, Payload


def test_payload_kinds() -> None:
    assert Payload.of(None).kind == "null"
    assert Payload.of(b"hello").text == "hello"
    pretty = Payload.of(b'{"a":1,"b":[1,2]}')
    assert pretty.kind == "json" and pretty.text == '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}'
    assert Payload.of(b"{not json").kind == "text"
    binary = Payload.of(b"\xff\x00\x01")
    assert (binary.kind, binary.text, binary.size) == ("binary", "ff 00 01", 3)


def test_debezium_update_inside_a_schema_payload_wrapper() -> None:
    envelope = {"schema": {"type": "struct"},
                "payload": {"op": "u", "ts_ms": 5, "source": {"db": "shop", "table": "orders"},
                            "before": {"id": 1, "amount": 10, "note": None},
                            "after": {"id": 1, "amount": 12, "note": "x"}}}
    change = ChangeEvent.of(json.loads(json.dumps(envelope)))
    assert (change.op_name, change.ts_ms, change.source) == ("update", 5, "shop.orders")
    assert [(f["name"], f["before"], f["after"], f["changed"]) for f in change.fields] == [
        ("id", "1", "1", False), ("amount", "10", "12", True), ("note", "null", "x", True)]


def test_debezium_delete_and_non_envelopes() -> None:
    delete = ChangeEvent.of({"op": "d", "before": {"id": 3}, "after": None})
    assert delete.op_name == "delete" and delete.fields == [{"name": "id", "before": "3", "after": "",
                                                            "changed": False}]
    assert ChangeEvent.of({"op": "c"}) is None          # no before/after: not an envelope
    assert ChangeEvent.of({"op": "x", "after": {}}) is None
    assert ChangeEvent.of([1, 2]) is None
