"""Confluent Schema Registry's REST API as a Starlette application.

Every endpoint answers ``application/vnd.schemaregistry.v1+json``, errors as ``{"error_code", "message"}`` with
Confluent's codes. Handlers run in Starlette's thread pool (a write waits for Kafka), never on the event loop.
A write that reaches a process that is not the primary is forwarded to the primary with its body and
credentials, as Confluent's followers do; reads are answered locally.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import unquote, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tidelake.schema_registry import errors
from tidelake.schema_registry.forwarding import FORWARDED_HEADER, Forwarder
from tidelake.schema_registry.http_auth import BasicAuth, BasicAuthMiddleware
from tidelake.schema_registry.registry import SCHEMA_TYPES, SchemaRegistry, SchemaRequest

log = logging.getLogger("tidelake.schema_registry.rest")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryJSON(JSONResponse):
    media_type = CONTENT_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    run: Callable[..., Any]     # (registry, request params, body) -> JSON-able
    writes: bool = False
    takes_body: bool = False

    def runs_inline(self, query) -> bool:
        """A read answered from the in-memory state alone runs on the event loop (a thread hop costs more than
        the read); writes, and reads that parse a schema (``?format=``, a request body), go to the thread pool."""
        return self.method == "GET" and "format" not in query


def _flag(params, name: str) -> bool:
    return str(params.get(name, "false")).lower() == "true"


def _schema_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise errors.schema_not_found() from None


def _body(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except json.JSONDecodeError as e:
        raise errors.RegistryError(400, 400, f"Unrecognized JSON body: {e}") from None


def _compatibility_body(body: Any) -> Any:
    if not isinstance(body, dict):
        raise errors.unprocessable("The request body must be a JSON object with 'compatibility'")
    return body.get("compatibility", body.get("compatibilityLevel"))


def _mode_body(body: Any) -> Any:
    if not isinstance(body, dict):
        raise errors.unprocessable("The request body must be a JSON object with 'mode'")
    return body.get("mode")


def _compatibility_answer(problems: list[str], verbose: bool) -> dict:
    answer: dict = {"is_compatible": not problems}
    if verbose:
        answer["messages"] = problems
    return answer


def _config_of(registry: SchemaRegistry, subject: str | None, q) -> dict:
    level = registry.compatibility_level(subject, _flag(q, "defaultToGlobal"))
    if level is None:
        raise errors.subject_compatibility_not_configured(subject or "")
    return {"compatibilityLevel": level}


def _mode_of(registry: SchemaRegistry, subject: str | None, q) -> dict:
    mode = registry.mode(subject, _flag(q, "defaultToGlobal"))
    if mode is None:
        raise errors.subject_mode_not_configured(subject or "")
    return {"mode": mode}


ENDPOINTS = [
    Endpoint("GET", "/", lambda r, p, q, b: {}),
    Endpoint("GET", "/schemas/types", lambda r, p, q, b: sorted(SCHEMA_TYPES)),
    Endpoint("GET", "/schemas", lambda r, p, q, b: r.schemas(q.get("subjectPrefix", ""), _flag(q, "deleted"),
                                                             _flag(q, "latestOnly"))),
    Endpoint("GET", "/schemas/ids/{id}", lambda r, p, q, b: r.schema_by_id(
        _schema_id(p["id"]), q.get("subject"), q.get("format"))),
    Endpoint("GET", "/schemas/ids/{id}/schema", lambda r, p, q, b: r.schema_by_id(
        _schema_id(p["id"]), q.get("subject"), q.get("format"))["schema"]),
    Endpoint("GET", "/schemas/ids/{id}/subjects", lambda r, p, q, b: r.subjects_of_id(
        _schema_id(p["id"]), _flag(q, "deleted"))),
    Endpoint("GET", "/schemas/ids/{id}/versions", lambda r, p, q, b: r.versions_of_id(
        _schema_id(p["id"]), _flag(q, "deleted"))),
    Endpoint("GET", "/subjects", lambda r, p, q, b: r.subjects(_flag(q, "deleted"), q.get("subjectPrefix", ""))),
    Endpoint("GET", "/subjects/{subject}/versions", lambda r, p, q, b: r.versions(p["subject"], _flag(q, "deleted"))),
    Endpoint("GET", "/subjects/{subject}/versions/{version}", lambda r, p, q, b: r.version(
        p["subject"], p["version"], _flag(q, "deleted"), q.get("format"))),
    Endpoint("GET", "/subjects/{subject}/versions/{version}/schema", lambda r, p, q, b: r.version(
        p["subject"], p["version"], _flag(q, "deleted"), q.get("format"))["schema"]),
    Endpoint("GET", "/subjects/{subject}/versions/{version}/referencedby", lambda r, p, q, b: r.referenced_by(
        p["subject"], p["version"])),
    Endpoint("POST", "/subjects/{subject}/versions", lambda r, p, q, b: r.register(
        p["subject"], SchemaRequest.from_json(b)), writes=True, takes_body=True),
    Endpoint("POST", "/subjects/{subject}", lambda r, p, q, b: r.lookup(
        p["subject"], SchemaRequest.from_json(b), _flag(q, "deleted")), takes_body=True),
    Endpoint("DELETE", "/subjects/{subject}", lambda r, p, q, b: r.delete_subject(
        p["subject"], _flag(q, "permanent")), writes=True),
    Endpoint("DELETE", "/subjects/{subject}/versions/{version}", lambda r, p, q, b: r.delete_version(
        p["subject"], p["version"], _flag(q, "permanent")), writes=True),
    Endpoint("GET", "/config", lambda r, p, q, b: _config_of(r, None, q)),
    Endpoint("PUT", "/config", lambda r, p, q, b: {"compatibility": r.set_compatibility(
        None, _compatibility_body(b))}, writes=True, takes_body=True),
    Endpoint("DELETE", "/config", lambda r, p, q, b: {"compatibilityLevel": r.delete_compatibility(None)},
             writes=True),
    Endpoint("GET", "/config/{subject}", lambda r, p, q, b: _config_of(r, p["subject"], q)),
    Endpoint("PUT", "/config/{subject}", lambda r, p, q, b: {"compatibility": r.set_compatibility(
        p["subject"], _compatibility_body(b))}, writes=True, takes_body=True),
    Endpoint("DELETE", "/config/{subject}", lambda r, p, q, b: {"compatibilityLevel": r.delete_compatibility(
        p["subject"])}, writes=True),
    Endpoint("POST", "/compatibility/subjects/{subject}/versions/{version}", lambda r, p, q, b: _compatibility_answer(
        r.check_compatibility(p["subject"], p["version"], SchemaRequest.from_json(b)), _flag(q, "verbose")),
        takes_body=True),
    Endpoint("POST", "/compatibility/subjects/{subject}/versions", lambda r, p, q, b: _compatibility_answer(
        r.check_compatibility(p["subject"], None, SchemaRequest.from_json(b)), _flag(q, "verbose")),
        takes_body=True),
    Endpoint("GET", "/mode", lambda r, p, q, b: _mode_of(r, None, q)),
    Endpoint("PUT", "/mode", lambda r, p, q, b: {"mode": r.set_mode(None, _mode_body(b), _flag(q, "force"))},
             writes=True, takes_body=True),
    Endpoint("GET", "/mode/{subject}", lambda r, p, q, b: _mode_of(r, p["subject"], q)),
    Endpoint("PUT", "/mode/{subject}", lambda r, p, q, b: {"mode": r.set_mode(
        p["subject"], _mode_body(b), _flag(q, "force"))}, writes=True, takes_body=True),
    Endpoint("DELETE", "/mode/{subject}", lambda r, p, q, b: {"mode": r.delete_mode(p["subject"])}, writes=True),
]


@dataclass(frozen=True)
class _Pattern:
    endpoint: Endpoint
    parts: tuple[str, ...]        # literal segments, or "{name}" for a path parameter

    def match(self, segments: list[str]) -> dict[str, str] | None:
        if len(segments) != len(self.parts):
            return None
        params = {}
        for part, segment in zip(self.parts, segments):
            if part.startswith("{"):
                params[part[1:-1]] = segment
            elif part != segment:
                return None
        return params


class Router:
    """Matches on the raw path split at its slashes, each segment then decoded, because a subject may hold a
    ``/`` (``%2F``, as Protobuf references' subjects do: ``google/type/date.proto``), which a router working on
    the decoded path would take for a separator."""

    def __init__(self, endpoints: list[Endpoint]):
        self._patterns = [_Pattern(e, tuple(p for p in e.path.split("/") if p)) for e in endpoints]

    def find(self, method: str, raw_path: bytes) -> tuple[Endpoint, dict[str, str]]:
        segments = [unquote(s) for s in raw_path.decode("latin-1").split("/") if s]
        allowed = False
        for pattern in self._patterns:
            params = pattern.match(segments)
            if params is None:
                continue
            if pattern.endpoint.method == method:
                return pattern.endpoint, params
            allowed = True
        raise errors.method_not_allowed() if allowed else errors.not_found("/" + "/".join(segments))


def _dispatcher(router: Router, registry: SchemaRegistry, forwarder: Forwarder):
    async def dispatch(request: Request) -> Response:
        endpoint, path_params = router.find(request.method, request.scope.get("raw_path") or
                                            request.url.path.encode())
        raw = await request.body() if endpoint.takes_body else b""
        if endpoint.writes and not forwarder.is_primary():
            answer = await run_in_threadpool(
                forwarder.forward, request.method, request.scope.get("raw_path", b"").decode("latin-1") or
                request.url.path, urlencode(list(request.query_params.multi_items())), raw,
                request.headers.get("authorization"), request.headers.get(FORWARDED_HEADER) is not None)
            return Response(answer.body, status_code=answer.status, media_type=CONTENT_TYPE)
        body = _body(raw) if endpoint.takes_body else None
        if endpoint.takes_body and body is None:
            raise errors.unprocessable("A JSON request body is required")
        if endpoint.runs_inline(request.query_params):
            result = endpoint.run(registry, path_params, request.query_params, body)
        else:
            result = await run_in_threadpool(endpoint.run, registry, path_params, request.query_params, body)
        return RegistryJSON(result)
    return dispatch


async def _registry_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.RegistryError)
    return RegistryJSON(exc.body(), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        error = errors.not_found(request.url.path)
    elif exc.status_code == 405:
        error = errors.method_not_allowed()
    else:
        error = errors.RegistryError(exc.status_code, exc.status_code, str(exc.detail))
    return RegistryJSON(error.body(), status_code=error.status)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("%s %s: %s: %s", request.method, request.url.path, type(exc).__name__, exc,
              exc_info=log.isEnabledFor(logging.DEBUG))
    return RegistryJSON({"error_code": 50001, "message": f"{type(exc).__name__}: {exc}"}, status_code=500)


def create_app(registry: SchemaRegistry, forwarder: Forwarder, extra_routes: list[Route] | None = None,
               auth: BasicAuth | None = None) -> Starlette:
    routes = [Route("/{path:path}", _dispatcher(Router(ENDPOINTS), registry, forwarder),
                    methods=["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])]
    middleware = [Middleware(BasicAuthMiddleware, auth=auth)] if auth is not None else []
    return Starlette(routes=list(extra_routes or []) + routes, middleware=middleware,
                     exception_handlers={errors.RegistryError: _registry_error, HTTPException: _http_error,
                                         Exception: _unexpected})

