"""The API registry: which Kafka APIs the broker serves, at which versions, by which handler.

Each handler module in ``tidelake.broker.handlers`` registers its handlers with ``@api(...)``;
importing ``tidelake.broker.handlers`` imports them all. The dispatcher looks handlers up here and
ApiVersions advertises exactly what is registered, so adding an API is one decorated function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from kafka.protocol.metadata import ApiVersionsResponse

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
    """Register ``handler(broker: BrokerContext, ctx: RequestContext, request) -> response``."""

    def deco(fn: Handler) -> Handler:
        key = request_cls.API_KEY
        REGISTRY[key] = ApiSpec(key, request_cls.name, min_version,
                                request_cls.max_version if max_version is None else max_version,
                                request_cls, response_cls, fn)
        return fn

    return deco


def api_versions_response(version: int, error_code: int = 0) -> ApiVersionsResponse:
    """ApiVersions' answer: every registered API with the versions it is served at."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in sorted(REGISTRY.values(), key=lambda s: s.api_key)]
    return ApiVersionsResponse(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0,
                               supported_features=[], finalized_features_epoch=-1, finalized_features=[],
                               zk_migration_ready=False)
