"""Request dispatch: one request frame in, its response frame out.

The API key and version are checked against the registry; the body is decoded (hand-written codecs
for Produce and Fetch, kafka-python's JSON-spec codecs for the rest), the handler runs, and its
answer is encoded after the response header. A registered API asked at a version we do not serve
gets UNSUPPORTED_VERSION in a response at that version (``error_response``); only an unknown API
key, an undecodable body (including a null in a field its spec does not let be null, as Kafka's
readers refuse it) or a version its spec does not define at all raise ``FramingError``, and the
transport then closes that connection only.
"""
from __future__ import annotations

import logging
import struct
from bisect import bisect_left
from time import perf_counter

import tidelake.broker.handlers  # noqa: F401 (registers every handler in REGISTRY)
from tidelake.broker.access import ALL_GRANTED
from tidelake.broker.authorization import authorize, listed, merge_refused
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.handlers.sasl import raw_sasl_token
from tidelake.broker.error_response import error_response
from tidelake.broker.registry import REGISTRY, ApiDeclaration, api_versions_response
from tidelake.errors import KafkaApiError, UnsupportedVersion
from tidelake.observability.broker_stats import LATENCY_STRIDE, MAX_API_KEYS, BrokerStats
from tidelake.observability.histogram import LATENCY_BUCKETS
from tidelake.protocol.connection import expects_response
from tidelake.protocol.fast import decode_fetch_request, decode_produce_request
from tidelake.protocol.framing import FramingError, encode_response_frame, parse_request_header, peek_api
from tidelake.protocol.nulls import NullChecks
from tidelake.security.session import Session

log = logging.getLogger("tidelake.broker.dispatch")

API_VERSIONS_KEY = 18
# Hand-written decoders for hot-path requests (same attribute names as kafka-python's classes).
FAST_DECODERS = {0: decode_produce_request, 1: decode_fetch_request}
_HEAD = struct.Struct(">ii")
NULL_CHECKS = NullChecks()


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether a request uses header v2 (tagged fields): its API is flexible at that version."""
    spec = REGISTRY.get(api_key)
    if spec is None:
        return False
    first, _last = spec.request_cls._flexible_versions or (-1, -1)
    return first >= 0 and api_version >= first


class Dispatcher:
    def __init__(self, context: BrokerContext):
        self.context = context
        self.authorizing = context.security.authorizer is not None
        self.observe(context.metrics)

    def observe(self, stats: BrokerStats | None) -> None:
        """Time and count requests into ``stats``, or (None: a broker without metrics.listen) not at all."""
        self.stats = stats

    def handle_raw_sasl_token(self, frame, session: Session) -> bytes:
        """A frame after SaslHandshake v0: a bare SASL token, answered with a bare token (FramingError
        when the login fails: the connection is closed)."""
        return raw_sasl_token(self.context, session, frame)

    async def handle_frame(self, frame, session: Session) -> bytes | list | None:
        """Answer one request frame: the response frame (bytes, or a list of chunks to write in
        order), or None when the request expects no response (acks=0). Raises FramingError when the
        connection must be closed."""
        api_key, api_version, correlation_id = peek_api(frame)
        stats = self.stats
        began = perf_counter() if stats is not None else 0.0
        try:
            spec = REGISTRY.get(api_key)
            if spec is None:
                raise FramingError(f"unknown api key {api_key}")
            if not spec.min_version <= api_version <= spec.max_version:
                if stats is not None:
                    stats.error(api_key, UnsupportedVersion.code)
                return self._unsupported_version_response(spec, api_version, correlation_id, frame)
            header, body_pos = parse_request_header(frame, is_flexible)
            try:
                fast = FAST_DECODERS.get(api_key)
                if fast is not None:
                    request = fast(frame, body_pos, api_version)
                else:
                    request = spec.request_cls.decode(memoryview(frame)[body_pos:], version=api_version)
            except Exception as e:  # the codec raises struct.error, ValueError, IndexError, UnicodeError…
                raise FramingError(f"cannot decode {spec.name} v{api_version}: {e!r}") from e
            if fast is None:
                null_field = NULL_CHECKS.find(spec.request_cls, api_version, request)
                if null_field is not None:  # as unparseable to Kafka as a truncated body
                    raise FramingError(f"cannot decode {spec.name} v{api_version}: non-nullable field {null_field} "
                                       "was serialized as null")
            try:
                if self.authorizing:
                    access = spec.access
                    authorized = authorize(self.context, access, session.principal, session.client_host,
                                           api_version, request)
                    request = authorized.request
                    ctx = RequestContext(header, session.client_host, session, authorized.grants)
                    response = await spec.handler(self.context, ctx, request)
                    for refusal in authorized.refusals:  # refused items answered with their error, after the rest
                        merge_refused(access, api_version, response,
                                      _error_response(spec, refusal.request, api_version, refusal.code, None))
                    if access.listing is not None and response is not None:
                        response = listed(self.context, access, session.principal, session.client_host, response)
                else:
                    ctx = RequestContext(header, session.client_host, session, ALL_GRANTED)
                    response = await spec.handler(self.context, ctx, request)
            except KafkaApiError as e:
                # The whole request failed: report the error at the top level, or on every item it named.
                if not expects_response(api_key, request):
                    raise FramingError(f"acks=0 {spec.name} failed: {e!r}") from e
                response = _error_response(spec, request, api_version, e.code, str(e) or None)
            if response is None:
                return None
            if stats is not None and not isinstance(response, (bytes, bytearray, memoryview, list)):
                stats.response_errors(api_key, response)  # Produce/Fetch (bytes) count in their handlers
            return _encode_response(spec, api_version, correlation_id, response)
        finally:
            if stats is not None:  # inline, no call: two clock reads and two list updates per request
                elapsed = perf_counter() - began
                if 0 <= api_key < MAX_API_KEYS:
                    stats.latency_counts[api_key * LATENCY_STRIDE + bisect_left(LATENCY_BUCKETS, elapsed)] += 1
                    stats.latency_sums[api_key] += elapsed

    def _unsupported_version_response(self, spec: ApiDeclaration, api_version: int, correlation_id: int,
                                      frame) -> bytes:
        """UNSUPPORTED_VERSION for a registered API asked at a version outside what we serve.

        ApiVersions: a v0 response listing our ranges (clients send their newest version first and
        retry with one we serve). Any other API at a version its spec defines: the response at that
        very version (the client decodes it with that version's schema) with the error wherever the
        schema carries one. A version the spec does not define cannot be answered in a form the
        client would parse, so only then is the connection closed."""
        code = UnsupportedVersion.code
        if spec.api_key == API_VERSIONS_KEY:
            resp = api_versions_response(0, error_code=code)
            return encode_response_frame(correlation_id, resp.encode(version=0), flexible_header=False)
        served = f"serving v{spec.min_version}-{spec.max_version}"
        spec_max = min(spec.request_cls.max_version, spec.response_cls.max_version)
        if not 0 <= api_version <= spec_max:
            log.warning("closing connection: %s v%d is not defined by its spec (v0-%d), so no response "
                        "can be encoded (%s)", spec.name, api_version, spec_max, served)
            raise FramingError(f"{spec.name} v{api_version} is beyond its spec (v0-{spec_max})")
        _header, body_pos = parse_request_header(frame, is_flexible)
        try:
            request = spec.request_cls.decode(memoryview(frame)[body_pos:], version=api_version)
        except Exception as e:  # answered anyway, without echoing the request's items
            log.info("cannot decode %s v%d (unsupported, %s): %r", spec.name, api_version, served, e)
            request = None
        if request is not None and NULL_CHECKS.find(spec.request_cls, api_version, request) is not None:
            request = None  # nothing to echo from a request with a null where items belong
        message = f"{spec.name.removesuffix('Request')} v{api_version} is not supported ({served})"
        if not expects_response(spec.api_key, request):
            log.warning("closing connection: acks=0 %s; the producer expects no response", message)
            raise FramingError(f"acks=0 {message}")
        resp = _error_response(spec, request, api_version, code, message)
        return _encode_response(spec, api_version, correlation_id, resp)


def _error_response(spec: ApiDeclaration, request, api_version: int, code: int, message: str | None):
    try:
        return error_response(spec, request, api_version, code, message)
    except Exception as e:  # a schema shape the builder does not handle: say so, close
        log.exception("cannot build a %s v%d response carrying error %d", spec.name, api_version, code)
        raise FramingError(f"no error response for {spec.name} v{api_version}") from e


def _encode_response(spec: ApiDeclaration, api_version: int, correlation_id: int, response) -> bytes | list:
    flexible_header = spec.api_key != API_VERSIONS_KEY and spec.response_cls.flexible_version_q(api_version)
    if type(response) is list:
        # pre-encoded body in chunks (Fetch: record bytes are not copied again)
        size = sum(len(c) for c in response)
        head = _HEAD.pack(size + (5 if flexible_header else 4), correlation_id)
        return [head + b"\x00" if flexible_header else head, *response]
    if isinstance(response, (bytes, bytearray, memoryview)):
        body = response  # pre-encoded body (hot paths)
    else:
        body = response.encode(version=api_version)
    return encode_response_frame(correlation_id, body, flexible_header=flexible_header)
