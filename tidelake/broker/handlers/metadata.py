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
from tidelake.broker.features import Features
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
    # the features' epoch is the metadata file's offset, as Kafka's is its metadata log's: UpdateFeatures moves it
    return api_versions_response(ctx.api_version, features=Features.of(broker.config),
                                 features_epoch=broker.metadata.metadata_offset)


_MR = MetadataResponse
_MRTopic = MetadataResponse.MetadataResponseTopic
_MRPartition = _MRTopic.MetadataResponsePartition


NOT_REQUESTED = -2147483648  # KIP-430: authorized operations not asked for (int32 fields; None in bitfields)


def _topic_metadata(broker: BrokerContext, info, ops: set[int] | None = None) -> Any:
    parts = [_MRPartition(error_code=s.error_code, partition_index=s.partition, leader_id=s.leader,
                          leader_epoch=s.leader_epoch, replica_nodes=s.replicas, isr_nodes=s.isr,
                          offline_replicas=s.offline)
             for s in broker.cluster_view.partition_states(info.name, 0, info.partitions)]
    return _MRTopic(error_code=errors.NONE, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                    partitions=parts, authorized_operations=ops)


def _missing_topic(code: int, name: str | None, topic_id=ZERO_UUID) -> Any:
    return _MRTopic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


@api(MetadataRequest, MetadataResponse, 0, 13, access=in_handler(DESCRIBE_TOPIC, CREATE_TOPIC))
async def metadata(broker: BrokerContext, ctx: RequestContext, request):
    await broker.cluster_view.wait_for_first_metadata()
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
        auto = allow_auto and broker.config.get_bool("auto.create.topics.enable")
        topics = []
        for t in request.topics:
            name = t.name
            # a topic named by id is looked up by it, whatever its name field holds: Java's Admin leaves it "" (the
            # field's default, not null) in describeTopics(TopicCollection.ofTopicIds), as Kafka's KafkaApis reads it
            if version >= 10 and t.topic_id not in (None, ZERO_UUID):
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
            if info is None and auto and name not in _INTERNAL_TOPICS:
                info, code = await broker.topic_admin.auto_create_topic(name)
                if info is None:
                    topics.append(_missing_topic(code, name))
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
    live = broker.cluster_view.live_brokers(ctx.session.listener)
    if not live:  # a single broker, or one the controller has not reached yet: clients still need this one
        endpoint = broker.endpoint_for(ctx)
        live = [LiveBroker(broker.node_id, endpoint.host, endpoint.port, None)]
    return live


def controller_id(broker: BrokerContext) -> int:
    return broker.cluster_view.controller_id()


_DTP = DescribeTopicPartitionsResponse
_DTPTopic = _DTP.DescribeTopicPartitionsResponseTopic
_DTPPartition = _DTPTopic.DescribeTopicPartitionsResponsePartition


def _dtp_error(name: str, code: int) -> Any:
    return _DTPTopic(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False, partitions=[])


@api(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0, access=in_handler(DESCRIBE_TOPIC))
async def describe_topic_partitions(broker: BrokerContext, ctx: RequestContext, request):
    """Paged topic description (KIP-966) as Kafka's handler answers it: topics from the cursor on in name order,
    at most min(response_partition_limit, max.request.partition.size.limit) partitions, a cursor to continue
    from; topics denied Describe are named at the end (listed only when asked for by name)."""
    fetch_all = not request.topics
    cursor = request.cursor
    cursor_name = "" if cursor is None else cursor.topic_name
    names = sorted(n for n in ({t.name for t in request.topics} if not fetch_all else broker.metadata.topics)
                   if n >= cursor_name)
    if cursor is not None and not fetch_all and cursor_name not in names:
        raise errors.InvalidRequest(f"the topic list must contain the cursor topic {cursor_name!r}")
    if cursor is not None and cursor.partition_index < 0:
        raise errors.InvalidRequest(f"cursor partition {cursor.partition_index} of {cursor_name!r} is negative")
    denied = [n for n in names if not ctx.grants.permits(DESCRIBE_TOPIC, n)]
    budget = max(1, min(broker.config.get_int("max.request.partition.size.limit"), request.response_partition_limit))
    topics, next_cursor = [], None
    for name in (n for n in names if n not in denied):
        if budget <= 0:  # the page is full: the next one starts at this topic, whether or not it exists
            next_cursor = _DTP.Cursor(topic_name=name, partition_index=0)
            break
        info = broker.topics.get(name)
        if info is None:
            if not fetch_all:
                topics.append(_dtp_error(name, errors.UnknownTopicOrPartition.code if _valid_topic_name(name)
                                         else errors.InvalidTopic.code))
            continue
        start = cursor.partition_index if name == cursor_name else 0
        end = min(info.partitions, start + budget)
        parts = [_DTPPartition(error_code=s.error_code, partition_index=s.partition, leader_id=s.leader,
                               leader_epoch=s.leader_epoch, replica_nodes=s.replicas, isr_nodes=s.isr,
                               eligible_leader_replicas=[], last_known_elr=[],  # Java needs lists, not null
                               offline_replicas=s.offline)
                 for s in broker.cluster_view.partition_states(name, start, end)]
        budget -= len(parts)
        ops = bit_set(authorized_operations(broker, ctx, ResourceType.TOPIC, name))  # always, as Kafka
        topics.append(_DTPTopic(error_code=errors.NONE, name=name, topic_id=info.topic_id, is_internal=info.internal,
                                partitions=parts, topic_authorized_operations=ops))
        if end < info.partitions:
            next_cursor = _DTP.Cursor(topic_name=name, partition_index=end)
            break
    if not fetch_all:  # Kafka names no topic the client may not see unless it asked for it
        topics += [_dtp_error(n, errors.TopicAuthorizationFailed.code) for n in denied]
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def _valid_topic_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except errors.InvalidTopic:
        return False
    return True


@api(DescribeClusterRequest, DescribeClusterResponse, 0, 2,
     access=open_to_all("as Kafka's: only the authorized operations it reports depend on the principal"))
async def describe_cluster(broker: BrokerContext, ctx: RequestContext, request):
    await broker.cluster_view.wait_for_first_metadata()
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
