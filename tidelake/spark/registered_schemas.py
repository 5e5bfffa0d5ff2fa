"""The pipeline's reads of a Schema Registry (Confluent's REST API): schemas by id, a subject's latest version.

``RegisteredSchemas(config)`` pickles as its config; in a process (the driver, each Spark Python worker) it
shares one Confluent ``SchemaRegistryClient`` per config and keeps every schema it fetched by id, so a task
asks the registry once per schema id for the life of its worker. Protobuf schemas are fetched in the
registry's ``serialized`` format (a base64 ``FileDescriptorProto``), with their references, as Confluent's
own Protobuf deserializer does.

A schema id the registry does not know is ``UnknownSchemaId`` (its records are bad records); a registry that
cannot be reached or answers with a server error is ``RegistryUnavailable`` (the batch fails, nothing is
committed, and a restart reads it again).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tidelake.spark.decode_errors import BadChangeEvent, RegistryUnavailable

# The registry's error codes for "not found" (https://docs.confluent.io/platform/current/schema-registry/develop/
# api.html#errors): subject, version, schema.
SUBJECT_NOT_FOUND, VERSION_NOT_FOUND, SCHEMA_NOT_FOUND = 40401, 40402, 40403


@dataclass(frozen=True)
class SchemaRegistryConfig:
    """``schema_registry:`` of a pipeline: where the registry is and how to log in (Confluent's client
    settings ``url``, ``basic.auth.user.info``, ``ssl.*``, ``timeout`` with ``_`` for ``.``)."""
    url: str
    basic_auth_user_info: str | None = None  # USER:PASSWORD (HTTP basic authentication)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    timeout: float = 10.0  # seconds per request: a registry that is down fails the pipeline within it
    max_retries: int = 1

    def client_config(self) -> dict:
        conf = {"url": self.url, "timeout": self.timeout, "max.retries": self.max_retries,
                "basic.auth.user.info": self.basic_auth_user_info, "ssl.ca.location": self.ssl_ca_location,
                "ssl.certificate.location": self.ssl_certificate_location, "ssl.key.location": self.ssl_key_location}
        if self.basic_auth_user_info is not None:
            conf["basic.auth.credentials.source"] = "USER_INFO"
        return {k: v for k, v in conf.items() if v is not None}


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as the registry holds it: its id, type (AVRO, PROTOBUF, JSON) and text; for Protobuf the
    base64 descriptors of the files it imports (by import name), in dependency order."""
    schema_id: int
    schema_type: str
    text: str
    references: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SubjectVersion:
    subject: str
    version: int
    schema: RegisteredSchema


@dataclass
class _Shared:
    client: SchemaRegistryClient
    by_id: dict[tuple[int, str], RegisteredSchema] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_SHARED: dict[SchemaRegistryConfig, _Shared] = {}
_SHARED_LOCK = threading.Lock()


class RegisteredSchemas:
    """Schemas of one registry, fetched once per id and process."""

    def __init__(self, config: SchemaRegistryConfig):
        self.config = config

    def __reduce__(self):
        return RegisteredSchemas, (self.config,)

    def _shared(self) -> _Shared:
        with _SHARED_LOCK:
            shared = _SHARED.get(self.config)
            if shared is None:
                shared = _SHARED[self.config] = _Shared(SchemaRegistryClient(self.config.client_config()))
            return shared

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SchemaRegistryError as e:
            if e.http_status_code == 404 or e.error_code in (SUBJECT_NOT_FOUND, VERSION_NOT_FOUND,
                                                              SCHEMA_NOT_FOUND):
                raise
            if e.http_status_code is not None and 400 <= e.http_status_code < 500:
                raise RegistryUnavailable(f"schema registry {self.config.url} refused {what}: "
                                          f"{e.error_message} (HTTP {e.http_status_code})") from None
            raise RegistryUnavailable(f"schema registry {self.config.url} failed {what}: {e.error_message}") from None
        except Exception as e:  # connection refused, timeout, TLS: the client's transport errors
            raise RegistryUnavailable(f"schema registry {self.config.url} unreachable ({what}): "
                                      f"{type(e).__name__}: {e}".splitlines()[0]) from None

    def by_id(self, schema_id: int, fmt: str | None = None) -> RegisteredSchema:
        """The schema with this id (``fmt='serialized'`` for Protobuf descriptors); UnknownSchemaId if the
        registry has none."""
        shared = self._shared()
        key = (int(schema_id), fmt or "")
        found = shared.by_id.get(key)
        if found is not None:
            return found
        try:
            schema = self._call(f"schema id {schema_id}", shared.client.get_schema, int(schema_id), fmt=fmt)
        except SchemaRegistryError:
            raise UnknownSchemaId(schema_id) from None
        registered = RegisteredSchema(int(schema_id), schema.schema_type or "AVRO", schema.schema_str,
                                      self._references(schema, fmt))
        with shared.lock:
            shared.by_id[key] = registered
        return registered

    def _references(self, schema, fmt: str | None) -> tuple[tuple[str, str], ...]:
        """Every schema ``schema`` imports, depth first (imports before importers), as (name, text)."""
        out: list[tuple[str, str]] = []
        seen: set[str] = set()

        def visit(refs):
            for ref in refs or []:
                if ref.name in seen:
                    continue
                seen.add(ref.name)
                got = self._call(f"reference {ref.name}", self._shared().client.get_version, ref.subject,
                                 ref.version, fmt=fmt)
                visit(got.schema.references)
                out.append((ref.name, got.schema.schema_str))
        visit(schema.references)
        return tuple(out)

    def latest(self, subject: str, fmt: str | None = None) -> SubjectVersion | None:
        """The subject's latest version, or None when the subject has none. The version list is asked each
        time (a new version may have been registered since); a version's schema, which never changes, is
        the client's cached one."""
        shared = self._shared()
        try:
            versions = self._call(f"the versions of subject {subject}", shared.client.get_versions, subject)
            if not versions:
                return None
            got = self._call(f"version {max(versions)} of subject {subject}", shared.client.get_version,
                             subject, max(versions), fmt=fmt)
        except SchemaRegistryError:
            return None
        schema = RegisteredSchema(got.schema_id, got.schema.schema_type or "AVRO", got.schema.schema_str,
                                  self._references(got.schema, fmt))
        return SubjectVersion(subject, got.version, schema)


class UnknownSchemaId(BadChangeEvent):
    """A record framed with a schema id the registry does not have."""

    def __init__(self, schema_id: int):
        super().__init__(f"schema id {schema_id} is not in the schema registry")
        self.schema_id = schema_id
