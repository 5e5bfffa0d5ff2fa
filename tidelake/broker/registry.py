"""The API registry: which Kafka APIs the broker serves, at which versions, by which handler, under which
authorization rule: one ``ApiDeclaration`` per API.

Each handler module in ``tidelake.broker.handlers`` declares its APIs with ``@api(...)`` on the handler;
importing ``tidelake.broker.handlers`` imports them all. The dispatcher looks declarations up here and
ApiVersions advertises exactly what is declared, so adding an API is one decorated function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from kafka.protocol.metadata import ApiVersionsResponse

from tidelake.broker.access import Access
from tidelake.broker.features import FINALIZED_FEATURES_EPOCH, Features

Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class ApiDeclaration:
    api_key: int
    name: str
    min_version: int
    max_version: int
    request_cls: Any  # the ApiMessage request class generated from Kafka's JSON spec (decodes the body)
    response_cls: Any  # the ApiMessage response class
    handler: Handler
    access: Access  # what the principal needs (tidelake.broker.access), applied by the dispatcher
    # the API's answer to a request failed as a whole, where the one derived from its spec
    # (tidelake.broker.error_response) cannot say it: (request, version, code, message) -> response
    error_response: Callable[[Any, int, int, str], Any] | None = None


REGISTRY: dict[int, ApiDeclaration] = {}


def api(request_cls, response_cls, min_version: int = 0, max_version: int | None = None, *, access: Access,
        error_response: Callable[[Any, int, int, str], Any] | None = None):
    """Declare ``handler(broker: BrokerContext, ctx: RequestContext, request) -> response`` as the one
    handler of ``request_cls``'s API, served at ``min_version``..``max_version``, under ``access``;
    ``error_response`` only where the spec-derived one cannot answer (see ``ApiDeclaration``)."""

    def deco(fn: Handler) -> Handler:
        key = request_cls.API_KEY
        if key in REGISTRY:
            raise ValueError(f"{request_cls.name} (api key {key}) is declared twice: "
                             f"{REGISTRY[key].handler.__qualname__} and {fn.__qualname__}")
        REGISTRY[key] = ApiDeclaration(key, request_cls.name, min_version,
                                       request_cls.max_version if max_version is None else max_version,
                                       request_cls, response_cls, fn, access, error_response)
        return fn

    return deco


def api_versions_response(version: int, error_code: int = 0, features: Features | None = None,
                          features_epoch: int = FINALIZED_FEATURES_EPOCH) -> ApiVersionsResponse:
    """ApiVersions' answer: every declared API with the versions it is served at, and (v3+) the broker's
    ``features`` (none: a v0 UNSUPPORTED_VERSION answer, which cannot carry them) finalized at ``features_epoch``
    (it must grow when a level changes: a client keeps the finalized features of the newest epoch it has seen)."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in sorted(REGISTRY.values(), key=lambda s: s.api_key)]
    if features is None:
        return ApiVersionsResponse(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0,
                                   supported_features=[], finalized_features_epoch=-1, finalized_features=[],
                                   zk_migration_ready=False)
    # below v4 a feature supported from level 0 is left out, as Kafka does (KAFKA-17492: older clients cannot read
    # a minimum of 0)
    supported = [f for f in features.supported() if version >= 4 or f.min_version != 0]
    return ApiVersionsResponse(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0,
                               supported_features=supported,
                               finalized_features_epoch=features_epoch,
                               finalized_features=features.finalized(), zk_migration_ready=False)
