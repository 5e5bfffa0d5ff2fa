"""Streams-group membership and description (KIP-1071): StreamsGroupHeartbeat and StreamsGroupDescribe at Kafka
4.4's versions (0-1; v1 adds the topology-description flag and status, answered "not stored": this broker keeps no
topology descriptions, so it never asks for one and does not serve StreamsGroupTopologyDescriptionUpdate).

This module translates between wire messages and ``tidelake.coordinator.streams_group``, validates the requests as
Kafka's ``GroupCoordinatorService`` does, and creates the internal topics (repartition, changelog) the group found
missing, as Kafka's ``KafkaApis`` does after the heartbeat: the members get their tasks on a later heartbeat, once
the topics exist. Offsets go through OffsetCommit / OffsetFetch / TxnOffsetCommit (``groups.py``,
``transactions.py``), groups are listed and deleted by ListGroups / DeleteGroups there too.
"""
from __future__ import annotations

import logging

from tidelake import errors
from tidelake.broker.access import GROUP, GROUP_DENIED, TOPIC, Access, HandlerCheck, Need, per_item
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.handlers.common import authorized_operations, bit_set
from tidelake.broker.registry import api
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.streams_group import (DEAD, STATIC_LEAVE_EPOCH, STREAMS_INVALID_TOPOLOGY, StreamsGroup,
                                                StreamsHeartbeat, StreamsHeartbeatResult, Tasks)
from tidelake.coordinator.streams_topology import (MISSING_INTERNAL_TOPICS, CopartitionGroup, Subtopology, TopicInfo,
                                                   Topology)
from tidelake.protocol.messages import (StreamsGroupDescribeRequest, StreamsGroupDescribeResponse,
                                        StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse)
from tidelake.security.acl.model import Operation, ResourceType

O = Operation
log = logging.getLogger("tidelake.broker.streams_groups")

ASSIGNOR = "sticky"  # Kafka's default group.streams.assignor.name (this broker's only one)
NOT_STORED = 1  # StreamsGroupDescribe v1 TopologyDescriptionStatus: no description recorded for the group
NOT_REQUESTED = 0
ACCEPTABLE_RECOVERY_LAG = 10000  # Kafka's group.streams.acceptable.recovery.lag default
TASK_OFFSET_INTERVAL_MS = 60000  # Kafka's group.streams.task.offset.interval.ms default


# creating an internal topic needs CREATE on the cluster or on that topic, as Kafka's KafkaApis checks it
CREATE_TOPIC = HandlerCheck(O.CREATE, TOPIC, cluster_suffices=True)


def _source_topics(req) -> list[str]:
    subtopologies = req.topology.subtopologies if req.topology is not None else ()
    return sorted({t for s in subtopologies for t in s.source_topics})


class _Invalid(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _validate(req) -> None:
    """Kafka's ``throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures`` then ``...IsInvalid``."""
    invalid = errors.InvalidRequest.code
    if req.topology is not None and any(s.source_topic_regex for s in req.topology.subtopologies):
        raise _Invalid(invalid, "Regular expressions for source topics are not supported yet.")
    for value, name in ((req.member_id, "MemberId"), (req.group_id, "GroupId")):
        if not value or not value.strip():
            raise _Invalid(invalid, f"{name} can't be empty.")
    for value, name in ((req.instance_id, "InstanceId"), (req.rack_id, "RackId")):
        if value is not None and not value.strip():
            raise _Invalid(invalid, f"{name} can't be empty.")
    tasks = (req.active_tasks, req.standby_tasks, req.warmup_tasks)
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise _Invalid(invalid, "RebalanceTimeoutMs must be provided in first request.")
        for value, name in zip(tasks, ("ActiveTasks", "StandbyTasks", "WarmupTasks")):
            if value:
                raise _Invalid(invalid, f"{name} must be empty when (re-)joining.")
        if req.topology is None:
            raise _Invalid(invalid, "Topology must be non-null when (re-)joining.")
        for s in req.topology.subtopologies:
            for t in s.state_changelog_topics:
                if t.partitions != 0:
                    raise _Invalid(STREAMS_INVALID_TOPOLOGY, f"Changelog topic {t.name} must have an undefined "
                                                             f"partition count, but it is set to {t.partitions}.")
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise _Invalid(invalid, "InstanceId can't be null.")
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        raise _Invalid(invalid, f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
    if any(t is not None for t in tasks) and any(t is None for t in tasks):
        raise _Invalid(invalid, "If one task-type is non-null, all must be non-null.")
    if req.member_epoch != 0 and req.topology is not None:
        raise _Invalid(invalid, "Topology can only be provided when (re-)joining.")


def _topology(wire) -> Topology:
    def info(t) -> TopicInfo:
        return TopicInfo(t.name, t.partitions, t.replication_factor,
                         tuple((c.key, c.value) for c in t.topic_configs or ()))
    return Topology(wire.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.repartition_sink_topics),
                    tuple(info(t) for t in s.state_changelog_topics),
                    tuple(info(t) for t in s.repartition_source_topics),
                    tuple(CopartitionGroup(tuple(g.source_topics), tuple(g.repartition_source_topics))
                          for g in s.copartition_groups))
        for s in wire.subtopologies))


def _tasks(active, standby, warmup) -> Tasks | None:
    if active is None:
        return None

    def ids(wire) -> frozenset:
        return frozenset((t.subtopology_id, p) for t in wire or () for p in t.partitions)
    return Tasks(ids(active), ids(standby), ids(warmup))


def _offsets(wire) -> dict | None:
    return None if wire is None else {(o.subtopology_id, o.partition): o.offset for o in wire}


def _task_ids(cls, tasks) -> list:
    by: dict[str, list[int]] = {}
    for sid, p in sorted(tasks):
        by.setdefault(sid, []).append(p)
    return [cls(subtopology_id=sid, partitions=ps) for sid, ps in by.items()]


def _heartbeat_error(code: int, message: str | None):
    return StreamsGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=code, error_message=message, member_id="", member_epoch=-1,
        heartbeat_interval_ms=0, acceptable_recovery_lag_legacy=0, task_offset_interval_ms=0,
        acceptable_recovery_lag=-1, status=None, active_tasks=None, standby_tasks=None, warmup_tasks=None,
        topology_description_required=False, endpoint_information_epoch=0, partitions_by_user_endpoint=None)


# a topology reading a topic the member may not describe fails whole with TOPIC_AUTHORIZATION_FAILED, as Kafka's
@api(StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, 0, 1, access=Access(
    whole=lambda r, _v: [Need(O.READ, GROUP, r.group_id)] + [Need(O.DESCRIBE, TOPIC, t) for t in _source_topics(r)],
    in_handler=frozenset({CREATE_TOPIC})))
async def streams_group_heartbeat(broker: BrokerContext, ctx: RequestContext, req):
    try:
        _validate(req)
    except _Invalid as e:
        return _heartbeat_error(e.code, str(e))
    try:
        broker.check_group_coordinator(req.group_id)
        group = broker.groups.streams_group(req.group_id, create=req.member_epoch == 0)
    except errors.KafkaApiError as e:
        return _heartbeat_error(e.code, str(e))
    endpoint = (req.user_endpoint.host, req.user_endpoint.port) if req.user_endpoint is not None else None
    result = group.heartbeat(StreamsHeartbeat(
        member_id=req.member_id, member_epoch=req.member_epoch,
        endpoint_information_epoch=req.endpoint_information_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
        topology=_topology(req.topology) if req.topology is not None else None,
        owned=_tasks(req.active_tasks, req.standby_tasks, req.warmup_tasks), process_id=req.process_id,
        user_endpoint=endpoint,
        client_tags={kv.key: kv.value for kv in req.client_tags} if req.client_tags is not None else None,
        task_offsets=_offsets(req.task_offsets), task_end_offsets=_offsets(req.task_end_offsets),
        shutdown_application=bool(req.shutdown_application), client_id=ctx.client_id or "",
        client_host="/" + ctx.client_host), broker.clock_ms())
    if result.error:
        return _heartbeat_error(result.error, result.error_message)
    try:
        await _records_replicated(broker, req.group_id)
    except errors.KafkaApiError as e:
        return _heartbeat_error(e.code, str(e))
    await _create_internal_topics(broker, ctx, req.group_id, result)
    return _heartbeat_response(result)


async def _records_replicated(broker: BrokerContext, group_id: str) -> None:
    """Answer once the in-sync replicas of the group's __consumer_offsets partition have its records, as Kafka's
    coordinator answers once they are committed (a new coordinator then has what the members were told)."""
    code = await broker.partition_service.log_end_replicated(
        OFFSETS_TOPIC, broker.groups.partition_for(group_id), broker.config.get_int("offsets.commit.timeout.ms"))
    if code == errors.NotLeaderOrFollower.code:
        raise errors.NotCoordinator(f"streams group {group_id}: this broker no longer leads its {OFFSETS_TOPIC} "
                                    "partition")
    if code:
        raise errors.CoordinatorNotAvailable(f"streams group {group_id}: its records were not replicated "
                                             f"(error {code})")


async def _create_internal_topics(broker: BrokerContext, ctx: RequestContext, group_id: str,
                                  result: StreamsHeartbeatResult) -> None:
    """Create the internal topics the group found missing (as Kafka does after the heartbeat: the members are told
    MISSING_INTERNAL_TOPICS now, and get their tasks once a later heartbeat finds the topics); those the member may
    not create are named in the status instead, as Kafka's."""
    refused = sorted(t.name for t in result.to_create if not ctx.grants.permits(CREATE_TOPIC, t.name))
    if refused:
        result.status.append((MISSING_INTERNAL_TOPICS, f"Unauthorized to CREATE on topics {', '.join(refused)}."))
    for t in result.to_create:
        if t.name in refused:
            continue
        try:
            await broker.topic_admin.create_topic(t.name, t.partitions, t.replication_factor, dict(t.configs), None,
                                                  validate_only=False,
                                                  timeout_ms=broker.config.get_int("request.timeout.ms"))
            log.info("streams group %s: created internal topic %s (%d partitions)", group_id, t.name, t.partitions)
        except errors.TopicAlreadyExists:
            pass
        except errors.KafkaApiError as e:  # told in the status, as Kafka's detail says why
            log.warning("streams group %s: internal topic %s not created: %s", group_id, t.name, e)
            result.status = [(code, f"{detail} (creating {t.name} failed: {e})") for code, detail in result.status]


def _heartbeat_response(result: StreamsHeartbeatResult):
    R = StreamsGroupHeartbeatResponse
    tasks = result.tasks
    by_endpoint = None
    if result.partitions_by_endpoint is not None:
        E = R.EndpointToPartitions

        def tps(parts: dict[str, list[int]]) -> list:
            return [E.TopicPartition(topic=t, partitions=ps) for t, ps in parts.items()]
        by_endpoint = [E(user_endpoint=E.Endpoint(host=host, port=port), active_partitions=tps(active),
                         standby_partitions=tps(standby))
                       for (host, port), active, standby in result.partitions_by_endpoint]
    return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=result.member_id,
             member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
             acceptable_recovery_lag_legacy=ACCEPTABLE_RECOVERY_LAG, task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
             acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG,
             status=[R.Status(status_code=code, status_detail=detail) for code, detail in result.status],
             active_tasks=_task_ids(R.TaskIds, tasks.active) if tasks is not None else None,
             standby_tasks=_task_ids(R.TaskIds, tasks.standby) if tasks is not None else None,
             warmup_tasks=_task_ids(R.TaskIds, tasks.warmup) if tasks is not None else None,
             topology_description_required=False, endpoint_information_epoch=result.endpoint_information_epoch,
             partitions_by_user_endpoint=by_endpoint)


@api(StreamsGroupDescribeRequest, StreamsGroupDescribeResponse, 0, 1,
     access=per_item("group_ids", "groups", lambda c, g: c.allowed(O.DESCRIBE, GROUP, g), GROUP_DENIED))
async def streams_group_describe(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    D = StreamsGroupDescribeResponse.DescribedGroup
    out = []
    for group_id in req.group_ids:
        ops = (bit_set(authorized_operations(broker, ctx, ResourceType.GROUP, group_id))
               if req.include_authorized_operations else -2147483648)
        description_status = NOT_STORED if v >= 1 and req.include_topology_description else NOT_REQUESTED

        def failed(code: int, message: str):
            return D(error_code=code, error_message=message, group_id=group_id, group_state=DEAD, group_epoch=-1,
                     assignment_epoch=-1, topology=None, members=[], authorized_operations=ops,
                     topology_description=None, topology_description_status=description_status, assignor_name=None)
        try:
            broker.check_group_coordinator(group_id)
        except errors.NotCoordinator as e:
            out.append(failed(e.code, str(e)))
            continue
        group = broker.groups.groups.get(group_id)
        if not isinstance(group, StreamsGroup) or group.dead:
            message = (f"Group {group_id} not found." if group is None or getattr(group, "dead", False)
                       else f"Group {group_id} is not a streams group.")
            out.append(failed(errors.GroupIdNotFound.code, message))
            continue
        out.append(D(error_code=0, error_message=None, group_id=group_id, group_state=group.state,
                     group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                     topology=_described_topology(group), members=_described_members(group),
                     authorized_operations=ops, topology_description=None,
                     topology_description_status=description_status, assignor_name=ASSIGNOR))
    return StreamsGroupDescribeResponse(throttle_time_ms=0, groups=out)


def _described_topology(group: StreamsGroup):
    T = StreamsGroupDescribeResponse.DescribedGroup.Topology
    if group.topology is None:
        return None
    configured = group.configured
    if configured is None or not configured.ready:
        return T(epoch=group.topology.epoch, subtopologies=None)
    I = T.Subtopology.TopicInfo  # (kafka-python nests a common struct where the spec first uses it)

    def info(t: TopicInfo, partitions: int):
        return I(name=t.name, partitions=partitions, replication_factor=t.replication_factor,
                 topic_configs=[I.KeyValue(key=k, value=val) for k, val in t.configs])
    counts = configured.partition_counts
    return T(epoch=group.topology.epoch, subtopologies=[
        T.Subtopology(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                      repartition_sink_topics=list(s.repartition_sink_topics),
                      state_changelog_topics=[info(t, configured.tasks.get(s.subtopology_id, 0))
                                              for t in s.state_changelog_topics],
                      repartition_source_topics=[info(t, counts.get(t.name, 0)) for t in s.repartition_source_topics])
        for s in group.topology.subtopologies])


def _described_members(group: StreamsGroup) -> list:
    M = StreamsGroupDescribeResponse.DescribedGroup.Member  # (where kafka-python nests the common structs)
    A = M.Assignment

    def assignment(tasks: Tasks):
        return A(active_tasks=_task_ids(A.TaskIds, tasks.active), standby_tasks=_task_ids(A.TaskIds, tasks.standby),
                 warmup_tasks=_task_ids(A.TaskIds, tasks.warmup))

    def offsets(by_task: dict) -> list:
        return [M.TaskOffset(subtopology_id=sid, partition=p, offset=o) for (sid, p), o in sorted(by_task.items())]
    out = []
    for m in group.members.values():
        endpoint = M.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]) if m.user_endpoint else None
        out.append(M(member_id=m.member_id, member_epoch=m.epoch, instance_id=m.instance_id, rack_id=m.rack_id,
                     client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
                     process_id=m.process_id, user_endpoint=endpoint,
                     client_tags=[M.KeyValue(key=k, value=val) for k, val in sorted(m.client_tags.items())],
                     task_offsets=offsets(m.task_offsets), task_end_offsets=offsets(m.task_end_offsets),
                     assignment=assignment(m.assigned),
                     target_assignment=assignment(group.target.get(m.member_id, Tasks())),
                     is_classic=False))
    return out
