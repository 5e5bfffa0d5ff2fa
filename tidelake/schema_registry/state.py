"""``RegistryState``: the registry's view of the ``_schemas`` topic, as a state machine over its records.

Every registry process applies the topic's records in offset order (``apply``) and answers every read from this
view; nothing here does I/O. Writes are decided by the primary against the same view and only become visible once
their record is read back (Confluent's KafkaStore does the same), so all processes see one history.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from tidelake.schema_registry.records import (KEYTYPE_CLEAR_SUBJECT, KEYTYPE_CONFIG, KEYTYPE_DELETE_SUBJECT,
                                              KEYTYPE_MAX_ID, KEYTYPE_MODE, KEYTYPE_SCHEMA, SchemaReference,
                                              SchemaValue, StoreKey)


@dataclass(frozen=True)
class SchemaIdentity:
    """What makes two registered schemas the same schema (and so the same id)."""
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...]


@dataclass
class _IdEntry:
    identity: SchemaIdentity
    users: set[tuple[str, int]] = field(default_factory=set)   # (subject, version) registered with this id


class RegistryState:
    def __init__(self) -> None:
        self._subjects: dict[str, dict[int, SchemaValue]] = {}
        self._ids: dict[int, _IdEntry] = {}
        self._id_of: dict[SchemaIdentity, int] = {}
        self._referenced_by: dict[tuple[str, int], set[tuple[str, int]]] = {}
        self._configs: dict[str | None, str] = {}
        self._modes: dict[str | None, str] = {}
        self.max_id = 0
        self.offset = -1          # the offset of the last record applied

    # -- applying records -------------------------------------------------------------------------------------
    def apply(self, offset: int, raw_key: bytes | None, raw_value: bytes | None) -> None:
        self.offset = offset
        if raw_key is None:
            return
        key = StoreKey.decode(raw_key)
        if key is None:
            return
        value = None if raw_value is None else json.loads(raw_value)
        if key.keytype == KEYTYPE_SCHEMA:
            assert key.subject is not None and key.version is not None
            self._remove_version(key.subject, key.version)
            if value is not None:
                self._put_version(SchemaValue.from_json(value))
        elif key.keytype == KEYTYPE_CONFIG:
            if value is None:
                self._configs.pop(key.subject, None)
            else:
                self._configs[key.subject] = value["compatibilityLevel"]
        elif key.keytype == KEYTYPE_MODE:
            if value is None:
                self._modes.pop(key.subject, None)
            else:
                self._modes[key.subject] = value["mode"]
        elif key.keytype == KEYTYPE_DELETE_SUBJECT and value is not None:
            for version, sv in list(self._subjects.get(value["subject"], {}).items()):
                if version <= int(value["version"]) and not sv.deleted:
                    self._put_version(SchemaValue(sv.subject, sv.version, sv.id, sv.schema, sv.schema_type,
                                                  sv.references, deleted=True))
        elif key.keytype == KEYTYPE_CLEAR_SUBJECT and value is not None:
            for version in list(self._subjects.get(value["subject"], {})):
                self._remove_version(value["subject"], version)
        elif key.keytype == KEYTYPE_MAX_ID and value is not None:
            self.max_id = max(self.max_id, int(value["maxId"]))

    def _put_version(self, sv: SchemaValue) -> None:
        self._remove_version(sv.subject, sv.version)
        self._subjects.setdefault(sv.subject, {})[sv.version] = sv
        identity = SchemaIdentity(sv.schema_type, sv.schema, sv.references)
        entry = self._ids.get(sv.id)
        if entry is None:
            entry = self._ids[sv.id] = _IdEntry(identity)
            self._id_of.setdefault(identity, sv.id)
        entry.users.add((sv.subject, sv.version))
        for ref in sv.references:
            self._referenced_by.setdefault((ref.subject, ref.version), set()).add((sv.subject, sv.version))
        self.max_id = max(self.max_id, sv.id)

    def _remove_version(self, subject: str, version: int) -> None:
        versions = self._subjects.get(subject)
        old = versions.pop(version, None) if versions is not None else None
        if old is None:
            return
        if not versions:
            del self._subjects[subject]
        entry = self._ids.get(old.id)
        if entry is not None:
            entry.users.discard((subject, version))
            if not entry.users:
                del self._ids[old.id]
                if self._id_of.get(entry.identity) == old.id:
                    del self._id_of[entry.identity]
        for ref in old.references:
            users = self._referenced_by.get((ref.subject, ref.version))
            if users is not None:
                users.discard((subject, version))
                if not users:
                    del self._referenced_by[(ref.subject, ref.version)]

    # -- reading ----------------------------------------------------------------------------------------------
    def subjects(self, include_deleted: bool = False) -> list[str]:
        return sorted(s for s, versions in self._subjects.items()
                      if include_deleted or any(not v.deleted for v in versions.values()))

    def versions(self, subject: str, include_deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions, oldest first."""
        versions = self._subjects.get(subject, {})
        return [versions[v] for v in sorted(versions) if include_deleted or not versions[v].deleted]

    def version(self, subject: str, version: int) -> SchemaValue | None:
        return self._subjects.get(subject, {}).get(version)

    def schema_by_id(self, schema_id: int) -> SchemaIdentity | None:
        entry = self._ids.get(schema_id)
        return None if entry is None else entry.identity

    def users_of_id(self, schema_id: int) -> list[tuple[str, int]]:
        entry = self._ids.get(schema_id)
        return [] if entry is None else sorted(entry.users)

    def id_of(self, identity: SchemaIdentity) -> int | None:
        return self._id_of.get(identity)

    def referenced_by(self, subject: str, version: int) -> list[tuple[str, int]]:
        return sorted(self._referenced_by.get((subject, version), ()))

    def config(self, subject: str | None) -> str | None:
        return self._configs.get(subject)

    def mode(self, subject: str | None) -> str | None:
        return self._modes.get(subject)

    def ids(self) -> list[int]:
        return sorted(self._ids)
