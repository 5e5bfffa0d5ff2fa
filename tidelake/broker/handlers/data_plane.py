"""The data plane: Produce, Fetch (with KIP-227 fetch sessions and long polls), ListOffsets and
OffsetForLeaderEpoch.

Produce and Fetch are the hot paths: their requests come from ``tidelake.protocol.fast`` (record
batches are memoryviews into the request frame, appended without another copy) and their responses
are encoded by hand; per-request Python work here is what bounds the broker's throughput.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import NamedTuple

from kafka.protocol.consumer import (FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
                                     OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.features import Features
from tidelake.broker.handlers.common import per_partition
from tidelake.broker.partition_service import AppendOutcome, ListedOffset, PartitionService, PendingAcks, ReadOutcome
from tidelake.broker.access import CLUSTER, TOPIC, TOPIC_DENIED, TXN, Access, HandlerCheck, Need, per_item, topic
from tidelake.security.acl.model import Operation
from tidelake.broker.registry import api
from tidelake.protocol.fast import encode_fetch_response, encode_produce_response
from tidelake.protocol.framing import FramingError

log = logging.getLogger("tidelake.broker.api")

NONE = errors.NONE
UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartition.code
UNKNOWN_TOPIC_ID = errors.UnknownTopicId.code
ZERO_UUID = uuid.UUID(int=0)
FIRST_PRODUCE_VERSION_ADDING = 12  # Produce v12: a v2 transactional producer adds partitions implicitly
READ_COMMITTED = 1
TOPIC_AUTHORIZATION_FAILED = TOPIC_DENIED
O = Operation
WRITE_TOPIC = HandlerCheck(O.WRITE, TOPIC)  # Produce: each topic (named by id from v13)
READ_TOPIC = HandlerCheck(O.READ, TOPIC)  # Fetch: each partition of the fetch session
FOLLOWER_FETCH = HandlerCheck(O.CLUSTER_ACTION, CLUSTER)  # Fetch from a follower (replica id >= 0)


# ------------------------------------------------------------------------------------------------
# Produce
# ------------------------------------------------------------------------------------------------
def _produce_denied(td, reason: int, stats) -> tuple:
    if stats is not None:
        for _pd in td.partition_data:
            stats.error(0, reason)
    return td.name, td.topic_id, [(pd.index, reason, -1, -1, -1, None) for pd in td.partition_data]


def _count_produce(stats, name: str, records, outcome: AppendOutcome) -> None:
    if outcome.appended:
        traffic = stats.topics.get(name) or stats.topic(name)
        traffic.bytes_in += len(records)
        traffic.messages_in += outcome.last_offset - outcome.base_offset + 1
    elif outcome.error != NONE:
        stats.error(0, outcome.error)


def _produce_part(index: int, outcome: AppendOutcome) -> tuple:
    """The response encoder's partition entry (tidelake.protocol.fast)."""
    if outcome.record_errors is not None:
        return (index, outcome.error, -1, -1, outcome.log_start_offset, outcome.message, outcome.record_errors)
    return (index, outcome.error, outcome.base_offset, outcome.log_append_time_ms, outcome.log_start_offset,
            outcome.message)


@api(ProduceRequest, ProduceResponse, 3, 13, access=Access(
    whole=lambda r, v: [Need(O.WRITE, TXN, r.transactional_id)] if r.transactional_id is not None else [],
    in_handler=frozenset({WRITE_TOPIC})))
async def produce(broker: BrokerContext, ctx: RequestContext, request):
    acks, version, now, stats = request.acks, ctx.api_version, broker.clock_ms(), broker.metrics
    service, transactional_id, grants = broker.partition_service, request.transactional_id, ctx.grants
    # KIP-890 part 2: a v2 producer's partitions join its transaction with its Produce
    add_to_transaction = (transactional_id is not None and version >= FIRST_PRODUCE_VERSION_ADDING
                          and Features.of(broker.config).transactions_v2)
    pending: list[tuple[list, int, PendingAcks]] = []  # acks=all appends awaiting the ISR, where they answer
    topics_out = []
    for td in request.topic_data:
        name = _topic_name(broker, td.name, td.topic_id, version >= 13)
        if name is not None and not grants.permits(WRITE_TOPIC, name):
            topics_out.append(_produce_denied(td, TOPIC_AUTHORIZATION_FAILED, stats))
            continue
        parts = []
        for pd in td.partition_data:
            outcome = await service.append(name, pd.index, pd.records, acks=acks, now_ms=now,
                                           transactional_id=transactional_id, add_to_transaction=add_to_transaction)
            if outcome.error == UNKNOWN_TOPIC_OR_PARTITION and version >= 13:
                outcome.error = UNKNOWN_TOPIC_ID
            if acks == -1 and outcome.error == NONE:
                pending.append((parts, len(parts), PendingAcks(name, pd.index, outcome.last_offset)))
            if stats is not None:
                _count_produce(stats, name, pd.records, outcome)
            parts.append(_produce_part(pd.index, outcome))
        topics_out.append((td.name, td.topic_id, parts))
    if pending:
        codes = await service.wait_for_acks([p for _parts, _i, p in pending], request.timeout_ms)
        for (parts, i, _p), code in zip(pending, codes):
            if code != NONE:
                parts[i] = (parts[i][0], code, -1, -1, -1, None)
                if stats is not None:
                    stats.error(0, code)
    if acks == 0:
        if any(part[1] != NONE for _, _, parts in topics_out for part in parts):
            # with acks=0 the only way to tell the producer is to close the connection (it then
            # refreshes metadata and reconnects)
            raise FramingError("acks=0 produce failed on some partition; closing the connection")
        return None
    return encode_produce_response(version, topics_out)


def _topic_name(broker: BrokerContext, name: str | None, topic_id: uuid.UUID, by_id: bool) -> str | None:
    """The topic a request names: by id from v13 (None when unknown)."""
    if not by_id:
        return name
    info = broker.topics.by_id(topic_id)
    return info.name if info is not None else None


# ------------------------------------------------------------------------------------------------
# Fetch
# ------------------------------------------------------------------------------------------------
def _requested_partitions(broker: BrokerContext, request, by_id: bool, with_epochs: bool, follower: bool
                          ) -> tuple[list[tuple], dict[tuple[str | None, int], int], dict[tuple[str | None, int], int]]:
    """(topic, topic_id, partition, fetch_offset, partition_max_bytes) per requested partition, the leader
    epoch the sender knows for each (KIP-320, v9+; none before: -1) and, from a follower, where its log starts."""
    topics = broker.topics
    out, epochs, log_starts = [], {}, {}
    for ft in request.topics:
        if by_id:
            info = topics.by_id(ft.topic_id)
            name, tid = (info.name if info else None), ft.topic_id
        else:
            info = topics.get(ft.topic)
            name, tid = ft.topic, (info.topic_id if info else ZERO_UUID)
        for fp in ft.partitions:
            out.append((name, tid, fp.partition, fp.fetch_offset, fp.partition_max_bytes))
            if with_epochs:
                epochs[(name, fp.partition)] = fp.current_leader_epoch
            if follower:
                log_starts[(name, fp.partition)] = fp.log_start_offset
    return out, epochs, log_starts


def _forgotten_partitions(broker: BrokerContext, request, by_id: bool) -> list[tuple[str | None, int]]:
    out = []
    for fg in request.forgotten_topics_data or ():
        name = fg.topic
        if by_id:
            info = broker.topics.by_id(fg.topic_id)
            name = info.name if info else None
        out.extend((name, p) for p in fg.partitions)
    return out


def _denied_fetch_topics(ctx: RequestContext, request, requested) -> set:
    """Topics this Fetch may not read: a consumer needs READ on each; a follower (replica id >= 0)
    CLUSTER_ACTION on the cluster."""
    replica_id = request.replica_id if request.replica_id is not None else -1
    names = {r[0] for r in requested if r[0] is not None}
    if replica_id >= 0:
        return set() if ctx.grants.permits(FOLLOWER_FETCH, "") else names
    return {n for n in names if not ctx.grants.permits(READ_TOPIC, n)}


def _read_requested(service: PartitionService, requested: list[tuple], refused: dict, max_bytes: int,
                    read_committed: bool, follower: bool, by_id: bool) -> tuple[list[tuple[tuple, ReadOutcome]], int]:
    """Each requested partition's outcome within the request's byte budget, and the bytes read."""
    total = 0
    results = []
    for position in requested:
        name, _tid, partition, offset, pmax = position
        code = refused.get((name, partition)) if refused else None
        if code is not None:
            outcome = ReadOutcome(code)
        elif name is None and by_id:
            outcome = ReadOutcome(UNKNOWN_TOPIC_ID)
        else:
            outcome = service.read(name, partition, offset, min(pmax, max_bytes - total), read_committed=read_committed,
                                   min_one=total == 0, follower=follower)
            total += len(outcome.records)
        results.append((position, outcome))
    return results, total


def _fetch_response(broker: BrokerContext, version: int, session, results: list[tuple[tuple, ReadOutcome]]):
    stats = broker.metrics
    topics_out: dict[tuple, list] = {}
    for (name, tid, partition, _offset, _pmax), o in results:
        if stats is not None:
            if o.records:
                traffic = stats.topics.get(name) or stats.topic(name)
                traffic.bytes_out += len(o.records)
                traffic.messages_out += o.offsets_spanned
            elif o.error != NONE:
                stats.error(1, o.error)
        if session is not None and not session.include(name, partition, o.error, o.high_watermark,
                                                       o.last_stable_offset, o.log_start_offset, bool(o.records)):
            continue
        parts = topics_out.get((name, tid))
        if parts is None:
            parts = topics_out[(name, tid)] = []
        parts.append((partition, o.error, o.high_watermark, o.last_stable_offset, o.log_start_offset, o.aborted,
                      o.records))
    return encode_fetch_response(version, NONE, session.session_id if session is not None else 0,
                                 [(k[0] if k[0] is not None else "", k[1], v) for k, v in topics_out.items()])


# the partitions checked are the fetch session's (an incremental fetch names only changes)
@api(FetchRequest, FetchResponse, 4, 18, access=Access(in_handler=frozenset({READ_TOPIC, FOLLOWER_FETCH})))
async def fetch(broker: BrokerContext, ctx: RequestContext, request):
    version, by_id, service = ctx.api_version, ctx.api_version >= 13, broker.partition_service
    read_committed = request.isolation_level == READ_COMMITTED
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    min_bytes = max(request.min_bytes, 0)
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    follower = service.reads_as_follower(request.replica_id)
    requested, epochs, log_starts = _requested_partitions(broker, request, by_id, version >= 9, follower)
    session = None
    if version >= 7:  # fetch sessions (KIP-227)
        try:
            session = broker.fetch_sessions.begin(request.session_id, request.session_epoch, requested,
                                                  _forgotten_partitions(broker, request, by_id))
        except (errors.FetchSessionIdNotFound, errors.InvalidFetchSessionEpoch) as e:
            if broker.metrics is not None:
                broker.metrics.error(1, e.code)
            return encode_fetch_response(version, e.code, 0, [])
        requested = session.partitions
    refused = service.fetch_leadership(requested, epochs, request.replica_id, log_starts)  # those not led here
    denied = _denied_fetch_topics(ctx, request, requested)
    if denied:
        refused = {**refused, **{(r[0], r[2]): TOPIC_AUTHORIZATION_FAILED for r in requested if r[0] in denied}}
    while True:
        results, total = _read_requested(service, requested, refused, max_bytes, read_committed, follower, by_id)
        now = time.monotonic()
        if total >= min_bytes or now >= deadline or not requested or any(o.error != NONE for _p, o in results):
            break
        await service.wait_for_data([(p[0], p[2]) for p, _o in results if p[0] is not None], deadline - now)
    return _fetch_response(broker, version, session, results)


# ------------------------------------------------------------------------------------------------
# ListOffsets
# ------------------------------------------------------------------------------------------------
_LRTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_LRPartition = _LRTopic.ListOffsetsPartitionResponse
# the first version carrying each special timestamp; an older request naming it is UNSUPPORTED_VERSION (as Kafka)
TIMESTAMP_MIN_VERSION = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9, -6: 11}  # latest, earliest, max, local, tiered, pending
PartitionKey = tuple[str, int]


class RemoteLookup(NamedTuple):
    """A timestamp lookup in a tiered log's remote segments: what it found (None: nothing there, the local
    segments are searched), or why it failed."""
    listed: ListedOffset | None
    error: Exception | None = None


async def _find_remotely(broker: BrokerContext, request, version: int) -> dict[PartitionKey, RemoteLookup]:
    """The timestamp lookups below tiered logs' local starts (KIP-405), all awaited at once through the
    partition service (never on the event loop); a failed one is that partition's error, the others answered."""
    asked: list[PartitionKey] = []
    lookups = []
    for t in request.topics:
        for p in t.partitions:
            if p.timestamp < 0:
                continue
            try:  # only the leader answers: no object-store reads for a request refused anyway
                broker.leader_epoch(t.name, p.partition_index, p.current_leader_epoch if version >= 4 else -1)
            except errors.KafkaApiError:
                continue
            asked.append((t.name, p.partition_index))
            lookups.append(broker.partition_service.remote_offset_for_timestamp(t.name, p.partition_index,
                                                                                p.timestamp))
    answers = await asyncio.gather(*lookups, return_exceptions=True)
    out: dict[PartitionKey, RemoteLookup] = {}
    for key, got in zip(asked, answers):
        if isinstance(got, Exception):
            out[key] = RemoteLookup(None, got)
        elif got is not None:
            out[key] = RemoteLookup(ListedOffset(got.timestamp, got.offset, got.leader_epoch))
    return out


@api(ListOffsetsRequest, ListOffsetsResponse, 1, 11, access=per_item("topics", "topics", topic(O.DESCRIBE), TOPIC_DENIED))
async def list_offsets(broker: BrokerContext, ctx: RequestContext, request):
    version = ctx.api_version
    read_committed = version >= 2 and request.isolation_level == READ_COMMITTED
    found_remotely = await _find_remotely(broker, request, version)

    service = broker.partition_service

    def answer_for(topic: str):
        def answer(p):
            if TIMESTAMP_MIN_VERSION.get(p.timestamp, 0) > version:
                raise errors.UnsupportedVersion(f"ListOffsets timestamp {p.timestamp} needs version "
                                                f"{TIMESTAMP_MIN_VERSION[p.timestamp]}")
            remote = found_remotely.get((topic, p.partition_index))
            if remote is not None and remote.error is not None:
                raise remote.error
            # KIP-320: the consumer's known leader epoch (v4+) is checked like a fetch's
            listed = service.list_offset(topic, p.partition_index, p.timestamp,
                                         current_leader_epoch=p.current_leader_epoch if version >= 4 else -1,
                                         read_committed=read_committed,
                                         found_remotely=remote.listed if remote is not None else None)
            return _LRPartition(partition_index=p.partition_index, error_code=NONE, timestamp=listed.timestamp,
                                offset=listed.offset, leader_epoch=listed.leader_epoch)
        return answer

    def fail(p, code):
        return _LRPartition(partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1,
                            leader_epoch=-1)
    topics = [_LRTopic(name=t.name, partitions=per_partition(t.partitions, answer_for(t.name), fail))
              for t in request.topics]
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


# ------------------------------------------------------------------------------------------------
# OffsetForLeaderEpoch (consumers validate their position after a leader change with it, KIP-320)
# ------------------------------------------------------------------------------------------------
_OERTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_OERPartition = _OERTopic.EpochEndOffset


@api(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4,
     access=per_item("topics", "topics", topic(O.DESCRIBE, "topic"), TOPIC_DENIED))
async def offset_for_leader_epoch(broker: BrokerContext, ctx: RequestContext, request):
    service = broker.partition_service

    def answer_for(topic: str):
        def answer(p):
            epoch, end_offset = service.end_offset_for_epoch(topic, p.partition, p.leader_epoch,
                                                             current_leader_epoch=p.current_leader_epoch)
            return _OERPartition(error_code=NONE, partition=p.partition, leader_epoch=epoch, end_offset=end_offset)
        return answer

    def fail(p, code):
        return _OERPartition(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)
    topics = [_OERTopic(topic=t.topic, partitions=per_partition(t.partitions, answer_for(t.topic), fail))
              for t in request.topics]
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
