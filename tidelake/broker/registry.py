"""The API registry: which Kafka APIs the broker serves, at which versions, by which handler.

Each domain module (``api_core`` for produce/fetch/admin, ``api_groups`` for the group
coordinator, ``api_txn`` for transactions) registers its handlers with ``@api(...)``. The server
looks handlers up here and ApiVersions advertises exactly what is registered, so adding an API is
one decorated function in one module.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    request_cls: Any  # kafka-python ApiMessage request class (decodes the JSON-spec'd body)
    response_cls: Any  # kafka-python ApiMessage response class
    handler: Handler


REGISTRY: dict[int, ApiSpec] = {}


def api(request_cls, response_cls, min_version: int = 0, max_version: int | None = None):
    """Register ``handler(broker, ctx, request) -> response`` for a request class."""

    def deco(fn: Handler) -> Handler:
        key = request_cls.API_KEY
        REGISTRY[key] = ApiSpec(key, request_cls.name, min_version,
                                request_cls.max_version if max_version is None else max_version,
                                request_cls, response_cls, fn)
        return fn

    return deco
