"""Topic and log administration: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeLogDirs, DescribeProducers."""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from kafka.protocol.admin import (CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
                                  CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
                                  DeleteTopicsRequest, DeleteTopicsResponse, DescribeLogDirsRequest,
                                  DescribeLogDirsResponse, DescribeProducersRequest, DescribeProducersResponse)

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.config_definitions import validate_topic_configs
from tidelake.broker.handlers.common import per_partition
from tidelake.errors import error_code
from tidelake.broker.topics import validate_topic_name
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
    created = False
    for t in request.topics:
        def fail(code, msg):
            results.append(_CTRTopic(name=t.name, topic_id=ZERO_UUID, error_code=code, error_message=msg,
                                     num_partitions=-1, replication_factor=-1, configs=None))
        if names.count(t.name) > 1:
            fail(errors.InvalidRequest.code,
                 f"Create topics request from client contains multiple topics named {t.name}")
            continue
        num_partitions, replication = t.num_partitions, t.replication_factor
        if broker.cluster is not None:
            await _create_in_cluster(broker, t, request.validate_only, request.timeout_ms, version, results, fail)
            continue
        if t.assignments:
            if num_partitions != -1 or replication != -1:
                fail(errors.InvalidRequest.code,
                     "Both numPartitions or replicationFactor and replicasAssignments were set.")
                continue
            if any(list(a.broker_ids) != [broker.node_id] for a in t.assignments) or \
                    sorted(a.partition_index for a in t.assignments) != list(range(len(t.assignments))):
                fail(errors.InvalidReplicaAssignment.code,
                     f"Invalid replica assignment; the only broker is {broker.node_id}")
                continue
            num_partitions, replication = len(t.assignments), 1
        configs = {c.name: c.value for c in t.configs}
        try:
            info = broker.topics.create(t.name, num_partitions, configs, replication_factor=replication,
                                        validate_only=request.validate_only, persist=False)
            created = created or not request.validate_only
        except Exception as e:
            fail(error_code(e), str(e))
            continue
        results.append(_created(broker, t.name, info.topic_id, info.partitions, 1, info.configs, version))
    if created:
        await broker.metadata.save_async()  # durable before acknowledged, without blocking the loop
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def _create_in_cluster(broker: BrokerContext, t, validate_only: bool, timeout_ms: int, version: int,
                             results: list, fail) -> None:
    """CreateTopics in a cluster: the topic goes to ZooKeeper, the controller creates its partitions."""
    assignment = None
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            fail(errors.InvalidRequest.code,
                 "Both numPartitions or replicationFactor and replicasAssignments were set.")
            return
        assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
        if sorted(assignment) != list(range(len(assignment))) or len({len(r) for r in assignment.values()}) != 1:
            fail(errors.InvalidReplicaAssignment.code, "partitions must be 0..n-1, each with as many replicas")
            return
    try:
        validate_topic_name(t.name)
        overrides = validate_topic_configs({c.name: c.value for c in t.configs})
        topic = await broker.cluster.create_topic(t.name, t.num_partitions, t.replication_factor, overrides,
                                                  assignment=assignment, validate_only=validate_only,
                                                  wait_s=max(0.0, timeout_ms / 1000))
    except Exception as e:
        fail(error_code(e), str(e))
        return
    results.append(_created(broker, t.name, topic.topic_id, topic.partitions, topic.replication_factor,
                            topic.configs, version))


def _created(broker: BrokerContext, name: str, topic_id, partitions: int, replication_factor: int,
             configs: dict, version: int):
    """A created topic's CreateTopics result; v5+ describes its configs, as Kafka's answer does."""
    describe = broker.config.describe_topic(configs) if version >= 5 else []
    return _CTRTopic(
        name=name, topic_id=topic_id, error_code=NONE, error_message=None,
        num_partitions=partitions, replication_factor=replication_factor,
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
    enabled = broker.config.get_bool("delete.topic.enable", True)
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
            if broker.cluster is not None:
                await broker.cluster.delete_topic(name)
            else:
                broker.topics.delete(name)
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
            if broker.cluster is not None:
                await broker.cluster.add_partitions(
                    t.name, t.count, None if t.assignments is None else [list(a.broker_ids) for a in t.assignments],
                    validate_only=request.validate_only, wait_s=max(0.0, request.timeout_ms / 1000))
                results.append(_CPRTopic(name=t.name, error_code=NONE, error_message=None))
                continue
            if t.assignments is not None and any(list(a.broker_ids) != [broker.node_id] for a in t.assignments):
                raise errors.InvalidReplicaAssignment(
                    f"Invalid replica assignment; the only broker is {broker.node_id}")
            broker.topics.add_partitions(t.name, t.count, validate_only=request.validate_only)
            results.append(_CPRTopic(name=t.name, error_code=NONE, error_message=None))
        except Exception as e:
            results.append(_CPRTopic(name=t.name, error_code=error_code(e), error_message=str(e)))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


_DRRTopic = DeleteRecordsResponse.DeleteRecordsTopicResult
_DRRPartition = _DRRTopic.DeleteRecordsPartitionResult


@api(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2, access=per_item("topics", "topics", topic(O.DELETE), TOPIC_DENIED))
async def delete_records(broker: BrokerContext, ctx: RequestContext, request):
    def answer_for(topic):
        def answer(plog, p):
            offset = plog.high_watermark if p.offset == -1 else p.offset
            if offset < 0 or offset > plog.high_watermark:
                raise errors.OffsetOutOfRange(f"offset {p.offset} beyond high watermark {plog.high_watermark}")
            low = plog.delete_records_before(offset)
            broker.partitions.notify(topic, p.partition_index)
            return _DRRPartition(partition_index=p.partition_index, low_watermark=low, error_code=NONE)
        return answer

    def fail(p, code):
        return _DRRPartition(partition_index=p.partition_index, low_watermark=-1, error_code=code)
    topics = [_DRRTopic(name=t.name, partitions=per_partition(broker, t.name, t.partitions, answer_for(t.name), fail))
              for t in request.topics]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


_DLDResult = DescribeLogDirsResponse.DescribeLogDirsResult
_DLDTopic = _DLDResult.DescribeLogDirsTopic
_DLDPartition = _DLDTopic.DescribeLogDirsPartition


def _partition_size(data_dir: Path, topic: str, partition: int) -> int:
    try:
        return sum(f.stat().st_size for f in (data_dir / f"{topic}-{partition}").glob("*.log"))
    except OSError:
        return 0


@api(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 5, access=cluster_whole(O.DESCRIBE))
async def describe_log_dirs(broker: BrokerContext, ctx: RequestContext, request):
    wanted: dict[str, list[int]] = {}
    if request.topics is None:
        for name, info in broker.metadata.topics.items():
            wanted[name] = list(range(info.partitions))
    else:
        for t in request.topics:
            info = broker.topics.get(t.topic)
            if info is not None:
                wanted[t.topic] = [p for p in t.partitions if p < info.partitions]
    topics = [_DLDTopic(name=name, partitions=[
        _DLDPartition(partition_index=p, partition_size=_partition_size(broker.data_dir, name, p), offset_lag=0,
                      is_future_key=False) for p in parts]) for name, parts in wanted.items()]
    usage = shutil.disk_usage(broker.data_dir)
    result = _DLDResult(error_code=NONE, log_dir=str(broker.data_dir.resolve()), topics=topics,
                        total_bytes=usage.total, usable_bytes=usage.free)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=NONE, results=[result])


_DPRTopic = DescribeProducersResponse.TopicResponse
_DPRPartition = _DPRTopic.PartitionResponse
_DPRState = _DPRPartition.ProducerState


@api(DescribeProducersRequest, DescribeProducersResponse, 0, 0,
     access=per_item("topics", "topics", topic(O.READ), TOPIC_DENIED))
async def describe_producers(broker: BrokerContext, ctx: RequestContext, request):
    def answer(plog, p):
        return _DPRPartition(partition_index=p, error_code=NONE, error_message=None,
                             active_producers=[_DPRState(**st) for st in plog.producer_state.describe()])

    def fail(p, code):
        return _DPRPartition(partition_index=p, error_code=code, error_message=None, active_producers=[])
    topics = [_DPRTopic(name=t.name, partitions=per_partition(broker, t.name, t.partition_indexes, answer, fail,
                                                              index=lambda p: p))
              for t in request.topics]
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
