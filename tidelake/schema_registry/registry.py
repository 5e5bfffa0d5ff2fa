"""``SchemaRegistry``: Confluent Schema Registry's operations over the ``RegistryState`` and the ``KafkaStore``.

Reads answer from the state (under its lock). Writes run one at a time on the primary: decide against the state
(mode, validity, compatibility, the next id and version), write the records, return once they are applied.
The REST layer sends a write here only on the primary; other processes forward it there.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Any

from tidelake.schema_registry import errors
from tidelake.schema_registry.avro_type import AvroType
from tidelake.schema_registry.compatibility import incompatibilities
from tidelake.schema_registry.json_type import JsonType
from tidelake.schema_registry.kafka_store import KafkaStore, NotWriter, StoreError, StoreTimeout
from tidelake.schema_registry.protobuf_type import ProtobufType
from tidelake.schema_registry.records import (KEYTYPE_CONFIG, KEYTYPE_DELETE_SUBJECT, KEYTYPE_MAX_ID, KEYTYPE_MODE,
                                              KEYTYPE_SCHEMA, ConfigValue, DeleteSubjectValue, ModeValue,
                                              SchemaReference, SchemaValue, StoreKey, StoreRecord)
from tidelake.schema_registry.schema_types import InvalidSchema, ParsedSchema, SchemaType
from tidelake.schema_registry.settings import COMPATIBILITY_LEVELS, MODES, RegistrySettings
from tidelake.schema_registry.state import RegistryState, SchemaIdentity

SCHEMA_TYPES: dict[str, SchemaType] = {t.name: t for t in (JsonType(), ProtobufType(), AvroType())}
MAX_VERSION = 2 ** 31 - 1


@dataclass(frozen=True)
class SchemaRequest:
    """The body of a register, lookup or compatibility request."""
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()
    id: int | None = None           # IMPORT mode only
    version: int | None = None      # IMPORT mode only

    @staticmethod
    def from_json(body: Any) -> "SchemaRequest":
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise errors.unprocessable("The request body must be a JSON object with a string field 'schema'")
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type not in SCHEMA_TYPES:
            raise errors.invalid_schema(f"Invalid schema type {schema_type}; expected one of "
                                        f"{', '.join(sorted(SCHEMA_TYPES))}")
        try:
            refs = tuple(SchemaReference.from_json(r) for r in body.get("references") or ())
            schema_id = None if body.get("id") is None else int(body["id"])
            version = None if body.get("version") is None else int(body["version"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise errors.unprocessable("Invalid references, id or version in the request body") from None
        return SchemaRequest(body["schema"], schema_type, refs, schema_id, version)


@dataclass
class RegistryCounters:
    """Counted for /metrics: writes and their outcomes."""
    registered: int = 0
    register_requests: int = 0
    incompatible: int = 0
    deleted_versions: int = 0
    by_type: dict[str, int] = field(default_factory=dict)


@functools.lru_cache(maxsize=4096)
def _parse_cached(schema_type: str, schema: str, references: tuple[tuple[str, str], ...]) -> ParsedSchema:
    """Stored schemas are parsed again for every registration that compares with them: keep the results (a
    stored schema with the same references' texts always parses the same)."""
    return SCHEMA_TYPES[schema_type].parse(schema, dict(references))


def parse_version(text: str | int, allow_negative: bool = False) -> int:
    """A version in a path: ``latest`` / -1 (as -1), else 1 .. 2^31-1 (42202 otherwise)."""
    if isinstance(text, str) and text.lower() == "latest":
        return -1
    try:
        version = int(text)
    except (TypeError, ValueError):
        raise errors.invalid_version(str(text)) from None
    if version == -1 or (allow_negative and version < 0):
        return version
    if not 1 <= version <= MAX_VERSION:
        raise errors.invalid_version(str(text))
    return version


class SchemaRegistry:
    def __init__(self, settings: RegistrySettings, state: RegistryState, state_lock: threading.RLock,
                 store: KafkaStore):
        self.settings = settings
        self.state = state
        self.lock = state_lock
        self.store = store
        self._writes = threading.Lock()
        self.counters = RegistryCounters()

    # -- reads ------------------------------------------------------------------------------------------------
    def schema_by_id(self, schema_id: int, subject: str | None = None, fmt: str | None = None) -> dict:
        with self.lock:
            identity = self.state.schema_by_id(schema_id)
            if identity is None or (subject is not None and
                                    all(s != subject for s, _ in self.state.users_of_id(schema_id))):
                raise errors.schema_not_found(schema_id)
        return self._schema_json(identity, fmt)

    def subjects_of_id(self, schema_id: int, deleted: bool = False) -> list[str]:
        return sorted({v["subject"] for v in self.versions_of_id(schema_id, deleted)})

    def versions_of_id(self, schema_id: int, deleted: bool = False) -> list[dict]:
        with self.lock:
            if self.state.schema_by_id(schema_id) is None:
                raise errors.schema_not_found(schema_id)
            found = []
            for subject, version in self.state.users_of_id(schema_id):
                sv = self.state.version(subject, version)
                if sv is not None and (deleted or not sv.deleted):
                    found.append({"subject": subject, "version": version})
            return found

    def schemas(self, prefix: str = "", deleted: bool = False, latest_only: bool = False) -> list[dict]:
        """``GET /schemas``: every version of the subjects under ``prefix`` (or each one's latest)."""
        with self.lock:
            out = []
            for subject in self.state.subjects(include_deleted=deleted):
                if subject.startswith(prefix):
                    versions = self.state.versions(subject, include_deleted=deleted)
                    out += [self._version_json(sv, None) for sv in (versions[-1:] if latest_only else versions)]
            return out

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        with self.lock:
            return [s for s in self.state.subjects(include_deleted=deleted) if s.startswith(prefix)]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        with self.lock:
            self._require_subject(subject, deleted)
            return [sv.version for sv in self.state.versions(subject, include_deleted=deleted)]

    def version(self, subject: str, version: str | int, deleted: bool = False, fmt: str | None = None) -> dict:
        with self.lock:
            sv = self._find_version(subject, parse_version(version), deleted)
        return self._version_json(sv, fmt)

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        with self.lock:
            sv = self._find_version(subject, parse_version(version), deleted=True)
            return sorted({self.state.version(s, v).id for s, v in self.state.referenced_by(sv.subject, sv.version)
                           if self.state.version(s, v) is not None})

    def lookup(self, subject: str, request: SchemaRequest, deleted: bool = False) -> dict:
        parsed = self._parse(request)
        with self.lock:
            self._require_subject(subject, deleted=deleted)
            for sv in reversed(self.state.versions(subject, include_deleted=deleted)):
                if self._same_schema(sv, request, parsed):
                    return self._version_json(sv, None)
        raise errors.schema_not_found()

    def compatibility_level(self, subject: str | None, default_to_global: bool = False) -> str | None:
        with self.lock:
            level = self.state.config(subject)
            if level is None and (subject is None or default_to_global):
                level = self.state.config(None) or self.settings.compatibility_level
            return level

    def mode(self, subject: str | None, default_to_global: bool = False) -> str | None:
        with self.lock:
            mode = self.state.mode(subject)
            if mode is None and (subject is None or default_to_global):
                mode = self.state.mode(None) or "READWRITE"
            return mode

    def check_compatibility(self, subject: str, version: str | int | None, request: SchemaRequest) -> list[str]:
        """Why ``request`` may not follow ``version`` of the subject (None: the versions its level names)."""
        parsed = self._parse(request)
        with self.lock:
            level = self._effective_level(subject)
            if version is None:
                previous = self.state.versions(subject)
            else:
                previous = [self._find_version(subject, parse_version(version), deleted=False)]
                level = level.replace("_TRANSITIVE", "")
            olds = [self._parse_stored(sv) for sv in previous]
        return incompatibilities(level, SCHEMA_TYPES[request.schema_type], parsed, olds)

    # -- writes (the primary only) ----------------------------------------------------------------------------
    def register(self, subject: str, request: SchemaRequest) -> dict:
        self.counters.register_requests += 1
        parsed = self._parse(request)
        identity = SchemaIdentity(request.schema_type, parsed.stored, request.references)
        with self._writes:
            with self.lock:
                mode = self._effective_mode(subject)
                if mode == "READONLY":
                    raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
                if request.id is not None and mode != "IMPORT":
                    raise errors.operation_not_permitted(
                        f"Subject {subject} is not in import mode: a schema id cannot be given")
                live = self.state.versions(subject)
                for sv in live:
                    if self._same_schema(sv, request, parsed):
                        if request.id is not None and request.id != sv.id:
                            raise errors.id_does_not_match(f"Schema already registered with id {sv.id} instead of "
                                                           f"input id {request.id}")
                        return {"id": sv.id}
                if mode != "IMPORT":
                    level = self._effective_level(subject)
                    problems = incompatibilities(level, SCHEMA_TYPES[request.schema_type], parsed,
                                                 [self._parse_stored(sv) for sv in live])
                    if problems:
                        self.counters.incompatible += 1
                        raise errors.incompatible_schema(problems)
                every = self.state.versions(subject, include_deleted=True)
                latest = every[-1].version if every else 0
                if request.id is not None:
                    schema_id = request.id
                    existing = self.state.schema_by_id(schema_id)
                    if existing is not None and existing != identity:
                        raise errors.id_does_not_match(f"Overwrite new schema with id {schema_id} is not permitted.")
                else:
                    known = self.state.id_of(identity)
                    schema_id = known if known is not None else self.state.max_id + 1
                version = request.version if request.version is not None and mode == "IMPORT" else latest + 1
                if self.state.version(subject, version) is not None:
                    raise errors.operation_not_permitted(f"Subject {subject} already has a version {version}")
            value = SchemaValue(subject, version, schema_id, parsed.stored, request.schema_type,
                                request.references)
            self._write([StoreRecord(StoreKey(KEYTYPE_SCHEMA, subject, version), value.to_json())])
        self.counters.registered += 1
        self.counters.by_type[request.schema_type] = self.counters.by_type.get(request.schema_type, 0) + 1
        return {"id": schema_id}

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        with self._writes:
            with self.lock:
                self._require_writable(subject)
                every = self.state.versions(subject, include_deleted=True)
                if not every:
                    raise errors.subject_not_found(subject)
                live = [sv for sv in every if not sv.deleted]
                if permanent and live:
                    raise errors.subject_not_soft_deleted(subject)
                if not permanent and not live:
                    raise errors.subject_soft_deleted(subject)
                for sv in live if not permanent else every:
                    self._refuse_if_referenced(sv)
                records = self._clear_subject_settings(subject)
                if permanent:
                    records = self._max_id_guard(every) + records
                    records += [StoreRecord(StoreKey(KEYTYPE_SCHEMA, subject, sv.version)) for sv in every]
                    deleted = [sv.version for sv in every]
                else:
                    records.append(StoreRecord(StoreKey(KEYTYPE_DELETE_SUBJECT, subject),
                                               DeleteSubjectValue(subject, every[-1].version).to_json()))
                    deleted = [sv.version for sv in live]
            self._write(records)
        self.counters.deleted_versions += len(deleted)
        return deleted

    def delete_version(self, subject: str, version: str | int, permanent: bool = False) -> int:
        with self._writes:
            with self.lock:
                self._require_writable(subject)
                number = parse_version(version)
                sv = self._find_version(subject, number, deleted=permanent)
                if permanent and not sv.deleted:
                    raise errors.version_not_soft_deleted(subject, sv.version)
                self._refuse_if_referenced(sv)
                if permanent:
                    records = self._max_id_guard([sv]) + [StoreRecord(StoreKey(KEYTYPE_SCHEMA, subject, sv.version))]
                else:
                    records = [StoreRecord(StoreKey(KEYTYPE_SCHEMA, subject, sv.version),
                                           SchemaValue(sv.subject, sv.version, sv.id, sv.schema, sv.schema_type,
                                                       sv.references, deleted=True).to_json())]
            self._write(records)
        self.counters.deleted_versions += 1
        return sv.version

    def set_compatibility(self, subject: str | None, level: Any) -> str:
        if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
            raise errors.invalid_compatibility_level(level)
        level = level.upper()
        with self._writes:
            self._write([StoreRecord(StoreKey(KEYTYPE_CONFIG, subject), ConfigValue(subject, level).to_json())])
        return level

    def delete_compatibility(self, subject: str | None) -> str:
        with self._writes:
            with self.lock:
                previous = self.state.config(subject)
                if subject is not None and previous is None:
                    raise errors.subject_not_found(subject)
            self._write([StoreRecord(StoreKey(KEYTYPE_CONFIG, subject))])
        return previous or self.settings.compatibility_level

    def set_mode(self, subject: str | None, mode: Any, force: bool = False) -> str:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if not self.settings.get_bool("mode.mutability"):
            raise errors.operation_not_permitted("Mode changes are not allowed")
        with self._writes:
            with self.lock:
                if mode == "IMPORT" and not force:
                    existing = self.state.subjects() if subject is None else (
                        [subject] if self.state.versions(subject) else [])
                    if existing:
                        raise errors.operation_not_permitted(
                            "Cannot import since found existing subjects" if subject is None else
                            f"Cannot import since subject {subject} has versions")
            self._write([StoreRecord(StoreKey(KEYTYPE_MODE, subject), ModeValue(subject, mode).to_json())])
        return mode

    def delete_mode(self, subject: str) -> str:
        with self._writes:
            with self.lock:
                previous = self.state.mode(subject)
                if previous is None:
                    raise errors.subject_not_found(subject)
            self._write([StoreRecord(StoreKey(KEYTYPE_MODE, subject))])
        return previous

    # -- helpers ----------------------------------------------------------------------------------------------
    def _write(self, records: list[StoreRecord]) -> None:
        try:
            self.store.write(records)
        except NotWriter as e:
            raise errors.unknown_leader(str(e)) from None
        except StoreTimeout as e:
            raise errors.operation_timeout(f"Write to the Kafka store timed out: {e}") from None
        except StoreError as e:
            raise errors.store_error(f"Error while writing to the Kafka store: {e}") from None

    def _parse(self, request: SchemaRequest) -> ParsedSchema:
        with self.lock:
            references = self._resolve_references(request.references, set())
        try:
            return SCHEMA_TYPES[request.schema_type].parse(request.schema, references)
        except InvalidSchema as e:
            raise errors.invalid_schema(str(e)) from None

    def _same_schema(self, sv: SchemaValue, request: SchemaRequest, parsed: ParsedSchema) -> bool:
        if sv.schema_type != request.schema_type or sv.references != request.references:
            return False
        return sv.schema == parsed.stored or self._parse_stored(sv).canonical == parsed.canonical

    def _parse_stored(self, sv: SchemaValue) -> ParsedSchema:
        references = self._resolve_references(sv.references, set())
        return _parse_cached(sv.schema_type, sv.schema, tuple(references.items()))

    def _resolve_references(self, refs: tuple[SchemaReference, ...], seen: set[str]) -> dict[str, str]:
        """Every schema ``refs`` name, transitively, dependencies first (what a parser needs before the schema)."""
        resolved: dict[str, str] = {}
        for ref in refs:
            if ref.name in seen:
                continue
            seen.add(ref.name)
            version = ref.version
            if version == -1:
                live = self.state.versions(ref.subject)
                target = live[-1] if live else None
            else:
                target = self.state.version(ref.subject, version)
            if target is None:
                raise errors.invalid_schema(f"Invalid schema: reference {ref.name!r} names subject "
                                            f"'{ref.subject}' version {ref.version}, which does not exist")
            resolved.update(self._resolve_references(target.references, seen))
            resolved[ref.name] = target.schema
        return resolved

    def _schema_json(self, identity: SchemaIdentity, fmt: str | None) -> dict:
        out: dict = {}
        if identity.schema_type != "AVRO":
            out["schemaType"] = identity.schema_type
        if identity.references:
            out["references"] = [r.to_json() for r in identity.references]
        out["schema"] = self._formatted(identity.schema_type, identity.schema, identity.references, fmt)
        return out

    def _version_json(self, sv: SchemaValue, fmt: str | None) -> dict:
        out: dict = {"subject": sv.subject, "version": sv.version, "id": sv.id}
        if sv.schema_type != "AVRO":
            out["schemaType"] = sv.schema_type
        if sv.references:
            out["references"] = [r.to_json() for r in sv.references]
        out["schema"] = self._formatted(sv.schema_type, sv.schema, sv.references, fmt)
        return out

    def _formatted(self, schema_type: str, schema: str, refs: tuple[SchemaReference, ...], fmt: str | None) -> str:
        if SCHEMA_TYPES[schema_type].answered_as_stored(schema, fmt):
            return schema
        with self.lock:
            references = self._resolve_references(refs, set())
        return SCHEMA_TYPES[schema_type].formatted(SCHEMA_TYPES[schema_type].parse(schema, references), fmt)

    def _require_subject(self, subject: str, deleted: bool) -> None:
        if not self.state.versions(subject, include_deleted=deleted):
            raise errors.subject_not_found(subject)

    def _find_version(self, subject: str, version: int, deleted: bool) -> SchemaValue:
        every = self.state.versions(subject, include_deleted=True)
        if not every:
            raise errors.subject_not_found(subject)
        if version == -1:
            candidates = every if deleted else [sv for sv in every if not sv.deleted]
            if not candidates:
                raise errors.subject_not_found(subject)
            return candidates[-1]
        sv = self.state.version(subject, version)
        if sv is None:
            raise errors.version_not_found(version)
        if sv.deleted and not deleted:
            raise errors.version_not_found(version)
        return sv

    def _effective_level(self, subject: str) -> str:
        return self.state.config(subject) or self.state.config(None) or self.settings.compatibility_level

    def _effective_mode(self, subject: str) -> str:
        return self.state.mode(subject) or self.state.mode(None) or "READWRITE"

    def _require_writable(self, subject: str) -> None:
        if self._effective_mode(subject) == "READONLY":
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    def _refuse_if_referenced(self, sv: SchemaValue) -> None:
        for subject, version in self.state.referenced_by(sv.subject, sv.version):
            user = self.state.version(subject, version)
            if user is not None:
                raise errors.reference_exists(f"{{subject={sv.subject},version={sv.version}}}")

    def _clear_subject_settings(self, subject: str) -> list[StoreRecord]:
        records = []
        if self.state.config(subject) is not None:
            records.append(StoreRecord(StoreKey(KEYTYPE_CONFIG, subject)))
        if self.state.mode(subject) is not None:
            records.append(StoreRecord(StoreKey(KEYTYPE_MODE, subject)))
        return records

    def _max_id_guard(self, removed: list[SchemaValue]) -> list[StoreRecord]:
        """Before the last holder of the highest id is erased, a record keeps that id from being given again."""
        if any(sv.id >= self.state.max_id for sv in removed):
            return [StoreRecord(StoreKey(KEYTYPE_MAX_ID), {"maxId": self.state.max_id})]
        return []
