"""The broker process: an asyncio (uvloop) TCP server speaking the Kafka protocol.

One ``KafkaConnection`` per client socket. Requests on a connection are handled strictly one after
another and answered in order (Kafka's own rule: a connection is muted while its request is in
flight), so pipelining clients get their responses in order. A malformed frame or a request over
``socket.request.max.bytes`` closes that connection only. A registered API asked at a version we do
not serve gets UNSUPPORTED_VERSION in a response at that version derived from the JSON schema
(``error_response``); only a version its spec does not define at all closes the connection.

``Broker`` holds what handlers need: ``config`` (BrokerConfig), ``logs`` (LogManager), ``metadata``
(topics and configs, persisted), ``node_id``, the advertised address, a producer-id allocator,
``append(...)`` which also wakes fetch long-pollers, ``create_topic(...)`` and periodic maintenance.
API handlers register in ``tidelake.broker.registry`` from ``api_core`` / ``api_groups`` / ``api_txn``;
those modules may define ``async def on_start(broker)`` / ``async def on_stop(broker)``.
"""
from __future__ import annotations

import asyncio
import collections
import importlib
import logging
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from tidelake.broker.config import BrokerConfig, validate_topic_configs
from tidelake.broker.metadata import MetadataStore, TopicInfo
from tidelake.broker.registry import REGISTRY, ApiSpec
from tidelake.errors import (InvalidPartitions, InvalidReplicationFactor, InvalidTopic, KafkaApiError,
                             TopicAlreadyExists, UnknownTopicOrPartition)
from tidelake.log import LogConfig, LogManager, PartitionLog
from tidelake.protocol.fast import decode_fetch_request, decode_produce_request
from tidelake.protocol.framing import (FrameDecoder, FramingError, RequestHeader, encode_response_frame,
                                       parse_request_header, peek_api)

log = logging.getLogger("tidelake.broker")

API_MODULES = ("tidelake.broker.api_core", "tidelake.broker.api_groups", "tidelake.broker.api_txn")
API_VERSIONS_KEY = 18
# Hand-written decoders for hot-path requests (same attribute names as kafka-python's classes).
FAST_DECODERS = {0: decode_produce_request, 1: decode_fetch_request}
UNSUPPORTED_VERSION = 35
_MAX_QUEUED_REQUESTS = 64  # per connection, before we stop reading from its socket
_COALESCE_MAX_CHUNKS = 64  # response chunks held back to be written together (see KafkaConnection._run)
_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def validate_topic_name(name: str | None) -> None:
    """Kafka's rule: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name or name in (".", "..") or len(name) > 249 or not set(name) <= _LEGAL_TOPIC_CHARS:
        raise InvalidTopic(f"invalid topic name {name!r}")


@dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""
    header: RequestHeader
    connection: "KafkaConnection"
    received_ms: int = field(default_factory=wall_clock_ms)

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def client_host(self) -> str:
        return self.connection.peer[0] if self.connection.peer else ""


class Broker:
    """A single-node Kafka-compatible broker. Use ``await start()`` / ``await stop()`` in a loop."""

    def __init__(self, data_dir: str | Path, config: BrokerConfig | Mapping[str, str] | None = None, *,
                 host: str = "127.0.0.1", port: int = 9092,
                 advertised_host: str | None = None, advertised_port: int | None = None):
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = config if isinstance(config, BrokerConfig) else BrokerConfig(config or {})
        explicit = {**self.config.static, **self.config.dynamic}
        self.node_id = int(explicit.get("node.id", explicit.get("broker.id", 1)))
        self.host, self.port = host, port
        self._advertised_host, self._advertised_port = advertised_host, advertised_port
        self.metadata = MetadataStore(self.data_dir, cluster_id=None)
        self.config.dynamic.update(self.metadata.dynamic_broker_configs)
        self.logs = LogManager(self.data_dir)
        self.group_coordinator: Any = None
        self.txn_coordinator: Any = None
        self.api_modules: list[Any] = []
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.base_events.Server | None = None
        self._maintenance_task: asyncio.Task | None = None
        self._fetch_waiters: dict[tuple[str, int], list[asyncio.Future]] = collections.defaultdict(list)
        self._started = False

    # -- addresses --------------------------------------------------------------------------------
    @property
    def advertised_host(self) -> str:
        if self._advertised_host:
            return self._advertised_host
        if self.host in ("", "0.0.0.0", "::"):  # a wildcard is not an address clients can dial
            return socket.gethostname()
        return self.host

    @property
    def advertised_port(self) -> int:
        return self._advertised_port or self.port

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        self.logs.load()
        # A log directory with no topic in the metadata (e.g. crash between mkdir and metadata write)
        # is adopted rather than ignored, so no data silently disappears.
        for (topic, partition), plog in self.logs.all_logs().items():
            info = self.metadata.topics.get(topic)
            if info is None:
                n = 1 + max(p for (t, p) in self.logs.all_logs() if t == topic)
                self.metadata.add_topic(TopicInfo(topic, n, internal=topic.startswith("__")))
                info = self.metadata.topics[topic]
            plog.update_config(self.log_config(topic))
        for info in list(self.metadata.topics.values()):  # partitions whose directory vanished
            for p in range(info.partitions):
                if self.logs.get(info.name, p) is None:
                    self.logs.create(info.name, p, self.log_config(info.name))
        self.api_modules = []
        for name in API_MODULES:
            try:
                self.api_modules.append(importlib.import_module(name))
            except ModuleNotFoundError as e:
                if e.name != name:
                    raise
        loop = asyncio.get_running_loop()
        # Bind first (the port is known to hooks, e.g. for FindCoordinator), accept only once the
        # coordinators have loaded their state.
        self._server = await loop.create_server(lambda: KafkaConnection(self), self.host, self.port,
                                                reuse_address=True, backlog=1024, start_serving=False)
        self.port = self._server.sockets[0].getsockname()[1]
        for mod in self.api_modules:
            hook = getattr(mod, "on_start", None)
            if hook is not None:
                await hook(self)
        await self._server.start_serving()
        self._maintenance_task = loop.create_task(self._maintenance_loop())
        self._started = True
        log.info("broker %d listening on %s:%d (advertised %s:%d), data in %s", self.node_id, self.host,
                 self.port, self.advertised_host, self.advertised_port, self.data_dir)

    async def stop(self) -> None:
        """Stop accepting, close connections, run on_stop hooks, flush and close every log."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._maintenance_task is not None:
            self._maintenance_task.cancel()
            try:
                await self._maintenance_task
            except (asyncio.CancelledError, Exception):
                pass
        for mod in reversed(self.api_modules):
            hook = getattr(mod, "on_stop", None)
            if hook is not None:
                try:
                    await hook(self)
                except Exception:
                    log.exception("on_stop of %s failed", mod.__name__)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):
                pass
            self._server = None
        for futs in self._fetch_waiters.values():
            for f in futs:
                if not f.done():
                    f.cancel()
        self._fetch_waiters.clear()
        self.logs.close()
        self._started = False
        log.info("broker %d stopped", self.node_id)

    async def _maintenance_loop(self) -> None:
        interval = max(0.01, self.config.get_int("broker.maintenance.interval.ms", 1000) / 1000)
        while True:
            await asyncio.sleep(interval)
            try:
                # roll by segment.ms, flush by flush.ms, retention, compaction
                self.logs.run_maintenance(wall_clock_ms(),
                                          compaction=self.config.get_bool("log.cleaner.enable", True))
            except Exception:
                log.exception("log maintenance failed")
            self._close_idle_connections()

    def _close_idle_connections(self) -> None:
        """Kafka's connections.max.idle.ms: drop connections with no request for that long."""
        limit = self.config.get_int("connections.max.idle.ms", 600000) / 1000
        now = time.monotonic()
        for conn in list(self.connections):
            if conn.idle_since is not None and now - conn.idle_since > limit:
                log.info("closing idle connection from %s", conn.peer)
                conn.close()

    # -- topics -----------------------------------------------------------------------------------
    def log_config(self, topic: str) -> LogConfig:
        info = self.metadata.topics.get(topic)
        overrides = info.configs if info is not None else {}
        return LogConfig.from_properties(self.config.effective_topic_configs(overrides))

    def min_insync_replicas(self, topic: str) -> int:
        info = self.metadata.topics.get(topic)
        value = info.configs.get("min.insync.replicas") if info is not None else None
        if value is None:
            value = self.config.topic_default("min.insync.replicas")[0]
        return int(value)

    def topic(self, name: str) -> TopicInfo | None:
        return self.metadata.topics.get(name)

    def create_topic(self, name: str, partitions: int | None = None, configs: Mapping[str, str] | None = None,
                     internal: bool = False, *, replication_factor: int = 1, validate_only: bool = False,
                     persist: bool = True) -> TopicInfo:
        """Create a topic and its partition logs. Raises TopicAlreadyExists / InvalidTopic /
        InvalidPartitions / InvalidReplicationFactor / InvalidConfig.

        ``persist=False``: the metadata file is not written here (an fsync would block the event loop);
        the caller awaits ``metadata.save_async()`` before acknowledging. A crash in between leaves
        partition directories without metadata, which ``start()`` adopts."""
        validate_topic_name(name)
        if name in self.metadata.topics:
            raise TopicAlreadyExists(f"Topic '{name}' already exists.")
        if partitions is None or partitions == -1:
            partitions = self.config.get_int("num.partitions", 1)
        if partitions <= 0:
            raise InvalidPartitions(f"Number of partitions must be larger than 0, got {partitions}")
        if replication_factor == -1:
            replication_factor = self.config.get_int("default.replication.factor", 1)
        if replication_factor != 1:
            raise InvalidReplicationFactor(
                f"Replication factor {replication_factor} larger than available brokers: 1")
        overrides = validate_topic_configs(dict(configs or {}))
        info = TopicInfo(name, partitions, overrides, internal)
        if validate_only:
            return info
        log_config = LogConfig.from_properties(self.config.effective_topic_configs(overrides))
        for p in range(partitions):
            self.logs.create(name, p, log_config)
        self.metadata.add_topic(info, save=persist)
        log.info("created topic %s with %d partitions", name, partitions)
        return info

    def delete_topic(self, name: str) -> None:
        if name not in self.metadata.topics:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist")
        self.metadata.remove_topic(name)
        self.logs.delete_topic(name)
        self._wake_topic(name)
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        info = self.metadata.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist")
        if count < info.partitions:
            raise InvalidPartitions(f"Topic currently has {info.partitions} partitions, which is higher than "
                                    f"the requested {count}.")
        if count == info.partitions:
            raise InvalidPartitions(f"Topic already has {info.partitions} partitions.")
        if validate_only:
            return
        cfg = self.log_config(name)
        for p in range(info.partitions, count):
            self.logs.create(name, p, cfg)
        info.partitions = count
        self.metadata.save()

    def alter_topic_configs(self, name: str, overrides: Mapping[str, str], *, validate_only: bool = False) -> None:
        """Replace a topic's config overrides (already merged by the caller for incremental alters)."""
        info = self.metadata.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist")
        normalised = validate_topic_configs(dict(overrides))
        if validate_only:
            return
        info.configs = normalised
        self.metadata.save()
        cfg = self.log_config(name)
        for p in range(info.partitions):
            plog = self.logs.get(name, p)
            if plog is not None:
                plog.update_config(cfg)

    def set_dynamic_broker_configs(self, changes: Mapping[str, str | None]) -> None:
        for k, v in changes.items():
            self.config.set_dynamic(k, v)
        self.metadata.dynamic_broker_configs = dict(self.config.dynamic)
        self.metadata.save()
        for name in list(self.metadata.topics):  # broker defaults back topic configs
            cfg = self.log_config(name)
            for p in range(self.metadata.topics[name].partitions):
                plog = self.logs.get(name, p)
                if plog is not None:
                    plog.update_config(cfg)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    # -- data -------------------------------------------------------------------------------------
    def append(self, topic: str, partition: int, data: bytes | bytearray | memoryview, *,
               now_ms: int | None = None, leader_epoch: int = 0):
        """Append client/coordinator RecordBatches to a partition and wake its fetch long-pollers.
        Raises UnknownTopicOrPartition or the log's errors (CorruptMessage, OutOfOrderSequenceNumber …)."""
        plog = self.logs.get(topic, partition)
        if plog is None:
            raise UnknownTopicOrPartition(f"{topic}-{partition}")
        result = plog.append(data, now_ms=wall_clock_ms() if now_ms is None else now_ms,
                             leader_epoch=leader_epoch)
        if not result.duplicate:
            self.notify_data(topic, partition)
        return result

    def append_marker(self, topic: str, partition: int, *, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int = 0, now_ms: int | None = None) -> int:
        """Write a COMMIT/ABORT control batch (transaction coordinator) and wake fetchers (the LSO moved)."""
        plog = self.logs.get(topic, partition)
        if plog is None:
            raise UnknownTopicOrPartition(f"{topic}-{partition}")
        offset = plog.append_marker(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                    coordinator_epoch=coordinator_epoch,
                                    now_ms=wall_clock_ms() if now_ms is None else now_ms)
        self.notify_data(topic, partition)
        return offset

    def notify_data(self, topic: str, partition: int) -> None:
        """Wake every Fetch waiting on this partition (new data, HW or LSO moved)."""
        waiters = self._fetch_waiters.pop((topic, partition), None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def _wake_topic(self, topic: str) -> None:
        for key in [k for k in self._fetch_waiters if k[0] == topic]:
            self.notify_data(*key)

    async def wait_for_data(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> None:
        """Sleep until one of ``partitions`` gets data (or HW/LSO moves) or the timeout passes."""
        if timeout_s <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for key in keys:
            self._fetch_waiters[key].append(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            for key in keys:
                lst = self._fetch_waiters.get(key)
                if lst is not None:
                    try:
                        lst.remove(fut)
                    except ValueError:
                        pass
                    if not lst:
                        self._fetch_waiters.pop(key, None)

    def allocate_producer_id(self) -> int:
        return self.metadata.allocate_producer_id()

    # -- request dispatch -------------------------------------------------------------------------
    @staticmethod
    def is_flexible(api_key: int, api_version: int) -> bool:
        spec = REGISTRY.get(api_key)
        if spec is None:
            return False
        first, _last = spec.request_cls._flexible_versions or (-1, -1)
        return first >= 0 and api_version >= first

    async def handle_frame(self, frame: bytes, conn: "KafkaConnection") -> bytes | list | None:
        """Answer one request frame. Returns the response frame (bytes, or a list of chunks to write in
        order), None for no response (acks=0).
        Raises FramingError when the connection must be closed."""
        api_key, api_version, correlation_id = peek_api(frame)
        spec = REGISTRY.get(api_key)
        if spec is None:
            raise FramingError(f"unknown api key {api_key}")
        if not spec.min_version <= api_version <= spec.max_version:
            return self._unsupported_version_response(spec, api_version, correlation_id, frame)
        header, body_pos = parse_request_header(frame, self.is_flexible)
        try:
            fast = FAST_DECODERS.get(api_key)
            if fast is not None:
                request = fast(frame, body_pos, api_version)
            else:
                request = spec.request_cls.decode(memoryview(frame)[body_pos:], version=api_version)
        except Exception as e:  # the codec raises struct.error, ValueError, IndexError, UnicodeError…
            raise FramingError(f"cannot decode {spec.name} v{api_version}: {e!r}") from e
        ctx = RequestContext(header, conn)
        try:
            response = await spec.handler(self, ctx, request)
        except KafkaApiError as e:
            # The whole request failed: report the error at the top level, or on every item it named.
            if _expects_no_response(spec, request):
                raise FramingError(f"acks=0 {spec.name} failed: {e!r}") from e
            response = self._error_response(spec, request, api_version, e.code, str(e) or None)
        if response is None:
            return None
        return self._encode_response(spec, api_version, correlation_id, response)

    def _encode_response(self, spec: ApiSpec, api_version: int, correlation_id: int, response) -> bytes | list:
        flexible_header = api_version >= 0 and spec.api_key != API_VERSIONS_KEY and \
            spec.response_cls.flexible_version_q(api_version)
        if isinstance(response, list):
            # pre-encoded body in chunks (Fetch: record bytes are not copied again)
            size = sum(len(c) for c in response)
            head = struct.pack(">ii", size + (5 if flexible_header else 4), correlation_id)
            return [head + b"\x00" if flexible_header else head, *response]
        if isinstance(response, (bytes, bytearray, memoryview)):
            body = response  # pre-encoded body (hot paths)
        else:
            body = response.encode(version=api_version)
        return encode_response_frame(correlation_id, body, flexible_header=flexible_header)

    def _unsupported_version_response(self, spec: ApiSpec, api_version: int, correlation_id: int,
                                      frame: bytes) -> bytes:
        """UNSUPPORTED_VERSION for a registered API asked at a version outside what we serve.

        ApiVersions: a v0 response listing our ranges (clients send their newest version first and
        retry with one we serve). Any other API at a version its spec defines: the response at that
        very version (the client decodes it with that version's schema) with the error wherever the
        schema carries one — see ``error_response``. A version the spec does not define cannot be
        answered in a form the client would parse, so only then is the connection closed."""
        if spec.api_key == API_VERSIONS_KEY:
            resp = self.api_versions_response(0, error_code=UNSUPPORTED_VERSION)
            return encode_response_frame(correlation_id, resp.encode(version=0), flexible_header=False)
        served = f"serving v{spec.min_version}-{spec.max_version}"
        spec_max = min(spec.request_cls.max_version, spec.response_cls.max_version)
        if not 0 <= api_version <= spec_max:
            log.warning("closing connection: %s v%d is not defined by its spec (v0-%d), so no response "
                        "can be encoded (%s)", spec.name, api_version, spec_max, served)
            raise FramingError(f"{spec.name} v{api_version} is beyond its spec (v0-{spec_max})")
        header, body_pos = parse_request_header(frame, self.is_flexible)
        try:
            request = spec.request_cls.decode(memoryview(frame)[body_pos:], version=api_version)
        except Exception as e:  # answered anyway, without echoing the request's items
            log.info("cannot decode %s v%d (unsupported, %s): %r", spec.name, api_version, served, e)
            request = None
        message = f"{spec.name.removesuffix('Request')} v{api_version} is not supported ({served})"
        if _expects_no_response(spec, request):
            log.warning("closing connection: acks=0 %s; the producer expects no response", message)
            raise FramingError(f"acks=0 {message}")
        resp = self._error_response(spec, request, api_version, UNSUPPORTED_VERSION, message)
        return self._encode_response(spec, api_version, correlation_id, resp)

    @staticmethod
    def _error_response(spec: ApiSpec, request, api_version: int, code: int, message: str | None):
        try:
            return error_response(spec, request, api_version, code, message)
        except Exception as e:  # a schema shape the builder does not handle: say so, close
            log.exception("cannot build a %s v%d response carrying error %d", spec.name, api_version, code)
            raise FramingError(f"no error response for {spec.name} v{api_version}") from e

    def api_versions_response(self, version: int, error_code: int = 0):
        from kafka.protocol.metadata import ApiVersionsResponse
        keys = [ApiVersionsResponse.ApiVersion(api_key=s.api_key, min_version=s.min_version,
                                               max_version=s.max_version)
                for s in sorted(REGISTRY.values(), key=lambda s: s.api_key)]
        return ApiVersionsResponse(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0,
                                   supported_features=[], finalized_features_epoch=-1, finalized_features=[],
                                   zk_migration_ready=False)


# -- error responses derived from the JSON schema ---------------------------------------------------
# Kafka's Java broker hand-writes getErrorResponse() per request class. Here it is derived from the
# message spec instead, so every registered API (and every version the spec defines) gets one:
#   * every int16 field named ``...ErrorCode`` gets the error code, ``ErrorMessage`` gets a message;
#   * a struct level that carries an error code is where the error is reported: its arrays stay empty;
#   * a level without one is filled by echoing the request's matching array, item by item, copying the
#     identifying fields (topic names/ids, partition indexes, resource names, group ids …), down to the
#     level that carries the error code (Produce per partition, DescribeConfigs per resource …);
#   * a response array that no request array describes (DescribeLogDirs' log dirs) gets one item
#     carrying the error, so the client sees it rather than an empty success.
# Everything else takes the spec's default (offsets, epochs, ids without one: -1, as Kafka answers).


def _expects_no_response(spec: ApiSpec, request) -> bool:
    """Produce with acks=0: the client reads no response, so an error can only be told by closing the
    connection (Kafka's rule; the producer then refreshes metadata and reconnects)."""
    return spec.api_key == 0 and request is not None and getattr(request, "acks", None) == 0


def _is_error_code(f) -> bool:
    return f.type_str == "int16" and f._name.endswith("ErrorCode")


def _is_error_message(f) -> bool:
    return f.type_str == "string" and f._name == "ErrorMessage"


def _untagged(struct, version: int) -> list:
    return [f for f in struct._fields if f.for_version_q(version) and not f.tagged_field_q(version)]


def _item_struct(f):
    return f.array_of if f.is_struct_array() else f


def _carries_error(struct, version: int) -> bool:
    """Whether ``struct`` (or something nested in it) has an error code field at ``version``."""
    for f in _untagged(struct, version):
        if _is_error_code(f) or ((f.is_struct() or f.is_struct_array())
                                 and _carries_error(_item_struct(f), version)):
            return True
    return False


def _is_partition_key(f) -> bool:
    return f._name == "Index" or f._name.removesuffix("Index").endswith("Partition")


def _identifies(f) -> bool:
    """Fields that name an item (echoed) rather than describe it (e.g. epochs, offsets: not echoed)."""
    return (f.type_str in ("string", "uuid", "int8") or bool(f._entity_type) or bool(f._json.get("mapKey"))
            or _is_partition_key(f))


def _same_key(resp_field, req_field) -> bool:
    """Does the request field identify the same thing as the response field (so it may be echoed)?"""
    if resp_field.type_str != req_field.type_str or resp_field.is_array() or req_field.is_array():
        return False
    if not (_identifies(resp_field) and _identifies(req_field)):
        return False
    if resp_field._name == req_field._name:
        return True
    if resp_field._name.removesuffix("Index") == req_field._name.removesuffix("Index"):
        return True  # Fetch: Partition -> PartitionIndex
    entity = resp_field._entity_type
    return bool(entity) and entity == req_field._entity_type  # DescribeLogDirs: Topic -> Name


def _match_request_array(resp_array, req_struct, version: int, taken: set):
    """The request array (struct or scalar) whose items the response array answers, or None."""
    item = _item_struct(resp_array)
    best, best_score = None, 0
    for q in _untagged(req_struct, version):
        if not q.is_array() or q.name in taken:
            continue
        if q.is_struct_array():
            score = sum(1 for rf in _untagged(item, version) for qf in _untagged(q.array_of, version)
                        if _same_key(rf, qf))
        else:  # e.g. DeleteTopics v0 TopicNames []string -> Responses[Name ...]
            score = int(any(_scalar_key(item, q, version) is rf for rf in _untagged(item, version)))
        if q._name == resp_array._name and (score or q.is_struct_array() == resp_array.is_struct_array()):
            score += 100
        if score > best_score:
            best, best_score = q, score
    return best


def _scalar_key(item_struct, scalar_array, version: int):
    """The response item field a scalar request array element identifies (same entity, else same type)."""
    fields = [f for f in _untagged(item_struct, version) if not f.is_array() and not f.is_struct()
              and not _is_error_code(f) and f.type_str == scalar_array.array_of.type_str]
    entity = scalar_array._entity_type
    for f in fields:
        if entity and f._entity_type == entity:
            return f
    return fields[0] if fields else None


_NONE_SUFFIXES = ("Offset", "Epoch", "Id", "Watermark")


def _default(f, version: int):
    if f._json.get("default") is None and (f.type_str == "int64" or (
            f.type_str in ("int16", "int32") and f._name.endswith(_NONE_SUFFIXES))):
        return -1  # Kafka's "no offset / no epoch / no id" where the spec gives no default
    if f.type_str in ("records", "bytes") and f.default is None and not f.nullable_for_version_q(version):
        return b""
    return f.default


def _build_error_struct(struct, data_class, req_field_struct, req, version: int, code: int, message: str,
                        *, top: bool, echo: dict | None = None):
    """One response struct at ``version`` answering request struct ``req`` (None: nothing to echo)."""
    fields = _untagged(struct, version)
    has_error_here = any(_is_error_code(f) for f in fields)
    req_fields = _untagged(req_field_struct, version) if req_field_struct is not None and req is not None else []
    values: dict[str, Any] = {}
    taken: set = set()
    for f in fields:
        if _is_error_code(f):
            values[f.name] = code
        elif _is_error_message(f):
            values[f.name] = message
        elif f.is_struct_array():
            values[f.name] = []
            if has_error_here or not _carries_error(f.array_of, version):
                continue
            q = _match_request_array(f, req_field_struct, version, taken) if req_fields else None
            if q is None:  # nothing in the request to echo: one item carrying the error
                values[f.name] = [_build_error_struct(f.array_of, f.data_class, None, None, version, code,
                                                      message, top=False)]
                continue
            taken.add(q.name)
            items = getattr(req, q.name, None) or []  # (fast decoders' objects may lack fields)
            if q.is_struct_array():
                values[f.name] = [_build_error_struct(f.array_of, f.data_class, q.array_of, it, version, code,
                                                      message, top=False) for it in items]
            else:
                key = _scalar_key(f.array_of, q, version)
                values[f.name] = [_build_error_struct(f.array_of, f.data_class, None, None, version, code,
                                                      message, top=False,
                                                      echo=None if key is None else {key.name: it})
                                  for it in items]
        elif f.is_struct():
            if f.nullable_for_version_q(version):
                values[f.name] = None
            else:
                values[f.name] = _build_error_struct(f, f.data_class, None, None, version, code, message,
                                                     top=False)
        else:
            source = None if top else next((q for q in req_fields if _same_key(f, q)), None)
            values[f.name] = _default(f, version) if source is None else \
                getattr(req, source.name, _default(f, version))
    values.update(echo or {})
    return data_class(**values)


def error_response(spec: ApiSpec, request, version: int, code: int, message: str | None = None):
    """A well-formed ``spec`` response at ``version`` reporting ``code`` wherever the schema lets it
    (see above); ``request`` is the decoded request, or None when it could not be decoded."""
    resp_cls = spec.response_cls
    if message is None:
        message = f"{spec.name.removesuffix('Request')} v{version}: error {code}"
    return _build_error_struct(resp_cls._struct, lambda **kw: resp_cls(version=version, **kw),
                               spec.request_cls._struct if request is not None else None, request, version,
                               code, message, top=True)


class KafkaConnection(asyncio.Protocol):
    """One client socket: frames in, responses out, one request at a time, in order."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self.decoder = FrameDecoder(broker.config.get_int("socket.request.max.bytes", 104857600))
        self.transport: asyncio.Transport | None = None
        self.peer: tuple | None = None
        self.queue: collections.deque[bytes] = collections.deque()
        self._wakeup: asyncio.Future | None = None
        self._writable: asyncio.Future | None = None
        self._paused_reading = False
        self._closed = False
        self._worker: asyncio.Task | None = None
        self.state: dict[str, Any] = {}  # per-connection state for handlers (e.g. SASL, fetch sessions)
        self.idle_since: float | None = time.monotonic()  # None while a request is queued or in flight

    # asyncio.Protocol callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.broker.connections.add(self)
        self._worker = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            frames = self.decoder.feed(data)
        except FramingError as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            self.close()
            return
        if frames:
            self.idle_since = None
            self.queue.extend(frames)
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)
            if len(self.queue) >= _MAX_QUEUED_REQUESTS and not self._paused_reading:
                self._paused_reading = True
                self.transport.pause_reading()

    def connection_lost(self, exc) -> None:
        self._closed = True
        self.broker.connections.discard(self)
        for fut in (self._wakeup, self._writable):
            if fut is not None and not fut.done():
                fut.cancel()

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.transport is not None:
                self.transport.close()
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.cancel()

    async def _run(self) -> None:
        broker = self.broker
        loop = asyncio.get_running_loop()
        queue = self.queue
        pending: list = []  # response chunks not yet written (answers to pipelined Produce requests)
        try:
            while not self._closed:
                if not queue:
                    self.idle_since = time.monotonic()
                    if self._paused_reading:
                        self._paused_reading = False
                        self.transport.resume_reading()
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                frame = queue.popleft()
                try:
                    out = await broker.handle_frame(frame, self)
                except FramingError as e:
                    log.warning("closing connection from %s: %s", self.peer, e)
                    if pending:  # answers to the requests before the bad one still go out
                        self.transport.writelines(pending)
                    self.close()
                    return
                if out is None or self._closed:
                    continue
                if isinstance(out, list):
                    pending.extend(out)
                else:
                    pending.append(out)
                # While the next queued request is a Produce (answered at once, never parked), hold this
                # answer so pipelined answers leave in one write: a syscall per response is a large
                # share of the broker's time on small requests. Anything else flushes first, so no
                # answer waits behind a Fetch long-poll.
                if queue and len(pending) < _COALESCE_MAX_CHUNKS and _is_produce(queue[0]):
                    continue
                if len(pending) == 1:
                    self.transport.write(pending[0])
                else:
                    self.transport.writelines(pending)
                pending = []
                if self._writable is not None:
                    await self._writable
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection from %s failed; closing it", self.peer)
        finally:
            self.close()


def _is_produce(frame) -> bool:
    return len(frame) >= 2 and frame[0] == 0 and frame[1] == 0  # api_key int16 == 0
