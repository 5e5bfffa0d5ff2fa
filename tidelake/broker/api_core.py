"""Core Kafka APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets, topic admin, configs,
DeleteRecords, DescribeCluster, InitProducerId (idempotent part), DescribeLogDirs, DescribeProducers,
OffsetForLeaderEpoch.

Handlers are ``async (broker, ctx, request) -> response``; the codec is kafka-python's ApiMessage
classes generated from Kafka's JSON specs. Record batches stay opaque bytes end to end.
"""
from __future__ import annotations

import inspect
import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from kafka.protocol.admin import (DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
                                  AlterConfigsRequest, AlterConfigsResponse, CreatePartitionsRequest,
                                  CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
                                  DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest,
                                  DeleteTopicsResponse, DescribeClusterRequest, DescribeClusterResponse,
                                  DescribeConfigsRequest, DescribeConfigsResponse, DescribeLogDirsRequest,
                                  DescribeLogDirsResponse, DescribeProducersRequest, DescribeProducersResponse,
                                  IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse)
from kafka.protocol.consumer import (FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
                                     OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import (InitProducerIdRequest, InitProducerIdResponse, ProduceRequest,
                                     ProduceResponse)

from tidelake.broker import config as cfg
from tidelake.broker.fetch_session import FetchSessionCache
from tidelake.broker.registry import api
from tidelake.protocol.fast import encode_fetch_response, encode_produce_response
from tidelake.protocol.framing import FramingError
from tidelake.errors import (CoordinatorNotAvailable, InvalidConfig, InvalidRequest, KafkaApiError,
                             OffsetOutOfRange, UnknownTopicOrPartition)

log = logging.getLogger("tidelake.broker.api")

NONE = 0
UNKNOWN_SERVER_ERROR = -1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC = 17
NOT_ENOUGH_REPLICAS = 19
INVALID_REQUIRED_ACKS = 21
INVALID_REQUEST = 42
TOPIC_DELETION_DISABLED = 73
UNKNOWN_TOPIC_ID = 100
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_PARTITIONS = 37

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

ZERO_UUID = uuid.UUID(int=0)


def _code(e: BaseException) -> int:
    if isinstance(e, KafkaApiError):
        return e.code
    if isinstance(e, ValueError):  # records.CorruptRecordError and friends
        return CORRUPT_MESSAGE
    return UNKNOWN_SERVER_ERROR


def _per_partition(broker, topic: str, partitions, answer, fail, index=lambda p: p.partition_index) -> list:
    """One answer per requested partition (``index(p)`` is its number): ``answer(log, p)``, or
    ``fail(p, code)`` with UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist and the
    error's code when ``answer`` raises, so one bad partition never fails the others."""
    out = []
    for p in partitions:
        plog = broker.logs.get(topic, index(p))
        if plog is None:
            out.append(fail(p, UNKNOWN_TOPIC_OR_PARTITION))
            continue
        try:
            out.append(answer(plog, p))
        except Exception as e:
            out.append(fail(p, _code(e)))
    return out


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


# ------------------------------------------------------------------------------------------------
# ApiVersions
# ------------------------------------------------------------------------------------------------
@api(ApiVersionsRequest, ApiVersionsResponse, 0, 4)
async def api_versions(broker, ctx, request):
    return broker.api_versions_response(ctx.api_version)


# ------------------------------------------------------------------------------------------------
# Metadata
# ------------------------------------------------------------------------------------------------
_MR = MetadataResponse
_MRTopic = MetadataResponse.MetadataResponseTopic
_MRPartition = _MRTopic.MetadataResponsePartition


def _topic_metadata(broker, info) -> Any:
    nid = broker.node_id
    parts = [_MRPartition(error_code=NONE, partition_index=p, leader_id=nid, leader_epoch=0,
                          replica_nodes=[nid], isr_nodes=[nid], offline_replicas=[])
             for p in range(info.partitions)]
    return _MRTopic(error_code=NONE, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                    partitions=parts)


@api(MetadataRequest, MetadataResponse, 0, 13)
async def metadata(broker, ctx, request):
    version = ctx.api_version
    if request.topics is None or (version == 0 and not request.topics):
        topics = [_topic_metadata(broker, info) for info in list(broker.metadata.topics.values())]
    else:
        allow_auto = request.allow_auto_topic_creation if version >= 4 else True
        auto = allow_auto and broker.config.get_bool("auto.create.topics.enable", True)
        internal_names = ("__consumer_offsets", "__transaction_state")  # created by their coordinators only
        topics = []
        created = False
        for t in request.topics:
            name = t.name
            if name is None and version >= 10 and t.topic_id not in (None, ZERO_UUID):
                info = broker.metadata.topics_by_id.get(t.topic_id)
                if info is None:
                    topics.append(_MRTopic(error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id,
                                           is_internal=False, partitions=[]))
                    continue
                name = info.name
            info = broker.topic(name)
            if info is None and auto and name not in internal_names:
                try:
                    info = broker.create_topic(name, None, persist=False)
                    created = True
                except KafkaApiError as e:
                    if broker.topic(name) is None:
                        topics.append(_MRTopic(error_code=e.code, name=name, topic_id=ZERO_UUID,
                                               is_internal=False, partitions=[]))
                        continue
                    info = broker.topic(name)
            if info is None:
                code = UNKNOWN_TOPIC_OR_PARTITION
                try:
                    from tidelake.broker.server import validate_topic_name
                    validate_topic_name(name)
                except KafkaApiError:
                    code = INVALID_TOPIC
                topics.append(_MRTopic(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False,
                                       partitions=[]))
            else:
                topics.append(_topic_metadata(broker, info))
        if created:
            await broker.metadata.save_async()  # durable before the client hears of it, loop not blocked
    brokers = [_MR.MetadataResponseBroker(node_id=broker.node_id, host=broker.advertised_host,
                                          port=broker.advertised_port, rack=None)]
    return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=broker.cluster_id,
                            controller_id=broker.node_id, topics=topics, error_code=NONE)


_DTP = DescribeTopicPartitionsResponse
_DTPTopic = _DTP.DescribeTopicPartitionsResponseTopic
_DTPPartition = _DTPTopic.DescribeTopicPartitionsResponsePartition


@api(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0)
async def describe_topic_partitions(broker, ctx, request):
    """Paged topic description (KIP-966): topics by name order, at most response_partition_limit
    partitions, a cursor to continue from."""
    nid = broker.node_id
    names = sorted({t.name for t in request.topics}) if request.topics else sorted(broker.metadata.topics)
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    limit = max(1, request.response_partition_limit)
    topics, next_cursor, budget = [], None, limit
    for name in names:
        info = broker.topic(name)
        if info is None:
            topics.append(_DTPTopic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID,
                                    is_internal=False, partitions=[]))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if budget <= 0:
            next_cursor = _DTP.Cursor(topic_name=name, partition_index=start)
            break
        end = min(info.partitions, start + budget)
        parts = [_DTPPartition(error_code=NONE, partition_index=p, leader_id=nid, leader_epoch=0,
                               replica_nodes=[nid], isr_nodes=[nid], eligible_leader_replicas=[],  # Java needs lists, not null
                               last_known_elr=[], offline_replicas=[]) for p in range(start, end)]
        budget -= len(parts)
        topics.append(_DTPTopic(error_code=NONE, name=name, topic_id=info.topic_id, is_internal=info.internal,
                                partitions=parts))
        if end < info.partitions:
            next_cursor = _DTP.Cursor(topic_name=name, partition_index=end)
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


# ------------------------------------------------------------------------------------------------
# Produce
# ------------------------------------------------------------------------------------------------


@api(ProduceRequest, ProduceResponse, 3, 13)
async def produce(broker, ctx, request):
    """Hot path: the request comes from tidelake.protocol.fast (records are memoryviews into the
    frame) and the response is encoded by hand."""
    acks = request.acks
    version = ctx.api_version
    now = _wall_ms()
    by_id = version >= 13
    logs = broker.logs
    topics_out = []
    for td in request.topic_data:
        name = td.name
        if by_id:
            info = broker.metadata.topics_by_id.get(td.topic_id)
            name = info.name if info is not None else None
        parts = []
        for pd in td.partition_data:
            index = pd.index
            if acks not in (0, 1, -1):
                parts.append((index, INVALID_REQUIRED_ACKS, -1, -1, -1, None))
                continue
            plog = logs.get(name, index) if name is not None else None
            if plog is None:
                parts.append((index, UNKNOWN_TOPIC_ID if by_id else UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1, None))
                continue
            info = broker.metadata.topics.get(name)
            if info is not None and info.internal:
                # only the coordinators write __consumer_offsets / __transaction_state (Kafka's rule)
                parts.append((index, INVALID_TOPIC, -1, -1, -1, f"cannot produce to internal topic {name}"))
                continue
            if acks == -1 and broker.min_insync_replicas(name) > 1:
                # one broker = an ISR of one: acks=all cannot be satisfied (Kafka rejects before appending)
                parts.append((index, NOT_ENOUGH_REPLICAS, -1, -1, plog.log_start_offset,
                              "min.insync.replicas exceeds the in-sync replicas (1)"))
                continue
            records = pd.records
            try:
                if records is None or not len(records):
                    raise InvalidRequest("produce request without records")
                result = plog.append(records, now_ms=now)
            except Exception as e:
                code = _code(e)
                if code == UNKNOWN_SERVER_ERROR:
                    log.exception("append to %s-%d failed", name, index)
                parts.append((index, code, -1, -1, plog.log_start_offset, str(e)))
                continue
            if not result.duplicate:
                broker.notify_data(name, index)
            parts.append((index, NONE, result.base_offset, result.log_append_time_ms, result.log_start_offset, None))
        topics_out.append((td.name, td.topic_id, parts))
    if acks == 0:
        if any(part[1] != NONE for _, _, parts in topics_out for part in parts):
            # Kafka's rule: with acks=0 the only way to tell the producer is to close the connection
            # (it then refreshes metadata and reconnects).
            raise FramingError("acks=0 produce failed on some partition; closing the connection")
        return None
    return encode_produce_response(version, topics_out)


# ------------------------------------------------------------------------------------------------
# Fetch
# ------------------------------------------------------------------------------------------------
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


def _sessions(broker) -> FetchSessionCache:
    cache = getattr(broker, "fetch_sessions", None)
    if cache is None:
        cache = broker.fetch_sessions = FetchSessionCache(max_sessions=1000)
    return cache


def _read_partition(broker, topic: str | None, partition: int, fetch_offset: int, max_bytes: int,
                    read_committed: bool, min_one: bool) -> tuple[int, int, int, int, Any, list | None]:
    """(error, hw, lso, log_start, records, aborted) for one partition."""
    plog = broker.logs.get(topic, partition) if topic is not None else None
    if plog is None:
        return UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1, b"", None
    try:
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        max_offset = lso if read_committed else hw
        if fetch_offset > plog.log_end_offset or fetch_offset < plog.log_start_offset:
            raise OffsetOutOfRange(f"offset {fetch_offset} not in [{plog.log_start_offset}, {plog.log_end_offset}]")
        if fetch_offset >= max_offset:
            return NONE, hw, lso, plog.log_start_offset, b"", None if not read_committed else []
        rr = plog.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
        data = rr.data
        aborted = None
        if read_committed:
            aborted = []
            if data:
                aborted = plog.aborted_transactions(fetch_offset, max_offset)
        return NONE, rr.high_watermark, rr.last_stable_offset, rr.log_start_offset, data, aborted
    except KafkaApiError as e:
        return e.code, plog.high_watermark, plog.last_stable_offset, plog.log_start_offset, b"", None


@api(FetchRequest, FetchResponse, 4, 18)
async def fetch(broker, ctx, request):
    version = ctx.api_version
    by_id = version >= 13
    read_committed = request.isolation_level == 1
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    min_bytes = max(request.min_bytes, 0)
    max_bytes = request.max_bytes if version >= 3 else 0x7FFFFFFF
    if max_bytes <= 0:
        max_bytes = 0x7FFFFFFF

    def resolve(ft) -> tuple[str | None, uuid.UUID]:
        if by_id:
            info = broker.metadata.topics_by_id.get(ft.topic_id)
            return (info.name if info else None), ft.topic_id
        info = broker.topic(ft.topic)
        return ft.topic, (info.topic_id if info else ZERO_UUID)

    # --- fetch session (KIP-227) ---
    session = None
    session_id = 0
    requested = []  # (topic, topic_id, partition, fetch_offset, partition_max_bytes)
    for ft in request.topics:
        name, tid = resolve(ft)
        for fp in ft.partitions:
            requested.append((name, tid, fp.partition, fp.fetch_offset, fp.partition_max_bytes))
    if version >= 7:
        cache = _sessions(broker)
        sid, epoch = request.session_id, request.session_epoch
        if epoch in (0, -1):  # full fetch
            if sid != 0:
                cache.remove(sid)
            if epoch == 0:
                session = cache.create(requested)
                session_id = session.session_id if session is not None else 0
        else:
            session = cache.get(sid)
            if session is None:
                return encode_fetch_response(version, FETCH_SESSION_ID_NOT_FOUND, 0, [])
            if session.epoch != epoch:
                return encode_fetch_response(version, INVALID_FETCH_SESSION_EPOCH, 0, [])
            forgotten = []
            for fg in request.forgotten_topics_data or []:
                fname = fg.topic
                if by_id:
                    info = broker.metadata.topics_by_id.get(fg.topic_id)
                    fname = info.name if info else None
                forgotten.extend((fname, p) for p in fg.partitions)
            session.update(requested, forgotten)
            session_id = session.session_id
        if session is not None:
            session.epoch = (epoch + 1) if epoch > 0 else 1
            requested = session.partitions_list()

    incremental = session is not None and request.session_epoch > 0

    while True:
        total = 0
        results = []  # (topic, tid, partition, error, hw, lso, lstart, data, aborted)
        for (name, tid, partition, offset, pmax) in requested:
            remaining = max_bytes - total
            if remaining <= 0 or pmax <= 0:
                plog = broker.logs.get(name, partition) if name is not None else None
                if plog is None:
                    results.append((name, tid, partition, UNKNOWN_TOPIC_ID if by_id else UNKNOWN_TOPIC_OR_PARTITION,
                                    -1, -1, -1, b"", None))
                else:
                    results.append((name, tid, partition, NONE, plog.high_watermark, plog.last_stable_offset,
                                    plog.log_start_offset, b"", [] if read_committed else None))
                continue
            err, hw, lso, lstart, data, aborted = _read_partition(
                broker, name, partition, offset, min(pmax, remaining), read_committed, min_one=(total == 0))
            if err == UNKNOWN_TOPIC_OR_PARTITION and by_id and name is None:
                err = UNKNOWN_TOPIC_ID
            total += len(data)
            results.append((name, tid, partition, err, hw, lso, lstart, data, aborted))
        errors = any(r[3] != NONE for r in results)
        now = time.monotonic()
        if total >= min_bytes or errors or now >= deadline or not requested:
            break
        await broker.wait_for_data([(r[0], r[2]) for r in results if r[0] is not None], deadline - now)

    # --- build the response (incremental sessions: only partitions that changed) ---
    topics_out: dict[tuple, list] = {}
    for (name, tid, partition, err, hw, lso, lstart, data, aborted) in results:
        if session is not None:
            changed = session.observe(name, partition, hw, lso, lstart)
            if incremental and not data and err == NONE and not changed:
                continue
        key = (name, tid)
        parts = topics_out.get(key)
        if parts is None:
            parts = topics_out[key] = []
        parts.append((partition, err, hw, lso, lstart, aborted, data))
    return encode_fetch_response(version, NONE, session_id,
                                 [(k[0] if k[0] is not None else "", k[1], v) for k, v in topics_out.items()])


# ------------------------------------------------------------------------------------------------
# ListOffsets
# ------------------------------------------------------------------------------------------------
_LRTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_LRPartition = _LRTopic.ListOffsetsPartitionResponse
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6


def _list_offset(plog, ts: int, read_committed: bool) -> tuple[int, int]:
    """(timestamp, offset) answering one ListOffsets query."""
    upper = plog.last_stable_offset if read_committed else plog.high_watermark
    if ts == LATEST:
        return -1, upper
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return -1, plog.log_start_offset
    if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # no tiered storage here
        return -1, -1
    if ts == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        if found is None:
            return -1, -1
        offset, max_ts = found
        return max_ts, offset
    if ts < 0:
        raise InvalidRequest(f"unknown ListOffsets timestamp {ts}")
    found = plog.offset_for_timestamp(ts)
    if found is None or found[0] >= upper:
        return -1, -1
    offset, found_ts = found
    return found_ts, offset


@api(ListOffsetsRequest, ListOffsetsResponse, 1, 11)
async def list_offsets(broker, ctx, request):
    read_committed = ctx.api_version >= 2 and request.isolation_level == 1

    def answer(plog, p):
        ts, offset = _list_offset(plog, p.timestamp, read_committed)
        return _LRPartition(partition_index=p.partition_index, error_code=NONE, timestamp=ts, offset=offset,
                            leader_epoch=0 if offset >= 0 else -1)

    def fail(p, code):
        return _LRPartition(partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1,
                            leader_epoch=-1)
    topics = [_LRTopic(name=t.name, partitions=_per_partition(broker, t.name, t.partitions, answer, fail))
              for t in request.topics]
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


# ------------------------------------------------------------------------------------------------
# OffsetForLeaderEpoch (the Java consumer validates positions with it, KIP-320)
# ------------------------------------------------------------------------------------------------
_OERTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_OERPartition = _OERTopic.EpochEndOffset


@api(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4)
async def offset_for_leader_epoch(broker, ctx, request):
    def answer(plog, p):
        if p.leader_epoch > 0:
            # Every leader of this single-node broker has epoch 0: a later epoch is unknown.
            return _OERPartition(error_code=NONE, partition=p.partition, leader_epoch=-1, end_offset=-1)
        return _OERPartition(error_code=NONE, partition=p.partition, leader_epoch=0, end_offset=plog.log_end_offset)

    def fail(p, code):
        return _OERPartition(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)
    topics = [_OERTopic(topic=t.topic, partitions=_per_partition(broker, t.topic, t.partitions, answer, fail,
                                                                 index=lambda p: p.partition))
              for t in request.topics]
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


# ------------------------------------------------------------------------------------------------
# Topic admin
# ------------------------------------------------------------------------------------------------
_CTRTopic = CreateTopicsResponse.CreatableTopicResult
_CTRConfig = _CTRTopic.CreatableTopicConfigs


@api(CreateTopicsRequest, CreateTopicsResponse, 2, 7)
async def create_topics(broker, ctx, request):
    version = ctx.api_version
    names = [t.name for t in request.topics]
    results = []
    created = False
    for t in request.topics:
        def fail(code, msg):
            results.append(_CTRTopic(name=t.name, topic_id=ZERO_UUID, error_code=code, error_message=msg,
                                     num_partitions=-1, replication_factor=-1, configs=None))
        if names.count(t.name) > 1:
            fail(INVALID_REQUEST, f"Create topics request from client contains multiple topics named {t.name}")
            continue
        num_partitions, replication = t.num_partitions, t.replication_factor
        if t.assignments:
            if num_partitions != -1 or replication != -1:
                fail(INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments were set.")
                continue
            if any(list(a.broker_ids) != [broker.node_id] for a in t.assignments) or \
                    sorted(a.partition_index for a in t.assignments) != list(range(len(t.assignments))):
                fail(INVALID_REPLICA_ASSIGNMENT, f"Invalid replica assignment; the only broker is {broker.node_id}")
                continue
            num_partitions, replication = len(t.assignments), 1
        configs = {}
        for c in t.configs:
            configs[c.name] = c.value
        try:
            info = broker.create_topic(t.name, num_partitions, configs, replication_factor=replication,
                                       validate_only=request.validate_only, persist=False)
            created = created or not request.validate_only
        except Exception as e:
            fail(_code(e), str(e))
            continue
        describe = broker.config.describe_topic(info.configs) if version >= 5 else []
        results.append(_CTRTopic(
            name=t.name, topic_id=info.topic_id, error_code=NONE, error_message=None,
            num_partitions=info.partitions, replication_factor=1,
            configs=[_CTRConfig(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                                is_sensitive=False) for e in describe]))
    if created:
        await broker.metadata.save_async()  # durable before acknowledged, without blocking the loop
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


_DTRTopic = DeleteTopicsResponse.DeletableTopicResult


@api(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6)
async def delete_topics(broker, ctx, request):
    version = ctx.api_version
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(n, None) for n in request.topic_names]
    results = []
    enabled = broker.config.get_bool("delete.topic.enable", True)
    for name, topic_id in wanted:
        if name is None and topic_id not in (None, ZERO_UUID):
            info = broker.metadata.topics_by_id.get(topic_id)
            if info is None:
                results.append(_DTRTopic(name=None, topic_id=topic_id, error_code=UNKNOWN_TOPIC_ID,
                                         error_message="unknown topic id"))
                continue
            name = info.name
        info = broker.topic(name)
        tid = info.topic_id if info else ZERO_UUID
        if not enabled:
            results.append(_DTRTopic(name=name, topic_id=tid, error_code=TOPIC_DELETION_DISABLED,
                                     error_message="delete.topic.enable is false"))
            continue
        try:
            if info is not None and info.internal:
                raise InvalidRequest(f"internal topic {name} cannot be deleted")
            broker.delete_topic(name)
            results.append(_DTRTopic(name=name, topic_id=tid, error_code=NONE, error_message=None))
        except Exception as e:
            results.append(_DTRTopic(name=name, topic_id=tid, error_code=_code(e), error_message=str(e)))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


_CPRTopic = CreatePartitionsResponse.CreatePartitionsTopicResult


@api(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3)
async def create_partitions(broker, ctx, request):
    results = []
    names = [t.name for t in request.topics]
    for t in request.topics:
        try:
            if names.count(t.name) > 1:
                raise InvalidRequest(f"duplicate topic {t.name} in request")
            if t.assignments is not None and any(list(a.broker_ids) != [broker.node_id] for a in t.assignments):
                raise KafkaApiError(f"Invalid replica assignment; the only broker is {broker.node_id}",
                                    code=INVALID_REPLICA_ASSIGNMENT)
            broker.add_partitions(t.name, t.count, validate_only=request.validate_only)
            results.append(_CPRTopic(name=t.name, error_code=NONE, error_message=None))
        except Exception as e:
            results.append(_CPRTopic(name=t.name, error_code=_code(e), error_message=str(e)))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


_DRRTopic = DeleteRecordsResponse.DeleteRecordsTopicResult
_DRRPartition = _DRRTopic.DeleteRecordsPartitionResult


@api(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2)
async def delete_records(broker, ctx, request):
    def answer_for(topic):
        def answer(plog, p):
            offset = plog.high_watermark if p.offset == -1 else p.offset
            if offset < 0 or offset > plog.high_watermark:
                raise OffsetOutOfRange(f"offset {p.offset} beyond high watermark {plog.high_watermark}")
            low = plog.delete_records_before(offset)
            broker.notify_data(topic, p.partition_index)
            return _DRRPartition(partition_index=p.partition_index, low_watermark=low, error_code=NONE)
        return answer

    def fail(p, code):
        return _DRRPartition(partition_index=p.partition_index, low_watermark=-1, error_code=code)
    topics = [_DRRTopic(name=t.name, partitions=_per_partition(broker, t.name, t.partitions, answer_for(t.name), fail))
              for t in request.topics]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


# ------------------------------------------------------------------------------------------------
# Configs
# ------------------------------------------------------------------------------------------------
_DCRResult = DescribeConfigsResponse.DescribeConfigsResult
_DCREntry = _DCRResult.DescribeConfigsResourceResult
_DCRSynonym = _DCREntry.DescribeConfigsSynonym


def _is_this_broker(broker, name: str) -> bool:
    return name == "" or name == str(broker.node_id)


@api(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4)
async def describe_configs(broker, ctx, request):
    version = ctx.api_version
    with_synonyms = bool(request.include_synonyms) if version >= 1 else False
    with_docs = bool(request.include_documentation) if version >= 3 else False
    results = []
    for r in request.resources:
        keys = r.configuration_keys
        try:
            if r.resource_type == RESOURCE_TOPIC:
                info = broker.topic(r.resource_name)
                if info is None:
                    raise UnknownTopicOrPartition(f"Topic {r.resource_name} does not exist")
                entries = broker.config.describe_topic(info.configs, keys, with_synonyms)
            elif r.resource_type == RESOURCE_BROKER:
                if not _is_this_broker(broker, r.resource_name):
                    raise InvalidRequest(f"unknown broker {r.resource_name}")
                entries = broker.config.describe(keys, with_synonyms)
            elif r.resource_type == RESOURCE_BROKER_LOGGER:
                entries = []
            else:
                raise InvalidRequest(f"unsupported resource type {r.resource_type}")
        except Exception as e:
            results.append(_DCRResult(error_code=_code(e), error_message=str(e), resource_type=r.resource_type,
                                      resource_name=r.resource_name, configs=[]))
            continue
        configs = [_DCREntry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                             is_default=e.is_default, is_sensitive=False,
                             synonyms=[_DCRSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms],
                             config_type=e.type, documentation=e.doc if with_docs else None)
                   for e in entries]
        results.append(_DCRResult(error_code=NONE, error_message=None, resource_type=r.resource_type,
                                  resource_name=r.resource_name, configs=configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _apply_incremental(current: dict[str, str], ops, defaults) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations to a dict of overrides; ``defaults(name)`` gives the
    effective value APPEND/SUBTRACT start from when there is no override."""
    out = dict(current)
    seen = set()
    for c in ops:
        if c.name in seen:
            raise InvalidRequest(f"config {c.name} appears more than once")
        seen.add(c.name)
        op = c.config_operation
        if op == SET:
            if c.value is None:
                raise InvalidRequest(f"null value for {c.name}")
            out[c.name] = c.value
        elif op == DELETE:
            out.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            defn = cfg.TOPIC_CONFIGS.get(c.name) or cfg.BROKER_CONFIGS.get(c.name)
            if defn is None or defn.type != cfg.TYPE_LIST:
                raise InvalidConfig(f"{c.name} is not a list config; APPEND/SUBTRACT need one")
            base = out.get(c.name, defaults(c.name)) or ""
            items = [v for v in base.split(",") if v]
            values = [v.strip() for v in (c.value or "").split(",") if v.strip()]
            if op == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [v for v in items if v not in values]
            out[c.name] = ",".join(items)
        else:
            raise InvalidRequest(f"unknown config operation {op}")
    return out


def _alter(broker, resource_type: int, resource_name: str, build_new, validate_only: bool) -> None:
    if resource_type == RESOURCE_TOPIC:
        info = broker.topic(resource_name)
        if info is None:
            raise UnknownTopicOrPartition(f"Topic {resource_name} does not exist")
        new = build_new(dict(info.configs), lambda n: broker.config.topic_default(n)[0])
        broker.alter_topic_configs(resource_name, new, validate_only=validate_only)
    elif resource_type == RESOURCE_BROKER:
        if not _is_this_broker(broker, resource_name):
            raise InvalidRequest(f"unknown broker {resource_name}")
        current = dict(broker.config.dynamic)
        new = build_new(current, lambda n: broker.config.get(n))
        changes = {k: v for k, v in new.items() if current.get(k) != v}
        changes.update({k: None for k in current if k not in new})
        for k, v in changes.items():
            broker.config.validate_dynamic(k, v)
        if not validate_only:
            broker.set_dynamic_broker_configs(changes)
    elif resource_type == RESOURCE_BROKER_LOGGER:
        pass  # log levels: accepted, not applied
    else:
        raise InvalidRequest(f"unsupported resource type {resource_type}")


_ACRResponse = AlterConfigsResponse.AlterConfigsResourceResponse


@api(AlterConfigsRequest, AlterConfigsResponse, 0, 2)
async def alter_configs(broker, ctx, request):
    out = []
    for r in request.resources:
        try:
            values = {c.name: c.value for c in r.configs}
            if any(v is None for v in values.values()):
                raise InvalidRequest("null config value")
            _alter(broker, r.resource_type, r.resource_name, lambda cur, dflt: dict(values), request.validate_only)
            out.append(_ACRResponse(error_code=NONE, error_message=None, resource_type=r.resource_type,
                                    resource_name=r.resource_name))
        except Exception as e:
            out.append(_ACRResponse(error_code=_code(e), error_message=str(e), resource_type=r.resource_type,
                                    resource_name=r.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)


_IACRResponse = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


@api(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1)
async def incremental_alter_configs(broker, ctx, request):
    out = []
    for r in request.resources:
        try:
            _alter(broker, r.resource_type, r.resource_name,
                   lambda cur, dflt, ops=r.configs: _apply_incremental(cur, ops, dflt), request.validate_only)
            out.append(_IACRResponse(error_code=NONE, error_message=None, resource_type=r.resource_type,
                                     resource_name=r.resource_name))
        except Exception as e:
            out.append(_IACRResponse(error_code=_code(e), error_message=str(e), resource_type=r.resource_type,
                                     resource_name=r.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)


# ------------------------------------------------------------------------------------------------
# Cluster
# ------------------------------------------------------------------------------------------------
@api(DescribeClusterRequest, DescribeClusterResponse, 0, 2)
async def describe_cluster(broker, ctx, request):
    b = DescribeClusterResponse.DescribeClusterBroker(broker_id=broker.node_id, host=broker.advertised_host,
                                                      port=broker.advertised_port, rack=None, is_fenced=False)
    if ctx.api_version >= 1 and request.endpoint_type not in (1,):
        return DescribeClusterResponse(throttle_time_ms=0, error_code=119,  # UNSUPPORTED_ENDPOINT_TYPE
                                       error_message="only broker endpoints", endpoint_type=request.endpoint_type,
                                       cluster_id=broker.cluster_id, controller_id=-1, brokers=[])
    return DescribeClusterResponse(throttle_time_ms=0, error_code=NONE, error_message=None, endpoint_type=1,
                                   cluster_id=broker.cluster_id, controller_id=broker.node_id, brokers=[b])


_DLDResult = DescribeLogDirsResponse.DescribeLogDirsResult
_DLDTopic = _DLDResult.DescribeLogDirsTopic
_DLDPartition = _DLDTopic.DescribeLogDirsPartition


def _partition_size(broker, topic: str, partition: int) -> int:
    d = Path(broker.data_dir) / f"{topic}-{partition}"
    try:
        return sum(f.stat().st_size for f in d.glob("*.log"))
    except OSError:
        return 0


@api(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 5)
async def describe_log_dirs(broker, ctx, request):
    wanted: dict[str, list[int]] = {}
    if request.topics is None:
        for name, info in broker.metadata.topics.items():
            wanted[name] = list(range(info.partitions))
    else:
        for t in request.topics:
            info = broker.topic(t.topic)
            if info is not None:
                wanted[t.topic] = [p for p in t.partitions if p < info.partitions]
    topics = [_DLDTopic(name=name, partitions=[
        _DLDPartition(partition_index=p, partition_size=_partition_size(broker, name, p), offset_lag=0,
                      is_future_key=False) for p in parts]) for name, parts in wanted.items()]
    usage = shutil.disk_usage(broker.data_dir)
    result = _DLDResult(error_code=NONE, log_dir=str(Path(broker.data_dir).resolve()), topics=topics,
                        total_bytes=usage.total, usable_bytes=usage.free)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=NONE, results=[result])


_DPRTopic = DescribeProducersResponse.TopicResponse
_DPRPartition = _DPRTopic.PartitionResponse
_DPRState = _DPRPartition.ProducerState


@api(DescribeProducersRequest, DescribeProducersResponse, 0, 0)
async def describe_producers(broker, ctx, request):
    def answer(plog, p):
        return _DPRPartition(partition_index=p, error_code=NONE, error_message=None,
                             active_producers=[_DPRState(**st) for st in plog.producer_state.describe()])

    def fail(p, code):
        return _DPRPartition(partition_index=p, error_code=code, error_message=None, active_producers=[])
    topics = [_DPRTopic(name=t.name, partitions=_per_partition(broker, t.name, t.partition_indexes, answer, fail,
                                                               index=lambda p: p))
              for t in request.topics]
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


# ------------------------------------------------------------------------------------------------
# InitProducerId
# ------------------------------------------------------------------------------------------------
@api(InitProducerIdRequest, InitProducerIdResponse, 0, 5)
async def init_producer_id(broker, ctx, request):
    if request.transactional_id is None:
        # Idempotent producer: a fresh producer id with epoch 0, as Kafka does (also for KIP-360 bumps).
        return InitProducerIdResponse(throttle_time_ms=0, error_code=NONE,
                                      producer_id=broker.allocate_producer_id(), producer_epoch=0)
    coordinator = broker.txn_coordinator
    if coordinator is None:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=CoordinatorNotAvailable.code,
                                      producer_id=-1, producer_epoch=-1)
    try:
        result = coordinator.init_producer_id(request.transactional_id, request.transaction_timeout_ms,
                                              request.producer_id, request.producer_epoch)
        if inspect.isawaitable(result):
            result = await result
        pid, epoch = result
    except Exception as e:
        code = _code(e)
        if code == UNKNOWN_SERVER_ERROR:
            log.exception("InitProducerId for %s failed", request.transactional_id)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=NONE, producer_id=pid, producer_epoch=epoch)

