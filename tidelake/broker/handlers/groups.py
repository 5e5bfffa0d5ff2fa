"""Group coordinator APIs: FindCoordinator, the classic group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), offsets (OffsetCommit, OffsetFetch, OffsetDelete), ListGroups,
DescribeGroups, DeleteGroups, and KIP-848's ConsumerGroupHeartbeat / ConsumerGroupDescribe.

This module only translates between wire messages and ``tidelake.coordinator.group_coordinator.GroupCoordinator``
(state machines, no sockets). Single node: this broker is the coordinator of every group and every
transactional id; in a cluster, the leader of the key's internal-topic partition is.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
                                  DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse)
from kafka.protocol.consumer import (HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
                                     LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest,
                                     OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
                                     OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from tidelake import errors
from tidelake.broker.cluster_role import CoordinatorAnswer
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.handlers.common import authorized_operations
from tidelake.broker.handlers.share_groups import delete_share_group
from tidelake.broker.access import (GROUP, GROUP_DENIED, TOPIC, TOPIC_DENIED, TXN, Access, HandlerCheck, ItemRule,
                                    ListingRule, Need, per_item, topic, whole)
from tidelake.broker.registry import api
from tidelake.security.acl.model import Operation, ResourceType
from tidelake.cluster.member import LiveBroker
from tidelake.coordinator.consumer_group import ConsumerGroup, group_by_topic, owned_from_wire
from tidelake.coordinator.group import ClassicGroup
from tidelake.coordinator.offsets import OFFSETS_TOPIC, OffsetAndMetadata
from tidelake.coordinator.streams_group import StreamsGroup
from tidelake.protocol.messages import (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
                                        ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse)

INVALID_GROUP_ID = errors.InvalidGroupId.code
O = Operation
DESCRIBE_TOPIC = HandlerCheck(O.DESCRIBE, TOPIC)  # OffsetFetch of every topic: which ones it lists


def _read_group(request, _version) -> list[Need]:
    return [Need(O.READ, GROUP, request.group_id)]
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types

log = logging.getLogger("tidelake.broker.groups")


# ---------------------------------------------------------------------------------------------
# FindCoordinator: key type 0 (group) and 1 (transaction)
# ---------------------------------------------------------------------------------------------
@api(FindCoordinatorRequest, FindCoordinatorResponse, 0, 6, access=whole(
    lambda r, v: [Need(O.DESCRIBE, TXN if (r.key_type if v >= 1 else 0) == 1 else GROUP, k)
                  for k in (r.coordinator_keys if v >= 4 else [r.key])]))
async def find_coordinator(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    key_type = req.key_type if v >= 1 else GROUP_KEY
    code = 0 if key_type in (GROUP_KEY, TRANSACTION_KEY) else errors.InvalidRequest.code
    keys = req.coordinator_keys if v >= 4 else [req.key]
    endpoint = broker.endpoint_for(ctx)
    here = LiveBroker(broker.node_id, endpoint.host, endpoint.port, None)
    answers: list[CoordinatorAnswer] = []
    for k in keys:
        if code:
            answers.append(CoordinatorAnswer(k, -1, "", -1, code))
        else:
            answers.append(await broker.coordination.find_coordinator(key_type, k, here, ctx.session.listener))
    if v < 4:
        a = answers[0]
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=a.error_code, error_message=a.error_message,
                                       node_id=a.node_id, host=a.host, port=a.port)
    C = FindCoordinatorResponse.Coordinator
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
        C(key=a.key, node_id=a.node_id, host=a.host, port=a.port, error_code=a.error_code,
          error_message=a.error_message) for a in answers])


# ---------------------------------------------------------------------------------------------
# classic protocol
# ---------------------------------------------------------------------------------------------
@api(JoinGroupRequest, JoinGroupResponse, 0, 9, access=whole(_read_group))
async def join_group(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    now = broker.clock_ms()

    def fail(code: int, member_id: str = ""):
        return JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1, protocol_type=None,
                                 protocol_name=None if v >= 7 else "", leader="", skip_assignment=False,
                                 member_id=member_id, members=[])
    if not req.group_id:
        return fail(INVALID_GROUP_ID, req.member_id)
    try:
        broker.check_group_coordinator(req.group_id)
        group = broker.groups.classic_group(req.group_id, create=not req.member_id, now_ms=now)
    except errors.KafkaApiError as e:
        return fail(e.code, req.member_id)
    result = await group.join(
        member_id=req.member_id, group_instance_id=req.group_instance_id if v >= 5 else None,
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        session_timeout_ms=req.session_timeout_ms, rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else -1,
        protocol_type=req.protocol_type, protocols=[(p.name, p.metadata) for p in req.protocols],
        require_known_member_id=v >= 4, now_ms=now)
    if result.error:
        return fail(result.error, result.member_id)
    log.info("group %s: member %s joined generation %d (protocol %s%s)", req.group_id, result.member_id,
             result.generation_id, result.protocol_name,
             f", leader of {len(result.members)} members" if result.member_id == result.leader else "")
    M = JoinGroupResponse.JoinGroupResponseMember
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=0, generation_id=result.generation_id, protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if (result.protocol_name is not None or v >= 7) else "",
        leader=result.leader, skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[M(member_id=m, group_instance_id=i, metadata=meta) for m, i, meta in result.members])


def _classic_or_error(broker: BrokerContext, group_id: str) -> ClassicGroup:
    broker.check_group_coordinator(group_id)
    g = broker.groups.groups.get(group_id)
    if g is None:
        raise errors.UnknownMemberId(f"no group {group_id}")
    if not isinstance(g, ClassicGroup):
        raise errors.InconsistentGroupProtocol(f"group {group_id} uses the consumer protocol")
    return g


@api(SyncGroupRequest, SyncGroupResponse, 0, 5, access=whole(_read_group))
async def sync_group(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    try:
        group = _classic_or_error(broker, req.group_id)
    except errors.KafkaApiError as e:
        return SyncGroupResponse(throttle_time_ms=0, error_code=e.code, protocol_type=None, protocol_name=None,
                                 assignment=b"")
    result = await group.sync(
        member_id=req.member_id, group_instance_id=req.group_instance_id if v >= 3 else None,
        generation_id=req.generation_id, protocol_type=req.protocol_type if v >= 5 else None,
        protocol_name=req.protocol_name if v >= 5 else None,
        assignments={a.member_id: a.assignment for a in (req.assignments or [])}, now_ms=broker.clock_ms())
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)


@api(HeartbeatRequest, HeartbeatResponse, 0, 4, access=whole(_read_group))
async def heartbeat(broker: BrokerContext, ctx: RequestContext, req):
    try:
        group = _classic_or_error(broker, req.group_id)
        code = group.heartbeat(member_id=req.member_id,
                               group_instance_id=req.group_instance_id if ctx.api_version >= 3 else None,
                               generation_id=req.generation_id, now_ms=broker.clock_ms())
    except errors.KafkaApiError as e:
        code = e.code
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


@api(LeaveGroupRequest, LeaveGroupResponse, 0, 5, access=whole(_read_group))
async def leave_group(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    members = [(req.member_id, None)] if v < 3 else [(m.member_id, m.group_instance_id) for m in req.members]
    try:
        group = _classic_or_error(broker, req.group_id)
        codes = group.leave(members, broker.clock_ms())
    except errors.KafkaApiError as e:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=e.code, members=[])
    if v < 3:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=codes[0], members=[])
    R = LeaveGroupResponse.MemberResponse
    return LeaveGroupResponse(throttle_time_ms=0, error_code=0, members=[
        R(member_id=m, group_instance_id=i, error_code=c) for (m, i), c in zip(members, codes)])


# ---------------------------------------------------------------------------------------------
# offsets
# ---------------------------------------------------------------------------------------------
# v10 identifies topics by id (Kafka 4.1); clients negotiate v9, which carries names.
@api(OffsetCommitRequest, OffsetCommitResponse, 2, 9,
     access=per_item("topics", "topics", topic(O.READ), TOPIC_DENIED, whole=_read_group))
async def offset_commit(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    now = broker.clock_ms()
    gc = broker.groups
    try:
        group_code = 0 if req.group_id else INVALID_GROUP_ID
        if not group_code:
            broker.check_group_coordinator(req.group_id)
            group_code = gc.validate_commit(req.group_id, req.member_id or "",
                                            req.group_instance_id if v >= 7 else None,
                                            req.generation_id_or_member_epoch, now)
            if not group_code and v < 9 and isinstance(gc.groups.get(req.group_id), StreamsGroup) and \
                    req.generation_id_or_member_epoch >= 0:  # as Kafka's StreamsGroup: members commit with v9+
                group_code = errors.UnsupportedVersion.code
    except errors.KafkaApiError as e:
        group_code = e.code
    per_partition: dict[tuple[str, int], int] = {}
    commits = []
    for t in req.topics:
        info = broker.topics.get(t.name)
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if group_code:
                per_partition[key] = group_code
            elif info is None or not 0 <= p.partition_index < info.partitions:
                per_partition[key] = errors.UnknownTopicOrPartition.code
            elif p.committed_metadata is not None and \
                    len(p.committed_metadata.encode()) > gc.config.offset_metadata_max_bytes:
                per_partition[key] = errors.OffsetMetadataTooLarge.code
            else:
                per_partition[key] = 0
                commits.append((t.name, p.partition_index, OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata or "", now)))
    if commits:
        try:
            gc.commit(req.group_id, commits, now)
            # acknowledged once the offsets topic's ISR has the commit
            code = await _replicated(broker, gc.partition_for(req.group_id))
            if code:
                raise errors.KafkaApiError(f"commit not replicated ({code})", code)
        except errors.KafkaApiError as e:
            for topic, partition, _ in commits:
                per_partition[(topic, partition)] = e.code
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=per_partition[(t.name, p.partition_index)])
                                   for p in t.partitions]) for t in req.topics])


async def _replicated(broker: BrokerContext, partition: int) -> int:
    """Wait until the in-sync replicas of __consumer_offsets-``partition`` have everything written to
    it so far (the group coordinator just appended); the error code, NONE once they do."""
    code = await broker.partition_service.log_end_replicated(
        OFFSETS_TOPIC, partition, broker.config.get_int("offsets.commit.timeout.ms"))
    if code == errors.NotLeaderOrFollower.code:
        return errors.NotCoordinator.code
    return errors.CoordinatorNotAvailable.code if code else errors.NONE  # Kafka's mapping of the other errors


def _fetch_group_offsets(broker: BrokerContext, group_id: str, topics, require_stable: bool,
                         member_id: str | None = None, member_epoch: int = -1, visible=lambda _topic: True):
    """(group error, [(topic, [(partition, offset, leader_epoch, metadata, error)])]); with ``topics``
    None, every topic with a committed offset that is ``visible``."""
    gc = broker.groups
    if member_id is not None and member_epoch >= 0:  # KIP-848 / KIP-1071 members fetch with their epoch
        g = gc.groups.get(group_id)
        if isinstance(g, (ConsumerGroup, StreamsGroup)):
            code = g.validate_offset_commit(member_id, member_epoch)
            if code:
                return code, []
    transactions = broker.transactions
    if topics is None:
        by_topic: dict[str, list[int]] = {}
        for (t, p) in sorted(gc.offsets.group_offsets(group_id)):
            if visible(t):
                by_topic.setdefault(t, []).append(p)
        wanted = list(by_topic.items())
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in topics]
    out = []
    for topic, partitions in wanted:
        rows = []
        for p in partitions:
            if require_stable and transactions.has_pending_offsets(group_id, topic, p):
                rows.append((p, -1, -1, "", errors.UnstableOffsetCommit.code))
                continue
            om = gc.offsets.get(group_id, topic, p)
            rows.append((p, -1, -1, "", 0) if om is None else (p, om.offset, om.leader_epoch, om.metadata, 0))
        out.append((topic, rows))
    return 0, out


# v10 identifies topics by id; clients negotiate v9.
# v1-7: one group (whole), its topics checked one by one; v8+: several groups, each answered on its own.
# A fetch of every committed offset lists only the topics the principal may describe, as Kafka's does.
@api(OffsetFetchRequest, OffsetFetchResponse, 1, 9, access=Access(
    whole=lambda r, v: [] if v >= 8 else [Need(O.DESCRIBE, GROUP, r.group_id)],
    items=ItemRule(lambda v: "groups" if v >= 8 else "topics", lambda v: "groups" if v >= 8 else "topics",
                   lambda c, item: (c.allowed(O.DESCRIBE, GROUP, item.group_id) if hasattr(item, "group_id")
                                    else c.allowed(O.DESCRIBE, TOPIC, item.name)),
                   lambda item: GROUP_DENIED if hasattr(item, "group_id") else TOPIC_DENIED),
    in_handler=frozenset({DESCRIBE_TOPIC})))
async def offset_fetch(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    require_stable = bool(req.require_stable) if v >= 7 else False
    if v < 8:
        T = OffsetFetchResponse.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        try:
            broker.check_group_coordinator(req.group_id)
            code, rows = _fetch_group_offsets(broker, req.group_id, req.topics, require_stable,
                                              visible=lambda t: ctx.grants.permits(DESCRIBE_TOPIC, t))
        except errors.KafkaApiError as e:
            code, rows = e.code, []
        return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[
            T(name=t, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=le, metadata=m,
                                    error_code=c) for p, o, le, m, c in parts]) for t, parts in rows])
    G = OffsetFetchResponse.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    groups = []
    def visible(t: str) -> bool:
        return ctx.grants.permits(DESCRIBE_TOPIC, t)
    for g in req.groups:
        try:
            broker.check_group_coordinator(g.group_id)
            code, rows = _fetch_group_offsets(broker, g.group_id, g.topics, require_stable,
                                              g.member_id if v >= 9 else None, g.member_epoch if v >= 9 else -1,
                                              visible)
        except errors.KafkaApiError as e:
            code, rows = e.code, []
        groups.append(G(group_id=g.group_id, error_code=code, topics=[
            T(name=t, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=le, metadata=m,
                                    error_code=c) for p, o, le, m, c in parts]) for t, parts in rows]))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


@api(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0, access=per_item(
    "topics", "topics", topic(O.READ), TOPIC_DENIED, whole=lambda r, v: [Need(O.DELETE, GROUP, r.group_id)]))
async def offset_delete(broker: BrokerContext, ctx: RequestContext, req):
    T = OffsetDeleteResponse.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    gc = broker.groups
    broker.check_group_coordinator(req.group_id)
    if req.group_id not in gc.known_group_ids():
        return OffsetDeleteResponse(error_code=errors.GroupIdNotFound.code, throttle_time_ms=0, topics=[])
    subscribed = gc.subscribed_topics(req.group_id)
    now = broker.clock_ms()
    deletes, codes = [], {}
    for t in req.topics:
        for p in t.partitions:
            if subscribed is None or t.name in subscribed:
                codes[(t.name, p.partition_index)] = errors.GroupSubscribedToTopic.code
            else:
                codes[(t.name, p.partition_index)] = 0
                if gc.offsets.get(req.group_id, t.name, p.partition_index) is not None:
                    deletes.append((t.name, p.partition_index, None))
    if deletes:
        gc.commit(req.group_id, deletes, now)
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=codes[(t.name, p.partition_index)])
                                   for p in t.partitions]) for t in req.topics])


# ---------------------------------------------------------------------------------------------
# group admin
# ---------------------------------------------------------------------------------------------
@api(ListGroupsRequest, ListGroupsResponse, 0, 5, access=Access(listing=ListingRule(
    "groups", lambda c, g: c.cluster(O.DESCRIBE) or c.allowed(O.DESCRIBE, GROUP, g.group_id))))
async def list_groups(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    gc = broker.groups
    states = {s.lower() for s in (req.states_filter or [])} if v >= 4 else set()
    types = {s.lower() for s in (req.types_filter or [])} if v >= 5 else set()
    L = ListGroupsResponse.ListedGroup
    listed = []
    for gid in sorted(gc.known_group_ids()):
        state, protocol_type, group_type = gc.group_state(gid)
        if (states and state.lower() not in states) or (types and group_type not in types):
            continue
        listed.append(L(group_id=gid, protocol_type=protocol_type, group_state=state, group_type=group_type))
    for gid, share_group in sorted(broker.share_groups.groups.items()):  # KIP-932: type "share"
        if (states and share_group.state.lower() not in states) or (types and "share" not in types):
            continue
        listed.append(L(group_id=gid, protocol_type="share", group_state=share_group.state, group_type="share"))
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=listed)


@api(DescribeGroupsRequest, DescribeGroupsResponse, 0, 6,
     access=per_item("groups", "groups", lambda c, g: c.allowed(O.DESCRIBE, GROUP, g), GROUP_DENIED))
async def describe_groups(broker: BrokerContext, ctx: RequestContext, req):
    broker.check_group_coordinator(*req.groups)  # clients ask each group's coordinator
    v = ctx.api_version
    gc = broker.groups
    D = DescribeGroupsResponse.DescribedGroup
    M = D.DescribedGroupMember
    out = []
    for gid in req.groups:
        g = gc.groups.get(gid)
        ops = (authorized_operations(broker, ctx, ResourceType.GROUP, gid)
               if v >= 3 and req.include_authorized_operations else None)  # KIP-430
        if g is None:
            known = gid in gc.known_group_ids()
            out.append(D(error_code=0 if known or v < 6 else errors.GroupIdNotFound.code, error_message=None,
                         group_id=gid, group_state="Empty" if known else "Dead", protocol_type="", protocol_data="",
                         members=[], authorized_operations=ops))
        elif isinstance(g, ClassicGroup):
            out.append(D(error_code=0, error_message=None, group_id=gid, group_state=g.state,
                         protocol_type=g.protocol_type or "", protocol_data=g.protocol or "",
                         members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                                    client_host=m.client_host, member_metadata=m.metadata(g.protocol),
                                    member_assignment=m.assignment) for m in g.members.values()],
                         authorized_operations=ops))
        else:  # a KIP-848 group: Kafka 4.x's DescribeGroups knows only classic groups (clients
            # describe consumer groups with ConsumerGroupDescribe): Dead, GROUP_ID_NOT_FOUND from v6
            out.append(D(error_code=errors.GroupIdNotFound.code if v >= 6 else 0,
                         error_message=f"Group {gid} is not a classic group." if v >= 6 else None,
                         group_id=gid, group_state="Dead", protocol_type="", protocol_data="", members=[],
                         authorized_operations=ops))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)


@api(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2,
     access=per_item("groups_names", "results", lambda c, g: c.allowed(O.DELETE, GROUP, g), GROUP_DENIED))
async def delete_groups(broker: BrokerContext, ctx: RequestContext, req):
    gc = broker.groups
    R = DeleteGroupsResponse.DeletableGroupResult
    results = []
    for gid in req.groups_names:
        try:
            broker.check_group_coordinator(gid)
            if gid in broker.share_groups.groups:  # KIP-932
                await delete_share_group(broker, gid)
                code = errors.NONE
            else:
                code = gc.delete_group(gid)
        except errors.KafkaApiError as e:
            code = e.code
        results.append(R(group_id=gid, error_code=code))
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)


# ---------------------------------------------------------------------------------------------
# KIP-848
# ---------------------------------------------------------------------------------------------
def _topic_ids(broker: BrokerContext) -> dict:
    return {info.topic_id: name for name, info in broker.metadata.topics.items()}


# as Kafka, a subscription naming a topic the member may not describe fails whole with
# TOPIC_AUTHORIZATION_FAILED (a client never learns of topics it cannot see)
@api(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 1, access=whole(
    lambda r, v: [Need(O.READ, GROUP, r.group_id)] + [Need(O.DESCRIBE, TOPIC, t) for t in r.subscribed_topic_names or ()]))
async def consumer_group_heartbeat(broker: BrokerContext, ctx: RequestContext, req):
    R = ConsumerGroupHeartbeatResponse
    if not req.group_id:
        return R(throttle_time_ms=0, error_code=INVALID_GROUP_ID, error_message="empty group id",
                 member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    try:
        broker.check_group_coordinator(req.group_id)
        group = broker.groups.consumer_group(req.group_id, create=req.member_epoch == 0)
    except errors.KafkaApiError as e:
        return R(throttle_time_ms=0, error_code=e.code, error_message=str(e), member_id=None, member_epoch=-1,
                 heartbeat_interval_ms=0, assignment=None)
    ids = _topic_ids(broker)
    result = group.heartbeat(
        member_id=req.member_id, member_epoch=req.member_epoch, instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms, subscribed_topic_names=req.subscribed_topic_names,
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=req.server_assignor, owned=owned_from_wire(req.topic_partitions, ids.get),
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host, now_ms=broker.clock_ms())
    if result.error:
        return R(throttle_time_ms=0, error_code=result.error, error_message=result.error_message, member_id=None,
                 member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    assignment = None
    if result.assignment is not None:
        name_to_id = {name: tid for tid, name in ids.items()}
        assignment = R.Assignment(topic_partitions=[
            R.Assignment.TopicPartitions(topic_id=name_to_id[t], partitions=ps)
            for t, ps in group_by_topic(result.assignment).items() if t in name_to_id])
    return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=result.member_id,
             member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
             assignment=assignment)


@api(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 1,
     access=per_item("group_ids", "groups", lambda c, g: c.allowed(O.DESCRIBE, GROUP, g), GROUP_DENIED))
async def consumer_group_describe(broker: BrokerContext, ctx: RequestContext, req):
    broker.check_group_coordinator(*req.group_ids)
    R = ConsumerGroupDescribeResponse
    D = R.DescribedGroup
    M = D.Member
    A = M.Assignment
    TP = A.TopicPartitions
    gc = broker.groups
    name_to_id = {name: info.topic_id for name, info in broker.metadata.topics.items()}

    def assignment(tps) -> Any:
        return A(topic_partitions=[TP(topic_id=name_to_id.get(t), topic_name=t, partitions=ps)
                                   for t, ps in group_by_topic(tps).items() if t in name_to_id])
    out = []
    for gid in req.group_ids:
        g = gc.groups.get(gid)
        if not isinstance(g, ConsumerGroup) or g.dead:
            out.append(D(error_code=errors.GroupIdNotFound.code, error_message=f"Group {gid} not found.",
                         group_id=gid, group_state="Dead", group_epoch=-1, assignment_epoch=-1, assignor_name="",
                         members=[], authorized_operations=-2147483648))
            continue
        out.append(D(error_code=0, error_message=None, group_id=gid, group_state=g.state, group_epoch=g.group_epoch,
                     assignment_epoch=g.assignment_epoch, assignor_name=g.assignor_name,
                     members=[M(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                                member_epoch=m.epoch, client_id=m.client_id, client_host=m.client_host,
                                subscribed_topic_names=list(m.subscribed_topics),
                                subscribed_topic_regex=m.subscribed_regex,
                                assignment=assignment(m.assigned),
                                target_assignment=assignment(g.target_of(m.member_id)), member_type=1)
                              for m in g.members.values()],
                     authorized_operations=-2147483648))
    return R(throttle_time_ms=0, groups=out)
