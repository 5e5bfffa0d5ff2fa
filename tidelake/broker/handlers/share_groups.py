"""Share-group membership and administration (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe and
Kafka 4.2's DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets.

This module only translates between wire messages and ``tidelake.coordinator.share_group``. In a cluster the
group's coordinator answers the heartbeats, descriptions and DescribeShareGroupOffsets (from the persisted state);
Alter/DeleteShareGroupOffsets are a broker alone's still.
"""
from __future__ import annotations

from tidelake import errors
from tidelake.broker.access import GROUP, GROUP_DENIED, TOPIC, Need, per_item, whole
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.handlers.common import authorized_operations, bit_set
from tidelake.broker.registry import api
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.share_coordinator import PersistedState
from tidelake.coordinator.share_group import SIMPLE_ASSIGNOR
from tidelake.coordinator.share_partition import ACKNOWLEDGED, ARCHIVED
from tidelake.coordinator.share_state import ShareStateKey
from tidelake.protocol.messages import (AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
                                        DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
                                        DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
                                        ShareGroupDescribeRequest, ShareGroupDescribeResponse,
                                        ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse)
from tidelake.security.acl.model import Operation, ResourceType

O = Operation
DEAD = "Dead"  # ShareGroupDescribe's state of a group id no share group has


def _not_consumer_group(broker: BrokerContext, group_id: str) -> None:
    if group_id in broker.groups.known_group_ids():
        raise errors.GroupIdNotFound(f"group {group_id} is a consumer group, not a share group")


# as ConsumerGroupHeartbeat: a subscription naming a topic the member may not describe fails whole
@api(ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, 1, 1, access=whole(
    lambda r, _v: [Need(O.READ, GROUP, r.group_id)] + [Need(O.DESCRIBE, TOPIC, t)
                                                        for t in r.subscribed_topic_names or ()]))
async def share_group_heartbeat(broker: BrokerContext, ctx: RequestContext, req):
    if not req.group_id:
        raise errors.InvalidGroupId("ShareGroupHeartbeat names no group")
    broker.coordination.check_group_coordinator(req.group_id)  # in a cluster: NOT_COORDINATOR elsewhere
    _not_consumer_group(broker, req.group_id)
    answer = broker.share_groups.heartbeat(
        req.group_id, req.member_id, req.member_epoch, subscribed=req.subscribed_topic_names,
        rack_id=req.rack_id, client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        now_ms=broker.clock_ms())
    await broker.share_persister.flush(broker.share_groups)
    await group_records_replicated(broker, req.group_id)
    assignment = None
    if answer.assignment is not None:
        A = ShareGroupHeartbeatResponse.Assignment
        assignment = A(topic_partitions=[A.TopicPartitions(topic_id=tid, partitions=list(parts))
                                         for tid, parts in answer.assignment.items()])
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, error_message=None, member_id=answer.member_id,
        member_epoch=answer.member_epoch, heartbeat_interval_ms=answer.heartbeat_interval_ms, assignment=assignment)


async def group_records_replicated(broker: BrokerContext, group_id: str) -> None:
    """Wait until the in-sync replicas of the group's __consumer_offsets partition have its records (as Kafka's
    coordinator answers once its records are committed), so a new coordinator has what the members were told."""
    code = await broker.partition_service.log_end_replicated(
        OFFSETS_TOPIC, broker.groups.partition_for(group_id), broker.config.get_int("offsets.commit.timeout.ms"))
    if code == errors.NotLeaderOrFollower.code:
        raise errors.NotCoordinator(f"share group {group_id}: this broker no longer leads its {OFFSETS_TOPIC} partition")
    if code:
        raise errors.CoordinatorNotAvailable(f"share group {group_id}: its records were not replicated (error {code})")


async def delete_share_group(broker: BrokerContext, group_id: str) -> None:
    """DeleteGroups on a share group, as Kafka's: only an empty one; its share state deleted (at the share
    coordinators, in a cluster), then its records in __consumer_offsets tombstoned."""
    group = broker.share_groups.groups.get(group_id)
    if group is not None and group.members:
        raise errors.NonEmptyGroup(f"share group {group_id} has members")
    for topic_id in broker.share_groups.topics_with_state(group_id):
        info = broker.topics.by_id(topic_id)
        if info is not None:
            await broker.share_persister.delete_offsets(broker.share_groups, group_id, topic_id, info.partitions)
    broker.share_groups.delete_group(group_id)
    await group_records_replicated(broker, group_id)


@api(ShareGroupDescribeRequest, ShareGroupDescribeResponse, 1, 1,
     access=per_item("group_ids", "groups", lambda c, g: c.allowed(O.DESCRIBE, GROUP, g), GROUP_DENIED))
async def share_group_describe(broker: BrokerContext, ctx: RequestContext, req):
    D = ShareGroupDescribeResponse.DescribedGroup
    M = D.Member
    out = []
    for group_id in req.group_ids:
        group = broker.share_groups.groups.get(group_id)
        ops = (bit_set(authorized_operations(broker, ctx, ResourceType.GROUP, group_id))
               if req.include_authorized_operations else -2147483648)
        try:
            broker.coordination.check_group_coordinator(group_id)
        except errors.NotCoordinator as e:
            out.append(D(error_code=e.code, error_message=str(e), group_id=group_id, group_state=DEAD, group_epoch=-1,
                         assignment_epoch=-1, assignor_name="", members=[], authorized_operations=ops))
            continue
        if group is None:
            out.append(D(error_code=errors.GroupIdNotFound.code, error_message=f"group {group_id} is not a share group",
                         group_id=group_id, group_state=DEAD, group_epoch=-1, assignment_epoch=-1, assignor_name="",
                         members=[], authorized_operations=ops))
            continue
        members = []
        for m in group.members.values():
            tps = []
            for topic_id, parts in m.assignment.items():
                info = broker.topics.by_id(topic_id)
                tps.append(M.Assignment.TopicPartitions(topic_id=topic_id, topic_name=info.name if info else "",
                                                        partitions=list(parts)))
            members.append(M(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch, client_id=m.client_id,
                             client_host=m.client_host, subscribed_topic_names=list(m.subscribed),
                             assignment=M.Assignment(topic_partitions=tps)))
        out.append(D(error_code=0, error_message=None, group_id=group_id, group_state=group.state,
                     group_epoch=group.epoch, assignment_epoch=group.assignment_epoch, assignor_name=SIMPLE_ASSIGNOR,
                     members=members, authorized_operations=ops))
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=out)


@api(DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, 0, 1,
     access=per_item("groups", "groups", lambda c, g: c.allowed(O.DESCRIBE, GROUP, g.group_id), GROUP_DENIED))
async def describe_share_group_offsets(broker: BrokerContext, ctx: RequestContext, req):
    """The group's share-partitions' start offsets and lags, answered by the group's coordinator from the state as
    persisted (in a cluster, read from the share coordinators) and each partition's high watermark (in a cluster,
    asked of its leader, as Kafka's group coordinator does; the lag is -1 where the leader does not answer)."""
    R = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
    T = R.DescribeShareGroupOffsetsResponseTopic
    P = T.DescribeShareGroupOffsetsResponsePartition
    groups = []
    for g in req.groups:
        try:
            broker.coordination.check_group_coordinator(g.group_id)
        except errors.NotCoordinator as e:
            groups.append(R(group_id=g.group_id, topics=[], error_code=e.code, error_message=str(e)))
            continue
        every = g.topics is None  # every partition the group has state for, of the topics it holds or subscribes
        wanted = _known_topics(broker, g.group_id) if every else [(t.topic_name, list(t.partitions)) for t in g.topics]
        # per topic: (partition, its state, or the error to answer)
        found: list[tuple[str, object, list[tuple[int, PersistedState | None, errors.KafkaApiError | None]]]] = []
        for name, partitions in wanted:
            info = broker.topics.get(name)
            parts = []
            for p in partitions:
                if info is None or not 0 <= p < info.partitions:
                    parts.append((p, None, errors.UnknownTopicOrPartition()))
                    continue
                try:
                    state = await broker.share_persister.read_state(broker.share_groups,
                                                                    ShareStateKey(g.group_id, info.topic_id, p))
                except errors.KafkaApiError as e:
                    parts.append((p, None, e))
                    continue
                if state is None and every:
                    continue
                parts.append((p, state, None))
            if parts or not every:
                found.append((name, info.topic_id if info else None, parts))
        ends = await broker.cluster_view.high_watermarks(
            [(name, p) for name, _tid, parts in found for p, state, _e in parts if state is not None])
        topics = []
        for name, tid, parts in found:
            answers = []
            for p, state, error in parts:
                if error is not None:
                    answers.append(P(partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1, error_code=error.code,
                                     error_message=None if isinstance(error, errors.UnknownTopicOrPartition)
                                     else str(error)))
                    continue
                start, lag = (state.start_offset, _lag(ends.get((name, p)), state)) if state is not None else (-1, -1)
                answers.append(P(partition_index=p, start_offset=start, leader_epoch=0, lag=lag, error_code=0,
                                 error_message=None))
            topics.append(T(topic_name=name, topic_id=tid, partitions=answers))
        groups.append(R(group_id=g.group_id, topics=topics, error_code=0, error_message=None))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


def _known_topics(broker: BrokerContext, group_id: str) -> list[tuple[str, list[int]]]:
    """The topics the group has share state of (held here, or in a cluster initialized at the share coordinators,
    as the group's records say: an empty group's coordinator need lead none of them) or whose names its members
    subscribe to, each with all its partitions (a deleted topic's state is gone with it)."""
    names = {info.name for topic_id in broker.share_groups.topics_with_state(group_id)
             if (info := broker.topics.by_id(topic_id)) is not None}
    group = broker.share_groups.groups.get(group_id)
    names.update(t for m in (group.members.values() if group is not None else ()) for t in m.subscribed)
    return [(name, list(range(info.partitions))) for name in sorted(names) if (info := broker.topics.get(name))]


def _lag(high_watermark: int | None, state: PersistedState) -> int:
    """Records up to the high watermark not yet acknowledged or archived; -1 where it is not known."""
    if high_watermark is None:
        return -1
    done = sum(b.last_offset - b.first_offset + 1 for b in state.batches if b.state in (ACKNOWLEDGED, ARCHIVED))
    return max(0, high_watermark - state.start_offset) - done


@api(AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, 0, 0, access=whole(
    lambda r, _v: [Need(O.READ, GROUP, r.group_id)] + [Need(O.READ, TOPIC, t.topic_name) for t in r.topics]))
async def alter_share_group_offsets(broker: BrokerContext, ctx: RequestContext, req):
    """Set share-partitions' start offsets; as Kafka, by the group's coordinator, only while the group has no
    members (in a cluster, at the share coordinators at a newer state epoch: a partition leader still holding a
    share-partition drops it and reads it again)."""
    broker.coordination.check_group_coordinator(req.group_id)
    _not_consumer_group(broker, req.group_id)
    group = broker.share_groups.groups.get(req.group_id)
    if group is not None and group.members:
        raise errors.NonEmptyGroup(f"share group {req.group_id} has members")
    R = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
    P = R.AlterShareGroupOffsetsResponsePartition
    out = []
    for t in req.topics:
        info = broker.topics.get(t.topic_name)
        parts = []
        for p in t.partitions:
            if info is None or not 0 <= p.partition_index < info.partitions:
                parts.append(P(partition_index=p.partition_index, error_code=errors.UnknownTopicOrPartition.code,
                               error_message=None))
                continue
            try:
                key = ShareStateKey(req.group_id, info.topic_id, p.partition_index)
                await broker.share_persister.alter_offset(broker.share_groups, key, p.start_offset)
                broker.share_groups.offsets_altered(key)
            except errors.KafkaApiError as e:
                parts.append(P(partition_index=p.partition_index, error_code=e.code, error_message=str(e)))
                continue
            parts.append(P(partition_index=p.partition_index, error_code=0, error_message=None))
        out.append(R(topic_name=t.topic_name, topic_id=info.topic_id if info else None, partitions=parts))
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=out)


@api(DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, 0, 0, access=whole(
    lambda r, _v: [Need(O.DELETE, GROUP, r.group_id)] + [Need(O.READ, TOPIC, t.topic_name) for t in r.topics]))
async def delete_share_group_offsets(broker: BrokerContext, ctx: RequestContext, req):
    """Forget share-partitions' state (the group starts over by share.auto.offset.reset); only while the
    group has no members, as Kafka, by the group's coordinator (in a cluster, at the share coordinators)."""
    broker.coordination.check_group_coordinator(req.group_id)
    _not_consumer_group(broker, req.group_id)
    group = broker.share_groups.groups.get(req.group_id)
    if group is not None and group.members:
        raise errors.NonEmptyGroup(f"share group {req.group_id} has members")
    R = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
    out = []
    for t in req.topics:
        info = broker.topics.get(t.topic_name)
        if info is None:
            out.append(R(topic_name=t.topic_name, topic_id=None, error_code=errors.UnknownTopicOrPartition.code,
                         error_message=None))
            continue
        try:
            await broker.share_persister.delete_offsets(broker.share_groups, req.group_id, info.topic_id,
                                                        info.partitions)
        except errors.KafkaApiError as e:
            out.append(R(topic_name=t.topic_name, topic_id=info.topic_id, error_code=e.code, error_message=str(e)))
            continue
        out.append(R(topic_name=t.topic_name, topic_id=info.topic_id, error_code=0, error_message=None))
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=out)
