"""``RegistryLookup``: what a Kafka broker asks a schema registry before accepting records (Confluent Server's
broker-side schema validation): under which subjects a schema id is registered, and the schema itself (its
record name, for the record-name subject strategies). A client of the REST API, so any Confluent-compatible
registry serves; answers are cached for ``cache_s`` (an id found once stays valid for that long; an id not
found is asked again next time, since it may be registered at any moment).
"""
from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass


class RegistryUnavailable(Exception):
    """The registry did not answer (the message names it and why)."""


@dataclass(frozen=True)
class RegisteredSchema:
    schema_type: str
    schema: str
    subjects: frozenset[str]      # the subjects with a live version holding this id


class RegistryLookup:
    def __init__(self, url: str, timeout_s: float, cache_s: float, user_info: str | None = None,
                 ssl_context: ssl.SSLContext | None = None):
        self._url = url.rstrip("/")
        self._timeout_s = timeout_s
        self._cache_s = cache_s
        self._auth = "Basic " + base64.b64encode(user_info.encode()).decode() if user_info else None
        self._ssl_context = ssl_context
        self._cache: dict[int, tuple[float, RegisteredSchema]] = {}
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self._url

    def cached(self, schema_id: int) -> RegisteredSchema | None:
        """The cached answer for the id, without asking (None: not cached, or expired)."""
        with self._lock:
            hit = self._cache.get(schema_id)
        if hit is None or time.monotonic() - hit[0] > self._cache_s:
            return None
        return hit[1]

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        """The id's schema and subjects (None: no such id). Blocking: call off the event loop."""
        hit = self.cached(schema_id)
        if hit is not None:
            return hit
        schema = self._get(f"/schemas/ids/{schema_id}?format=serialized")   # Protobuf: the descriptor
        if schema is None:
            return None
        versions = self._get(f"/schemas/ids/{schema_id}/versions") or []
        found = RegisteredSchema(schema.get("schemaType", "AVRO"), schema["schema"],
                                 frozenset(v["subject"] for v in versions))
        with self._lock:
            self._cache[schema_id] = (time.monotonic(), found)
        return found

    def _get(self, path: str):
        request = urllib.request.Request(self._url + path, headers={"Accept": "application/json"})
        if self._auth:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s, context=self._ssl_context) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise RegistryUnavailable(f"schema registry {self._url} answered {e.code} to {path}") from None
        except urllib.error.URLError as e:
            raise RegistryUnavailable(f"schema registry {self._url}: {e.reason}") from None
        except (OSError, ValueError) as e:
            raise RegistryUnavailable(f"schema registry {self._url}: {e}") from None
