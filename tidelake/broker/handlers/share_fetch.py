"""ShareFetch and ShareAcknowledge (KIP-932): share consumers acquire records and acknowledge them.

This module translates between the wire and ``tidelake.coordinator.share_group`` (sessions,
share-partitions: state machines). Records are read through the partition service, as Fetch reads
them; the response carries whole record batches and the offset ranges acquired in them (the client
delivers only those). Acknowledgements ride on ShareFetch or come alone in ShareAcknowledge; every
request that changed a share-partition is persisted (``flush``) before it is answered. In a cluster each
partition's leader serves its share-partitions, read back from the share coordinator when it starts leading.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Iterator

from tidelake import errors
from tidelake.broker.access import GROUP, TOPIC, Access, HandlerCheck, Need
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.registry import api
from tidelake.coordinator.share_config import READ_COMMITTED
from tidelake.coordinator.share_partition import AcquiredRange
from tidelake.coordinator.share_session import CLOSE_EPOCH
from tidelake.protocol.messages import (ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
                                        ShareFetchResponse)
from tidelake.protocol.records import iter_batches
from tidelake.security.acl.model import Operation

log = logging.getLogger("tidelake.broker.share_fetch")

TopicPartitionId = tuple[uuid.UUID, int]
# ShareFetch v1+ has no per-partition byte limit and clients ask for tens of MB; a fetch hands out at most
# MaxRecords records (500 by default), so one read of this much covers it (min_one: a larger batch still goes)
SHARE_READ_BYTES = 1 << 20
# Kafka's rules: READ on the group, and READ on each topic (named by id: only the handler can name it)
READ_TOPIC = HandlerCheck(Operation.READ, TOPIC)
SHARE_ACCESS = Access(whole=lambda r, _v: [Need(Operation.READ, GROUP, r.group_id)], in_handler=frozenset({READ_TOPIC}))


@dataclass
class PartitionAnswer:
    error: int = 0
    message: str | None = None
    ack_error: int = 0
    ack_message: str | None = None
    records: list = field(default_factory=list)  # record batches (bytes views), in offset order
    acquired: list[AcquiredRange] = field(default_factory=list)


def _topic_name(broker: BrokerContext, topic_id: uuid.UUID) -> str | None:
    info = broker.topics.by_id(topic_id)
    return info.name if info is not None else None


def _check_member(broker: BrokerContext, group_id: str | None, member_id: str | None) -> None:
    if not group_id:
        raise errors.InvalidGroupId("a share request names no group")
    if not member_id:
        raise errors.InvalidRequest("a share request names no member")
    if group_id in broker.groups.known_group_ids():
        raise errors.GroupIdNotFound(f"group {group_id} is a consumer group, not a share group")


def _coordinates(broker: BrokerContext, group_id: str) -> bool:
    try:
        broker.coordination.check_group_coordinator(group_id)
    except errors.NotCoordinator:
        return False
    return True


def _acknowledge(broker: BrokerContext, ctx: RequestContext, group_id: str, member_id: str, topics,
                 answers: dict[TopicPartitionId, PartitionAnswer], now_ms: int) -> None:
    """Apply every acknowledgement batch of ``topics``; errors go into each partition's answer."""
    for t in topics:
        name = _topic_name(broker, t.topic_id)
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            answer = answers.setdefault((t.topic_id, p.partition_index), PartitionAnswer())
            if name is None:
                answer.ack_error = errors.UnknownTopicId.code
                continue
            if not ctx.grants.permits(READ_TOPIC, name):
                answer.ack_error = errors.TopicAuthorizationFailed.code
                continue
            try:  # in a cluster only the partition's leader holds its share-partitions
                broker.partition_service.leader_epoch(name, p.partition_index)
            except errors.KafkaApiError as e:
                answer.ack_error, answer.ack_message = e.code, str(e)
                continue
            sp = broker.share_groups.share_partition(group_id, t.topic_id, p.partition_index)
            for b in p.acknowledgement_batches:
                try:
                    if sp is None:
                        raise errors.InvalidRecordState(f"no records of {name}-{p.partition_index} are in flight "
                                                        f"for share group {group_id}")
                    sp.acknowledge(member_id, b.first_offset, b.last_offset, list(b.acknowledge_types), now_ms)
                except errors.KafkaApiError as e:
                    log.debug("share group %s: acknowledgement %d-%d of %s-%d refused: %s", group_id, b.first_offset,
                              b.last_offset, name, p.partition_index, e)
                    answer.ack_error, answer.ack_message = e.code, str(e)


def _deliverable(data, aborted: list | None) -> Iterator[tuple[int, int, bool, object]]:
    """(first offset, last offset, deliverable, batch bytes) of each batch read, lazily (a fetch stops at its
    record limit): control batches are never deliverable, nor under read_committed an aborted transaction's
    batches (the consumer's rule, on the broker)."""
    pending = sorted(aborted or [], key=lambda a: a[1])
    aborting: set[int] = set()
    view = memoryview(data)
    for pos, h in iter_batches(view, validate=False):
        while pending and pending[0][1] <= h.last_offset:
            aborting.add(pending.pop(0)[0])
        if h.is_control:
            aborting.discard(h.producer_id)
            ok = False
        else:
            ok = not (h.is_transactional and h.producer_id in aborting)
        yield h.base_offset, h.last_offset, ok, view[pos:pos + h.size]


def _acquire(broker: BrokerContext, group_id: str, member_id: str, topic: str, topic_id: uuid.UUID, partition: int,
             max_records: int, max_bytes: int, now_ms: int) -> PartitionAnswer:
    try:
        broker.partition_service.leader_epoch(topic, partition)
    except errors.KafkaApiError as e:
        return PartitionAnswer(e.code, str(e))
    # a partition is assigned once initialized; a member may still fetch one it was not assigned (Kafka lets it)
    sp = broker.share_groups.initialize_partition(group_id, topic_id, partition)
    if sp is None:
        return PartitionAnswer(broker.missing_log_code(topic, partition))
    sp.expire_locks(now_ms)
    read_committed = sp.config.isolation_level == READ_COMMITTED
    for _attempt in range(2):
        offset = sp.next_fetch_offset()
        if offset is None:
            return PartitionAnswer()
        out = broker.partition_service.read(topic, partition, offset, min(max_bytes, SHARE_READ_BYTES),
                                            read_committed=read_committed,
                                            min_one=True, follower=False)
        if out.error == errors.OffsetOutOfRange.code and offset < out.log_start_offset:
            sp.reset(out.log_start_offset)  # retention removed records never delivered: start at the log start
            continue
        if out.error:
            return PartitionAnswer(out.error)
        break
    else:
        return PartitionAnswer()
    seen: list[tuple[int, int, object]] = []  # the batches the acquisition looked at

    def offsets():
        for first, last, ok, batch in _deliverable(out.records, out.aborted):
            seen.append((first, last, batch))
            for offset in range(first, last + 1):
                yield offset, ok
    acquired = sp.acquire(member_id, offsets(), max_records, now_ms)
    if not acquired:
        return PartitionAnswer()
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    records = [b for f, la, b in seen if la >= first and f <= last]
    return PartitionAnswer(records=records, acquired=acquired)


def _first_serving(share, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
    """Whether no ShareFetch has been answered from this share-partition since this broker began serving it."""
    sp = share.share_partition(group_id, topic_id, partition)
    return sp is None or not sp.served_fetch


def _session_partitions(broker: BrokerContext, session, req) -> set[TopicPartitionId]:
    """Apply the request's partitions and forgotten ones to the session; the partitions it adds."""
    added = set()
    for t in req.forgotten_topics_data:
        for p in t.partitions:
            if (t.topic_id, p) in session.partitions:
                session.partitions.remove((t.topic_id, p))
    for t in req.topics:
        for p in t.partitions:
            if (t.topic_id, p.partition_index) not in session.partitions:
                session.partitions.append((t.topic_id, p.partition_index))
                added.add((t.topic_id, p.partition_index))
    return added


@api(ShareFetchRequest, ShareFetchResponse, 1, 2, access=SHARE_ACCESS)
async def share_fetch(broker: BrokerContext, ctx: RequestContext, req):
    share = broker.share_groups
    group_id, member_id = req.group_id, req.member_id
    _check_member(broker, group_id, member_id)
    session = share.sessions.advance(group_id, member_id, req.share_session_epoch)
    closing = req.share_session_epoch == CLOSE_EPOCH
    # members are known to the group's coordinator; in a cluster another broker may lead the partitions fetched
    if not closing and _coordinates(broker, group_id) and not share.is_member(group_id, member_id):
        share.sessions.drop_member(group_id, member_id)
        raise errors.UnknownMemberId(f"member {member_id} is not in share group {group_id}")
    now = broker.clock_ms()
    answers: dict[TopicPartitionId, PartitionAnswer] = {}
    _acknowledge(broker, ctx, group_id, member_id, req.topics, answers, now)
    added: set[TopicPartitionId] = set()
    if closing:
        released = share.release_member(group_id, member_id)
        log.debug("share group %s: member %s closed its share session, %d records released", group_id, member_id,
                  released)
    else:
        added = _session_partitions(broker, session, req)
    renew_only = ctx.api_version >= 2 and req.is_renew_ack
    if not closing and not renew_only and req.max_records != 0 and req.max_bytes > 0:  # MaxBytes 0: acks only
        await _fetch_into(broker, ctx, req, session.partitions, added, answers)
    await broker.share_persister.flush(share)
    return _fetch_response(broker, req, answers)


async def _fetch_into(broker: BrokerContext, ctx: RequestContext, req, partitions: list[TopicPartitionId],
                      added: set[TopicPartitionId], answers: dict[TopicPartitionId, PartitionAnswer]) -> None:
    """Acquire records from the session's partitions, waiting up to MaxWaitMs for some to arrive (``added``: those
    the session fetches for the first time, whose persisted state is read again)."""
    added = set(added)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000
    config = broker.share_groups.config_for(req.group_id)
    max_records = req.max_records if req.max_records > 0 else config.partition_max_record_locks
    share = broker.share_groups
    while True:
        named = []
        budget, taken = req.max_bytes, 0
        # Kafka's leader loads a share-partition's state on the first fetch that names it, each partition on its
        # own, and answers as soon as one partition has records: a share-partition served here for the first time
        # joins the answer only while it has no records yet (librdkafka's 0179 counts on one partition's records
        # per answer then), after those already served
        for topic_id, partition in sorted(partitions, key=lambda tp: _first_serving(share, req.group_id, *tp)):
            name = _topic_name(broker, topic_id)
            answer = answers.setdefault((topic_id, partition), PartitionAnswer())
            if name is None:
                answer.error = errors.UnknownTopicId.code
                continue
            if not ctx.grants.permits(READ_TOPIC, name):
                answer.error = errors.TopicAuthorizationFailed.code
                continue
            named.append((name, partition))
            if taken >= max_records or budget <= 0:
                continue
            # a partition this broker just came to lead resumes from its persisted state
            try:
                ready = await broker.share_persister.load(broker.share_groups, req.group_id, name, topic_id, partition,
                                                          new_session=(topic_id, partition) in added)
                added.discard((topic_id, partition))
            except errors.KafkaApiError as e:
                answer.error, answer.message = e.code, str(e)
                continue
            if not ready:  # its state not readable yet (its share coordinator moving): nothing from it this time
                continue
            sp = share.share_partition(req.group_id, topic_id, partition)
            if sp is not None and not sp.served_fetch and taken:
                sp.served_fetch = True
                continue  # loaded now: the next fetch answers from it
            got = _acquire(broker, req.group_id, req.member_id, name, topic_id, partition, max_records - taken,
                           budget, broker.clock_ms())
            sp = share.share_partition(req.group_id, topic_id, partition)
            if sp is not None:
                sp.served_fetch = True
            answer.error, answer.message = got.error, got.message
            answer.records, answer.acquired = got.records, got.acquired
            taken += sum(r.last_offset - r.first_offset + 1 for r in got.acquired)
            budget -= sum(len(b) for b in got.records)
        remaining = deadline - loop.time()
        if taken or remaining <= 0 or not named:
            return
        # wake on new data; a lock expiring frees records too, so look again within a lock's time
        await broker.partition_service.wait_for_data(
            named, min(remaining, config.record_lock_duration_ms / 1000))


def _leader(broker: BrokerContext):
    return ShareFetchResponse.ShareFetchableTopicResponse.PartitionData.LeaderIdAndEpoch(
        leader_id=broker.node_id, leader_epoch=0)


def _fetch_response(broker: BrokerContext, req, answers: dict[TopicPartitionId, PartitionAnswer]):
    R = ShareFetchResponse.ShareFetchableTopicResponse
    P, A = R.PartitionData, R.PartitionData.AcquiredRecords
    requested = {(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions}
    for key in sorted(requested - answers.keys()):  # named but not fetched (MaxBytes 0, a closing session)
        answers[key] = PartitionAnswer()
    by_topic: dict[uuid.UUID, list] = {}
    for (topic_id, partition), a in answers.items():
        if not (a.records or a.error or a.ack_error or (topic_id, partition) in requested):
            continue  # a session partition with nothing to say is left out (an incremental answer)
        by_topic.setdefault(topic_id, []).append(P(
            partition_index=partition, error_code=a.error, error_message=a.message,
            acknowledge_error_code=a.ack_error, acknowledge_error_message=a.ack_message,
            current_leader=_leader(broker), records=b"".join(bytes(b) for b in a.records),
            acquired_records=[A(first_offset=r.first_offset, last_offset=r.last_offset,
                                delivery_count=r.delivery_count) for r in a.acquired]))
    return ShareFetchResponse(
        throttle_time_ms=0, error_code=0, error_message=None,
        acquisition_lock_timeout_ms=broker.share_groups.config_for(req.group_id).record_lock_duration_ms,
        responses=[R(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()], node_endpoints=[])


@api(ShareAcknowledgeRequest, ShareAcknowledgeResponse, 1, 2, access=SHARE_ACCESS)
async def share_acknowledge(broker: BrokerContext, ctx: RequestContext, req):
    share = broker.share_groups
    group_id, member_id = req.group_id, req.member_id
    _check_member(broker, group_id, member_id)
    if req.share_session_epoch == 0:
        raise errors.InvalidShareSessionEpoch("ShareAcknowledge cannot open a share session (epoch 0)")
    share.sessions.advance(group_id, member_id, req.share_session_epoch)
    answers: dict[TopicPartitionId, PartitionAnswer] = {}
    _acknowledge(broker, ctx, group_id, member_id, req.topics, answers, broker.clock_ms())
    if req.share_session_epoch == CLOSE_EPOCH:
        share.release_member(group_id, member_id)
    await broker.share_persister.flush(share)
    R = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
    P = R.PartitionData
    by_topic: dict[uuid.UUID, list] = {}
    for t in req.topics:
        for p in t.partitions:
            a = answers.get((t.topic_id, p.partition_index), PartitionAnswer())
            by_topic.setdefault(t.topic_id, []).append(P(
                partition_index=p.partition_index, error_code=a.ack_error, error_message=a.ack_message,
                current_leader=P.LeaderIdAndEpoch(leader_id=broker.node_id, leader_epoch=0)))
    return ShareAcknowledgeResponse(
        throttle_time_ms=0, error_code=0, error_message=None,
        acquisition_lock_timeout_ms=share.config_for(group_id).record_lock_duration_ms,
        responses=[R(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()], node_endpoints=[])
