"""Cluster and topic metadata: ApiVersions, Metadata (with topic auto-creation),
DescribeTopicPartitions (KIP-966) and DescribeCluster. A single node leads every partition; in a
cluster, every broker answers alike from the controller's UpdateMetadata (``ClusterMember``)."""
from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import (DescribeClusterRequest, DescribeClusterResponse, DescribeTopicPartitionsRequest,
                                  DescribeTopicPartitionsResponse)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.handlers.common import authorized_operations, bit_set
from tidelake.broker.access import TOPIC, HandlerCheck, in_handler, open_to_all
from tidelake.broker.registry import api, api_versions_response
from tidelake.broker.topics import validate_topic_name
from tidelake.cluster.member import LiveBroker
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.txn_log import TRANSACTION_STATE_TOPIC
from tidelake.security.acl.model import CLUSTER_NAME, Operation, ResourceType

ZERO_UUID = uuid.UUID(int=0)
BROKER_ENDPOINT = 1  # DescribeCluster endpoint type
_INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)  # created by their coordinators only
DESCRIBE_TOPIC = HandlerCheck(Operation.DESCRIBE, TOPIC)  # a topic named, or listed
CREATE_TOPIC = HandlerCheck(Operation.CREATE, TOPIC, cluster_suffices=True)  # auto-creation


@api(ApiVersionsRequest, ApiVersionsResponse, 0, 4, access=open_to_all("asked before authenticating"))
async def api_versions(broker: BrokerContext, ctx: RequestContext, request):
    return api_versions_response(ctx.api_version)


_MR = MetadataResponse
_MRTopic = MetadataResponse.MetadataResponseTopic
_MRPartition = _MRTopic.MetadataResponsePartition


NOT_REQUESTED = -2147483648  # KIP-430: authorized operations not asked for (int32 fields; None in bitfields)


def partition_states(broker: BrokerContext, info, start: int = 0, end: int | None = None) -> list[tuple]:
    """(partition, error, leader, leader epoch, replicas, isr, offline) of a topic's partitions: this
    broker for all on a single node; in a cluster what the controller said (LEADER_NOT_AVAILABLE
    while a partition has no leader)."""
    end = info.partitions if end is None else end
    if broker.cluster is None:
        nid = broker.node_id
        return [(p, errors.NONE, nid, 0, [nid], [nid], []) for p in range(start, end)]
    out = []
    for p in range(start, end):
        pm = broker.cluster.partition(info.name, p)
        if pm is None:
            out.append((p, errors.LeaderNotAvailable.code, -1, -1, [], [], []))
        else:
            code = errors.NONE if pm.leader >= 0 else errors.LeaderNotAvailable.code
            out.append((p, code, pm.leader, pm.leader_epoch, pm.replicas, pm.isr, pm.offline))
    return out


def _topic_metadata(broker: BrokerContext, info, ops: set[int] | None = None) -> Any:
    parts = [_MRPartition(error_code=code, partition_index=p, leader_id=leader, leader_epoch=epoch,
                          replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline)
             for p, code, leader, epoch, replicas, isr, offline in partition_states(broker, info)]
    return _MRTopic(error_code=errors.NONE, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                    partitions=parts, authorized_operations=ops)


def _missing_topic(code: int, name: str | None, topic_id=ZERO_UUID) -> Any:
    return _MRTopic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


@api(MetadataRequest, MetadataResponse, 0, 13, access=in_handler(DESCRIBE_TOPIC, CREATE_TOPIC))
async def metadata(broker: BrokerContext, ctx: RequestContext, request):
    await _cluster_view_known(broker)
    version = ctx.api_version
    topics_mgr = broker.topics
    grants = ctx.grants
    want_ops = version >= 8 and request.include_topic_authorized_operations

    def describe(info):
        ops = authorized_operations(broker, ctx, ResourceType.TOPIC, info.name) if want_ops else None
        return _topic_metadata(broker, info, ops)

    if request.topics is None or (version == 0 and not request.topics):
        # a listing shows only the topics the principal may describe (Kafka's rule)
        topics = [describe(info) for info in list(broker.metadata.topics.values())
                  if grants.permits(DESCRIBE_TOPIC, info.name)]
    else:
        allow_auto = request.allow_auto_topic_creation if version >= 4 else True
        auto = allow_auto and broker.config.get_bool("auto.create.topics.enable", True)
        topics = []
        created = False
        for t in request.topics:
            name = t.name
            if name is None and version >= 10 and t.topic_id not in (None, ZERO_UUID):
                info = topics_mgr.by_id(t.topic_id)
                if info is None:
                    topics.append(_missing_topic(errors.UnknownTopicId.code, None, t.topic_id))
                    continue
                name = info.name
            if not grants.permits(DESCRIBE_TOPIC, name or ""):
                # the same answer whether or not it exists: a denied name reveals nothing
                topics.append(_missing_topic(errors.TopicAuthorizationFailed.code, name, t.topic_id or ZERO_UUID))
                continue
            info = topics_mgr.get(name)
            if info is None and auto and name not in _INTERNAL_TOPICS and not grants.permits(CREATE_TOPIC, name):
                topics.append(_missing_topic(errors.TopicAuthorizationFailed.code, name))
                continue
            if info is None and auto and name not in _INTERNAL_TOPICS and broker.cluster is not None:
                # Kafka's answer: the topic is being created, its leaders are not known yet
                try:
                    validate_topic_name(name)
                    await broker.cluster.create_topic(name, -1, -1, {}, wait_s=0)
                    code = errors.LeaderNotAvailable.code
                except errors.TopicAlreadyExists:
                    code = errors.LeaderNotAvailable.code
                except errors.KafkaApiError as e:
                    code = e.code
                topics.append(_missing_topic(code, name))
                continue
            if info is None and auto and name not in _INTERNAL_TOPICS:
                try:
                    info = topics_mgr.create(name, None, persist=False)
                    created = True
                except errors.KafkaApiError as e:
                    info = topics_mgr.get(name)
                    if info is None:
                        topics.append(_missing_topic(e.code, name))
                        continue
            if info is None:
                code = errors.UnknownTopicOrPartition.code
                try:
                    validate_topic_name(name)
                except errors.InvalidTopic as e:
                    code = e.code
                topics.append(_missing_topic(code, name))
            else:
                topics.append(describe(info))
        if created:
            await broker.metadata.save_async()  # durable before the client hears of it, loop not blocked
    brokers = [_MR.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
               for b in live_brokers(broker, ctx)]
    cluster_ops = None
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(broker, ctx, ResourceType.CLUSTER, CLUSTER_NAME)
    return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=broker.cluster_id,
                            controller_id=controller_id(broker), topics=topics, error_code=errors.NONE,
                            authorized_operations=cluster_ops)


def live_brokers(broker: BrokerContext, ctx: RequestContext) -> list[LiveBroker]:
    """The brokers clients may dial on the listener they used: this one alone, or the cluster's live ones."""
    live = broker.cluster.live_brokers(ctx.session.listener) if broker.cluster is not None else []
    if not live:  # a single broker, or one the controller has not reached yet: clients still need this one
        endpoint = broker.endpoint_for(ctx)
        live = [LiveBroker(broker.node_id, endpoint.host, endpoint.port, None)]
    return live


async def _cluster_view_known(broker: BrokerContext) -> None:
    """A cluster broker that has not heard from the controller yet would answer "no controller, no other
    brokers", and librdkafka's admin client then waits out its whole timeout instead of asking again."""
    if broker.cluster is not None:
        await broker.cluster.wait_for_first_metadata()


def controller_id(broker: BrokerContext) -> int:
    return broker.node_id if broker.cluster is None else broker.cluster.controller_id


_DTP = DescribeTopicPartitionsResponse
_DTPTopic = _DTP.DescribeTopicPartitionsResponseTopic
_DTPPartition = _DTPTopic.DescribeTopicPartitionsResponsePartition


@api(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0, access=in_handler(DESCRIBE_TOPIC))
async def describe_topic_partitions(broker: BrokerContext, ctx: RequestContext, request):
    """Paged topic description (KIP-966): topics by name order, at most response_partition_limit
    partitions, a cursor to continue from."""
    grants = ctx.grants
    names = sorted({t.name for t in request.topics}) if request.topics else sorted(
        n for n in broker.metadata.topics
        if grants.permits(DESCRIBE_TOPIC, n))
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    limit = max(1, request.response_partition_limit)
    topics, next_cursor, budget = [], None, limit
    for name in names:
        if not grants.permits(DESCRIBE_TOPIC, name):
            topics.append(_DTPTopic(error_code=errors.TopicAuthorizationFailed.code, name=name, topic_id=ZERO_UUID,
                                    is_internal=False, partitions=[]))
            continue
        info = broker.topics.get(name)
        if info is None:
            topics.append(_DTPTopic(error_code=errors.UnknownTopicOrPartition.code, name=name, topic_id=ZERO_UUID,
                                    is_internal=False, partitions=[]))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if budget <= 0:
            next_cursor = _DTP.Cursor(topic_name=name, partition_index=start)
            break
        end = min(info.partitions, start + budget)
        parts = [_DTPPartition(error_code=code, partition_index=p, leader_id=leader, leader_epoch=epoch,
                               replica_nodes=replicas, isr_nodes=isr,
                               eligible_leader_replicas=[], last_known_elr=[],  # Java needs lists, not null
                               offline_replicas=offline)
                 for p, code, leader, epoch, replicas, isr, offline in partition_states(broker, info, start, end)]
        budget -= len(parts)
        ops = bit_set(authorized_operations(broker, ctx, ResourceType.TOPIC, name))  # always, as Kafka
        topics.append(_DTPTopic(error_code=errors.NONE, name=name, topic_id=info.topic_id, is_internal=info.internal,
                                partitions=parts, topic_authorized_operations=ops))
        if end < info.partitions:
            next_cursor = _DTP.Cursor(topic_name=name, partition_index=end)
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


@api(DescribeClusterRequest, DescribeClusterResponse, 0, 2,
     access=open_to_all("as Kafka's: only the authorized operations it reports depend on the principal"))
async def describe_cluster(broker: BrokerContext, ctx: RequestContext, request):
    await _cluster_view_known(broker)
    if ctx.api_version >= 1 and request.endpoint_type != BROKER_ENDPOINT:
        return DescribeClusterResponse(throttle_time_ms=0, error_code=errors.UnsupportedEndpointType.code,
                                       error_message="only broker endpoints", endpoint_type=request.endpoint_type,
                                       cluster_id=broker.cluster_id, controller_id=-1, brokers=[])
    brokers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=b.broker_id, host=b.host, port=b.port,
                                                             rack=b.rack, is_fenced=False)
               for b in live_brokers(broker, ctx)]
    ops = (authorized_operations(broker, ctx, ResourceType.CLUSTER, CLUSTER_NAME)
           if request.include_cluster_authorized_operations else None)
    return DescribeClusterResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None,
                                   endpoint_type=BROKER_ENDPOINT, cluster_id=broker.cluster_id,
                                   controller_id=controller_id(broker), brokers=brokers, authorized_operations=ops)
