"""Topic and log administration: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeLogDirs, DescribeProducers."""
from __future__ import annotations

import asyncio
import uuid

from kafka.protocol.admin import (CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
                                  CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
                                  DeleteTopicsRequest, DeleteTopicsResponse, DescribeLogDirsRequest,
                                  DescribeLogDirsResponse, DescribeProducersRequest, DescribeProducersResponse)

from tidelake import errors
from tidelake.broker.cluster_role import CreatedTopic
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.handlers.common import per_partition
from tidelake.errors import error_code
from tidelake.broker.access import TOPIC, TOPIC_DENIED, Check, cluster_whole, per_item, topic
from tidelake.security.acl.model import Operation as O
from tidelake.broker.registry import api

NONE = errors.NONE
ZERO_UUID = uuid.UUID(int=0)

_CTRTopic = CreateTopicsResponse.CreatableTopicResult
_CTRConfig = _CTRTopic.CreatableTopicConfigs


@api(CreateTopicsRequest, CreateTopicsResponse, 2, 7, access=per_item(
    "topics", "topics", lambda c, t: c.cluster(O.CREATE) or c.allowed(O.CREATE, TOPIC, t.name), TOPIC_DENIED))
async def create_topics(broker: BrokerContext, ctx: RequestContext, request):
    version = ctx.api_version
    names = [t.name for t in request.topics]
    results = []
    for t in request.topics:
        def fail(code, msg):
            results.append(_CTRTopic(name=t.name, topic_id=ZERO_UUID, error_code=code, error_message=msg,
                                     num_partitions=-1, replication_factor=-1, configs=None))
        if names.count(t.name) > 1:
            fail(errors.InvalidRequest.code,
                 f"Create topics request from client contains multiple topics named {t.name}")
            continue
        if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
            fail(errors.InvalidRequest.code, "Both numPartitions or replicationFactor and replicasAssignments were set.")
            continue
        assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments} if t.assignments else None
        try:
            topic = await broker.topic_admin.create_topic(
                t.name, t.num_partitions, t.replication_factor, {c.name: c.value for c in t.configs}, assignment,
                validate_only=request.validate_only, timeout_ms=request.timeout_ms)
        except Exception as e:
            fail(error_code(e), str(e))
            continue
        results.append(_created(broker, t.name, topic, version))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _created(broker: BrokerContext, name: str, topic: CreatedTopic, version: int):
    """A created topic's CreateTopics result; v5+ describes its configs, as Kafka's answer does."""
    describe = broker.config.describe_topic(topic.configs) if version >= 5 else []
    return _CTRTopic(
        name=name, topic_id=topic.topic_id, error_code=NONE, error_message=None,
        num_partitions=topic.partitions, replication_factor=topic.replication_factor,
        configs=[_CTRConfig(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                            is_sensitive=False) for e in describe])


_DTRTopic = DeleteTopicsResponse.DeletableTopicResult


def _may_delete_topic(c: Check, t) -> bool:
    if isinstance(t, str):  # DeleteTopics v0-5: names
        return c.allowed(O.DELETE, TOPIC, t)
    name = t.name or c.topic_name(t.topic_id)
    # an id no topic has is the handler's UNKNOWN_TOPIC_ID: it names nothing a denial could hide
    return name is None or c.allowed(O.DELETE, TOPIC, name)


# by id: the id's topic; an unknown id is the handler's UNKNOWN_TOPIC_ID
@api(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6, access=per_item(
    lambda v: "topics" if v >= 6 else "topic_names", "responses", lambda c, t: t is None or _may_delete_topic(c, t),
    TOPIC_DENIED))
async def delete_topics(broker: BrokerContext, ctx: RequestContext, request):
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(n, None) for n in request.topic_names]
    results = []
    enabled = broker.config.get_bool("delete.topic.enable")
    for name, topic_id in wanted:
        if name is None and topic_id not in (None, ZERO_UUID):
            info = broker.topics.by_id(topic_id)
            if info is None:
                results.append(_DTRTopic(name=None, topic_id=topic_id, error_code=errors.UnknownTopicId.code,
                                         error_message="unknown topic id"))
                continue
            name = info.name
        info = broker.topics.get(name)
        tid = info.topic_id if info else ZERO_UUID
        if not enabled:
            results.append(_DTRTopic(name=name, topic_id=tid, error_code=errors.TopicDeletionDisabled.code,
                                     error_message="delete.topic.enable is false"))
            continue
        try:
            if info is not None and info.internal:
                raise errors.InvalidRequest(f"internal topic {name} cannot be deleted")
            await broker.topic_admin.delete_topic(name)
            results.append(_DTRTopic(name=name, topic_id=tid, error_code=NONE, error_message=None))
        except Exception as e:
            results.append(_DTRTopic(name=name, topic_id=tid, error_code=error_code(e), error_message=str(e)))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


_CPRTopic = CreatePartitionsResponse.CreatePartitionsTopicResult


@api(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3,
     access=per_item("topics", "results", topic(O.ALTER), TOPIC_DENIED))
async def create_partitions(broker: BrokerContext, ctx: RequestContext, request):
    results = []
    names = [t.name for t in request.topics]
    for t in request.topics:
        try:
            if names.count(t.name) > 1:
                raise errors.InvalidRequest(f"duplicate topic {t.name} in request")
            await broker.topic_admin.add_partitions(
                t.name, t.count, None if t.assignments is None else [list(a.broker_ids) for a in t.assignments],
                validate_only=request.validate_only, timeout_ms=request.timeout_ms)
            results.append(_CPRTopic(name=t.name, error_code=NONE, error_message=None))
        except Exception as e:
            results.append(_CPRTopic(name=t.name, error_code=error_code(e), error_message=str(e)))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


_DRRTopic = DeleteRecordsResponse.DeleteRecordsTopicResult
_DRRPartition = _DRRTopic.DeleteRecordsPartitionResult


@api(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2, access=per_item("topics", "topics", topic(O.DELETE), TOPIC_DENIED))
async def delete_records(broker: BrokerContext, ctx: RequestContext, request):
    # every partition's delete at once, each answered when its replicas' log starts have moved (or the timeout)
    service = broker.partition_service
    asked = [(t.name, p.partition_index, p.offset) for t in request.topics for p in t.partitions]
    outcomes = iter(await asyncio.gather(*(service.delete_records(name, partition, offset, request.timeout_ms)
                                           for name, partition, offset in asked)))
    topics = [_DRRTopic(name=t.name, partitions=[
        _DRRPartition(partition_index=p.partition_index, low_watermark=o.low_watermark, error_code=o.error)
        for p in t.partitions for o in (next(outcomes),)]) for t in request.topics]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


_DLDResult = DescribeLogDirsResponse.DescribeLogDirsResult
_DLDTopic = _DLDResult.DescribeLogDirsTopic
_DLDPartition = _DLDTopic.DescribeLogDirsPartition


@api(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 5, access=cluster_whole(O.DESCRIBE))
async def describe_log_dirs(broker: BrokerContext, ctx: RequestContext, request):
    # the replicas this broker hosts, leader or follower, as Kafka's (no leader check: a log dir is the broker's)
    wanted = None if request.topics is None else {t.topic: set(t.partitions) for t in request.topics}
    described = broker.partition_service.describe_log_dir(wanted)
    topics = [_DLDTopic(name=name, partitions=[
        _DLDPartition(partition_index=p, partition_size=size, offset_lag=0, is_future_key=False)
        for p, size in parts.items()]) for name, parts in described.sizes.items()]
    result = _DLDResult(error_code=NONE, log_dir=described.path, topics=topics, total_bytes=described.total_bytes,
                        usable_bytes=described.usable_bytes)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=NONE, results=[result])


_DPRTopic = DescribeProducersResponse.TopicResponse
_DPRPartition = _DPRTopic.PartitionResponse
_DPRState = _DPRPartition.ProducerState


@api(DescribeProducersRequest, DescribeProducersResponse, 0, 0,
     access=per_item("topics", "topics", topic(O.READ), TOPIC_DENIED))
async def describe_producers(broker: BrokerContext, ctx: RequestContext, request):
    service = broker.partition_service

    def answer_for(topic: str):
        def answer(p):
            return _DPRPartition(partition_index=p, error_code=NONE, error_message=None,
                                 active_producers=[_DPRState(**st) for st in service.producers(topic, p)])
        return answer

    def fail(p, code):
        return _DPRPartition(partition_index=p, error_code=code, error_message=None, active_producers=[])
    topics = [_DPRTopic(name=t.name, partitions=per_partition(t.partition_indexes, answer_for(t.name), fail))
              for t in request.topics]
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
