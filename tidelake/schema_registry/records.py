"""The records of the ``_schemas`` topic, in Confluent's JSON (``storage/*Key.java``, ``*Value.java``), so a
topic written by tidelake's registry is read by Confluent's and the other way round.

Keys carry ``keytype`` (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP) and ``magic``; a null value
is a tombstone (a hard delete, or a cleared config/mode). Record types this registry does not know (Confluent's
contexts, associations, encryption keys) are skipped on read, as an older Confluent reader would ignore them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

KEYTYPE_SCHEMA = "SCHEMA"
KEYTYPE_CONFIG = "CONFIG"
KEYTYPE_MODE = "MODE"
KEYTYPE_DELETE_SUBJECT = "DELETE_SUBJECT"
KEYTYPE_CLEAR_SUBJECT = "CLEAR_SUBJECT"
KEYTYPE_NOOP = "NOOP"
# tidelake's own record: the highest id ever given, written before a hard delete of that id's last version, so
# a compacted topic (where tombstone and schema are both gone) still never hands the id out again. Confluent's
# reader skips a record type it does not know (logged), as this one skips theirs.
KEYTYPE_MAX_ID = "TIDELAKE_MAX_ID"


@dataclass(frozen=True)
class SchemaReference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @staticmethod
    def from_json(d: dict) -> "SchemaReference":
        return SchemaReference(str(d["name"]), str(d["subject"]), int(d["version"]))


@dataclass(frozen=True)
class SchemaValue:
    """One version of one subject: ``(subject, version) -> (id, schema, type, references, deleted)``."""
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False

    def to_json(self) -> dict:
        d: dict = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            d["schemaType"] = self.schema_type
        if self.references:
            d["references"] = [r.to_json() for r in self.references]
        d["schema"] = self.schema
        d["deleted"] = self.deleted
        return d

    @staticmethod
    def from_json(d: dict) -> "SchemaValue":
        return SchemaValue(subject=d["subject"], version=int(d["version"]), id=int(d["id"]), schema=d["schema"],
                           schema_type=d.get("schemaType") or "AVRO",
                           references=tuple(SchemaReference.from_json(r) for r in d.get("references") or ()),
                           deleted=bool(d.get("deleted", False)))


@dataclass(frozen=True)
class StoreKey:
    """A ``_schemas`` key. ``subject`` is None for the global CONFIG and MODE; ``version`` only for SCHEMA."""
    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        d: dict = {"keytype": self.keytype}
        if self.keytype not in (KEYTYPE_NOOP, KEYTYPE_MAX_ID):
            d["subject"] = self.subject
        if self.keytype == KEYTYPE_SCHEMA:
            d["version"] = self.version
        d["magic"] = 1 if self.keytype == KEYTYPE_SCHEMA else 0
        return json.dumps(d, separators=(",", ":")).encode()

    @staticmethod
    def decode(raw: bytes) -> "StoreKey | None":
        """The key, or None for a record type this registry does not keep."""
        d = json.loads(raw)
        keytype = d.get("keytype")
        if keytype not in (KEYTYPE_SCHEMA, KEYTYPE_CONFIG, KEYTYPE_MODE, KEYTYPE_DELETE_SUBJECT,
                           KEYTYPE_CLEAR_SUBJECT, KEYTYPE_NOOP, KEYTYPE_MAX_ID):
            return None
        version = d.get("version")
        return StoreKey(keytype, d.get("subject"), None if version is None else int(version))


@dataclass(frozen=True)
class ConfigValue:
    subject: str | None
    compatibility_level: str

    def to_json(self) -> dict:
        d: dict = {"compatibilityLevel": self.compatibility_level}
        if self.subject is not None:
            d["subject"] = self.subject
        return d


@dataclass(frozen=True)
class ModeValue:
    subject: str | None
    mode: str

    def to_json(self) -> dict:
        d: dict = {"mode": self.mode}
        if self.subject is not None:
            d["subject"] = self.subject
        return d


@dataclass(frozen=True)
class DeleteSubjectValue:
    """A soft delete of a whole subject: every version up to ``version`` is marked deleted."""
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class StoreRecord:
    """One record to write: a key and a JSON value (None: a tombstone)."""
    key: StoreKey
    value: dict | None = field(default=None)

    def encoded_value(self) -> bytes | None:
        return None if self.value is None else json.dumps(self.value, separators=(",", ":")).encode()
