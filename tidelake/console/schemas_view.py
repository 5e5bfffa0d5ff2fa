"""``SchemaCatalog``: the console's view of a schema registry (``--schema-registry-url``), through Confluent's own
``SchemaRegistryClient``: subjects with their latest version, a subject's versions, one version's schema.

Unreachable registry: ``RegistryUnavailable`` (the page answers 503 with the reason); a subject or version that
does not exist: ``KeyError`` (404).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.common._httpx_compat import httpx   # the HTTP library the client uses

_NOT_FOUND = (40401, 40402, 40403)


class RegistryUnavailable(RuntimeError):
    """The schema registry did not answer (the message says which and why)."""


@dataclass(frozen=True)
class SubjectRow:
    subject: str
    versions: int
    latest_version: int
    latest_id: int
    schema_type: str
    compatibility: str


@dataclass(frozen=True)
class VersionRow:
    version: int
    id: int
    schema_type: str
    references: list[str]        # "name -> subject v<version>"


@dataclass(frozen=True)
class SubjectDetail:
    subject: str
    compatibility: str
    versions: list[VersionRow]
    shown: VersionRow
    schema_text: str             # the shown version's schema, pretty-printed when it is JSON


class SchemaCatalog:
    def __init__(self, url: str, timeout_s: float, user_info: str | None = None):
        conf = {"url": url, "timeout": timeout_s}
        if user_info:
            conf["basic.auth.user.info"] = user_info
        self.url = url
        self._client = SchemaRegistryClient(conf)

    def subjects(self) -> list[SubjectRow]:
        def read():
            global_level = self._client.get_compatibility()
            rows = []
            for subject in self._client.get_subjects():
                latest = self._client.get_latest_version(subject)
                rows.append(SubjectRow(subject, len(self._client.get_versions(subject)), latest.version,
                                       latest.schema_id, latest.schema.schema_type or "AVRO",
                                       self._level(subject, global_level)))
            return rows
        return self._ask(read)

    def subject(self, subject: str, version: int | None = None) -> SubjectDetail:
        def read():
            numbers = self._client.get_versions(subject)
            rows, shown_schema = [], None
            for number in numbers:
                registered = self._client.get_version(subject, number)
                schema = registered.schema
                rows.append(VersionRow(number, registered.schema_id, schema.schema_type or "AVRO",
                                       [f"{r.name} -> {r.subject} v{r.version}" for r in schema.references or ()]))
                if number == (version if version is not None else numbers[-1]):
                    shown_schema = schema.schema_str
            if shown_schema is None:
                raise KeyError(f"version {version}")
            shown = next(r for r in rows if r.version == (version if version is not None else numbers[-1]))
            return SubjectDetail(subject, self._level(subject, self._client.get_compatibility()), rows, shown,
                                 _pretty(shown_schema))
        return self._ask(read)

    def _level(self, subject: str, global_level: str) -> str:
        try:
            return self._client.get_compatibility(subject)
        except SchemaRegistryError as e:
            if e.error_code == 40408:
                return f"{global_level} (global)"
            raise

    def _ask(self, read):
        try:
            return read()
        except SchemaRegistryError as e:
            if e.error_code in _NOT_FOUND:
                raise KeyError(e.error_message) from None
            raise RegistryUnavailable(f"schema registry {self.url}: {e.error_message} ({e.error_code})") from None
        except (httpx.HTTPError, OSError, ValueError) as e:
            raise RegistryUnavailable(f"schema registry {self.url}: {type(e).__name__}: {e}") from None


def _pretty(schema: str) -> str:
    try:
        return json.dumps(json.loads(schema), indent=2)
    except ValueError:
        return schema      # .proto text
