"""One Kafka record made readable: key and value as text (or hex when they are not UTF-8), JSON pretty-printed,
and a Debezium change event (plain or with its ``schema``/``payload`` wrapper) as an operation plus a
field-by-field before/after table."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Debezium's op codes
DEBEZIUM_OPS = {"c": "create", "u": "update", "d": "delete", "r": "read (snapshot)", "t": "truncate",
                "m": "message"}
HEX_BYTES_SHOWN = 256


@dataclass(frozen=True)
class Payload:
    """Key or value bytes as the console shows them."""

    kind: str          # null | text | json | binary
    text: str          # what is displayed (pretty JSON, text, or hex)
    size: int          # bytes
    parsed: Any = None

    @classmethod
    def of(cls, data: bytes | None) -> "Payload":
        if data is None:
            return cls("null", "null", 0)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            shown = data[:HEX_BYTES_SHOWN].hex(" ")
            return cls("binary", shown + (" …" if len(data) > HEX_BYTES_SHOWN else ""), len(data))
        stripped = text.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except ValueError:
                return cls("text", text, len(data))
            return cls("json", json.dumps(parsed, indent=2, ensure_ascii=False), len(data), parsed)
        return cls("text", text, len(data))


@dataclass(frozen=True)
class ChangeEvent:
    """A Debezium envelope: what happened to which row, when, and each field before and after."""

    op: str
    op_name: str
    ts_ms: int | None
    source: str | None                      # "db.table" when the envelope names them
    fields: list[dict[str, Any]] = field(default_factory=list)   # name, before, after, changed

    @classmethod
    def of(cls, value: Any) -> "ChangeEvent | None":
        """The change event in a parsed JSON value, or None when it is not a Debezium envelope."""
        if isinstance(value, dict) and isinstance(value.get("payload"), dict) and "schema" in value:
            value = value["payload"]
        if not isinstance(value, dict) or value.get("op") not in DEBEZIUM_OPS:
            return None
        if "before" not in value and "after" not in value:
            return None
        before, after = value.get("before"), value.get("after")
        before = before if isinstance(before, dict) else {}
        after = after if isinstance(after, dict) else {}
        names = list(dict.fromkeys([*before, *after]))
        rows = [{"name": n, "before": _show(before.get(n)) if n in before else "",
                 "after": _show(after.get(n)) if n in after else "",
                 "changed": bool(before) and bool(after) and before.get(n) != after.get(n)} for n in names]
        src = value.get("source") if isinstance(value.get("source"), dict) else {}
        where = ".".join(str(src[k]) for k in ("db", "table") if src.get(k)) or None
        ts = value.get("ts_ms")
        return cls(value["op"], DEBEZIUM_OPS[value["op"]], ts if isinstance(ts, int) else None, where, rows)


def _show(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


@dataclass(frozen=True)
class RecordView:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    timestamp_type: str
    key: Payload
    value: Payload
    headers: list[tuple[str, str]]
    change: ChangeEvent | None

    @classmethod
    def of(cls, msg) -> "RecordView":
        """From a confluent-kafka Message."""
        ts_type, ts = msg.timestamp()
        value = Payload.of(msg.value())
        headers = [(k, Payload.of(v).text if v is not None else "null") for k, v in (msg.headers() or [])]
        return cls(msg.topic(), msg.partition(), msg.offset(), ts if ts_type else None,
                   {0: "none", 1: "CreateTime", 2: "LogAppendTime"}.get(ts_type, str(ts_type)),
                   Payload.of(msg.key()), value, headers,
                   ChangeEvent.of(value.parsed) if value.kind == "json" else None)
