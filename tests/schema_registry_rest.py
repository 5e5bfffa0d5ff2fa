"""Plain HTTP against a registry: what the REST API answers, status and JSON body."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

TIMEOUT_S = 15


@dataclass
class Answer:
    status: int
    body: Any
    content_type: str


class Rest:
    def __init__(self, url: str, auth: tuple[str, str] | None = None, verify: Any = True):
        self.url = url.rstrip("/")
        self.auth = auth
        self.verify = verify

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None, **params) -> Answer:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        r = requests.request(method, self.url + path, data=data, params={k: str(v).lower() if isinstance(v, bool)
                                                                          else v for k, v in params.items()},
                             headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                             auth=self.auth, timeout=TIMEOUT_S, verify=self.verify)
        try:
            parsed = r.json()
        except ValueError:
            parsed = r.text
        return Answer(r.status_code, parsed, r.headers.get("content-type", ""))

    def get(self, path: str, **params) -> Answer:
        return self.call("GET", path, **params)

    def post(self, path: str, body: Any = None, **params) -> Answer:
        return self.call("POST", path, body, **params)

    def put(self, path: str, body: Any = None, **params) -> Answer:
        return self.call("PUT", path, body, **params)

    def delete(self, path: str, **params) -> Answer:
        return self.call("DELETE", path, **params)

    def register(self, subject: str, schema: Any, schema_type: str | None = None, references=None) -> Answer:
        body: dict = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
        if schema_type:
            body["schemaType"] = schema_type
        if references:
            body["references"] = references
        return self.post(f"/subjects/{quote(subject, safe='')}/versions", body)


def record(name: str, *fields: tuple[str, Any], namespace: str | None = None) -> dict:
    """An Avro record schema; a field is (name, type) or (name, type, default)."""
    out: dict = {"type": "record", "name": name,
                 "fields": [{"name": f[0], "type": f[1], **({"default": f[2]} if len(f) > 2 else {})}
                            for f in fields]}
    if namespace:
        out["namespace"] = namespace
    return out
