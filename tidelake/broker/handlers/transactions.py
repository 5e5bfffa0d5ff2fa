"""Transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
DescribeTransactions, ListTransactions, and the inter-broker WriteTxnMarkers. FindCoordinator (key
type 1) is served with the group APIs.

This module translates between wire messages and ``tidelake.coordinator.transactions
.TransactionCoordinator`` (a state machine; the broker gives it its outputs, see
``tidelake.broker.coordinators``). In a cluster a transactional id's requests are served only by the
leader of its ``__transaction_state`` partition (NOT_COORDINATOR elsewhere), each answered once the
state record is on the in-sync replicas; TxnOffsetCommit is served by the group's coordinator (which
asks the transaction's coordinator whether the group is in the transaction when that is another broker),
and WriteTxnMarkers by the leaders of the transaction's partitions (the coordinator sends it).
"""
from __future__ import annotations

import logging
import re

from kafka.protocol.admin import (
    DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
)

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.partition_service import PendingAcks
from tidelake.errors import error_code
from tidelake.broker.access import (CLUSTER, GROUP, TOPIC, TOPIC_DENIED, TXN, TXN_DENIED, Access, EitherNeed,
                                    ListingRule, Need, cluster_whole, per_item, topic, whole)
from tidelake.security.acl.model import CLUSTER_NAME, Operation as O
from tidelake.broker.registry import api
from tidelake.coordinator.consumer_group import ConsumerGroup
from tidelake.coordinator.streams_group import StreamsGroup
from tidelake.coordinator.offsets import OFFSETS_TOPIC, OffsetAndMetadata, offset_records
from tidelake.coordinator.txn_metadata import TRANSACTION_VERSION_0, TRANSACTION_VERSION_2
from tidelake.broker.features import Features

log = logging.getLogger(__name__)

PRODUCER_FENCED = errors.ProducerFenced.code
INVALID_PRODUCER_EPOCH = errors.InvalidProducerEpoch.code
# the first versions of transaction protocol v2 (KIP-890 part 2)
FIRST_ADD_PARTITIONS_VERSION_V2 = 5  # inter-broker: the leader adds the partition of a v2 producer's Produce
FIRST_TXN_OFFSET_COMMIT_VERSION_V2 = 5  # the group's partition joins the transaction implicitly
FIRST_END_TXN_VERSION_V2 = 5  # the epoch bumps, the response carries the producer id and epoch


def _write_txn_read_group(request, _version) -> list[Need]:
    return [Need(O.WRITE, TXN, request.transactional_id), Need(O.READ, GROUP, request.group_id)]


def _client_code(code: int, version: int, first_version_knowing_fenced: int = 2) -> int:
    """Clients older than the version that introduced PRODUCER_FENCED get INVALID_PRODUCER_EPOCH (Kafka does the same)."""
    if code == PRODUCER_FENCED and version < first_version_knowing_fenced:
        return INVALID_PRODUCER_EPOCH
    return code


# ---------------------------------------------------------------------------------------------
# InitProducerId
# ---------------------------------------------------------------------------------------------
# KIP-679: an idempotent producer (no transactional id) needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
@api(InitProducerIdRequest, InitProducerIdResponse, 0, 5, access=whole(
    lambda r, v: [Need(O.WRITE, TXN, r.transactional_id)] if r.transactional_id is not None
    else [EitherNeed(O.IDEMPOTENT_WRITE, O.WRITE, TOPIC)]))
async def init_producer_id(broker: BrokerContext, ctx: RequestContext, request):
    if request.transactional_id is None:
        # Idempotent producer: a fresh producer id with epoch 0, as Kafka does (also for KIP-360 bumps).
        return InitProducerIdResponse(throttle_time_ms=0, error_code=errors.NONE,
                                      producer_id=broker.allocate_producer_id(), producer_epoch=0)
    try:
        broker.check_transaction_coordinator(request.transactional_id)
        pid, epoch = broker.transactions.init_producer_id(request.transactional_id, request.transaction_timeout_ms,
                                                          request.producer_id, request.producer_epoch)
        await broker.transaction_state_replicated(request.transactional_id)
    except Exception as e:
        code = error_code(e)
        if code == errors.UnknownServerError.code:
            log.exception("InitProducerId for %s failed", request.transactional_id)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=errors.NONE, producer_id=pid, producer_epoch=epoch)


# ---------------------------------------------------------------------------------------------
# AddPartitionsToTxn (v0-3 client form, v4+ batched / verify-only form)
# ---------------------------------------------------------------------------------------------
async def _add_partitions_results(broker: BrokerContext, txn_id: str, producer_id: int, producer_epoch: int,
                                  topics, verify_only: bool, version: int) -> list:
    R = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    P = R.AddPartitionsToTxnPartitionResult
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    codes: dict[tuple[str, int], int]
    # the partitions of a transaction are anywhere in the cluster
    unknown = {tp for tp in wanted if not broker.cluster_view.knows_partition(*tp)}
    if unknown:  # Kafka: the unknown ones fail, the rest are not attempted
        codes = {tp: errors.UnknownTopicOrPartition.code if tp in unknown else errors.OperationNotAttempted.code
                 for tp in wanted}
    else:
        coordinator = broker.transactions
        try:
            broker.check_transaction_coordinator(txn_id)
            if verify_only:
                codes = coordinator.verify_partitions(txn_id, producer_id, producer_epoch, wanted)
            else:  # v5 without verify_only: a partition leader adds for a v2 producer (KIP-890 part 2)
                coordinator.add_partitions(txn_id, producer_id, producer_epoch, wanted,
                                           TRANSACTION_VERSION_2 if version >= FIRST_ADD_PARTITIONS_VERSION_V2
                                           else TRANSACTION_VERSION_0)
                await broker.transaction_state_replicated(txn_id)
                codes = {tp: errors.NONE for tp in wanted}
        except errors.KafkaApiError as e:
            codes = {tp: _client_code(e.code, version) for tp in wanted}
    by_topic: dict[str, list] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(P(partition_index=p, partition_error_code=code))
    return [R(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


# v4+ is the brokers' batched verification (CLUSTER_ACTION, no per-topic list at the top); clients use v0-3
@api(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5, access=per_item(
    "v3_and_below_topics", "results_by_topic_v3_and_below", topic(O.WRITE), TOPIC_DENIED, max_version=3,
    whole=lambda r, v: ([Need(O.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)] if v >= 4
                        else [Need(O.WRITE, TXN, r.v3_and_below_transactional_id)])))
async def add_partitions_to_txn(broker: BrokerContext, ctx: RequestContext, req):
    v = ctx.api_version
    if v <= 3:
        results = await _add_partitions_results(broker, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                          req.v3_and_below_producer_epoch, req.v3_and_below_topics, False, v)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)
    out = [AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
        transactional_id=t.transactional_id,
        topic_results=await _add_partitions_results(broker, t.transactional_id, t.producer_id, t.producer_epoch,
                                              t.topics, t.verify_only, v))
        for t in req.transactions]
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=errors.NONE, results_by_transaction=out)


# ---------------------------------------------------------------------------------------------
# AddOffsetsToTxn / TxnOffsetCommit
# ---------------------------------------------------------------------------------------------
@api(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4, access=whole(_write_txn_read_group))
async def add_offsets_to_txn(broker: BrokerContext, ctx: RequestContext, req):
    try:
        broker.check_transaction_coordinator(req.transactional_id)
        broker.transactions.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
        await broker.transaction_state_replicated(req.transactional_id)
        code = errors.NONE
    except errors.KafkaApiError as e:
        code = _client_code(e.code, ctx.api_version)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)


def _check_group_member(broker: BrokerContext, req, version: int) -> None:
    """KIP-447: a TxnOffsetCommit carrying the consumer's group metadata (v3+) is fenced like an
    OffsetCommit of that member; without it (generation -1, no member id) it is accepted."""
    if version < 3 or (req.generation_id < 0 and not req.member_id):
        return
    group = broker.groups.groups.get(req.group_id)
    if group is None:
        return
    if isinstance(group, (ConsumerGroup, StreamsGroup)):  # KIP-848 / KIP-1071 group: the generation is the member epoch
        code = group.validate_offset_commit(req.member_id, req.generation_id)
    else:
        code = group.validate_offset_commit(req.member_id, req.group_instance_id, req.generation_id)
    if code:
        raise errors.KafkaApiError(f"TxnOffsetCommit from {req.member_id!r} gen {req.generation_id}", code=code)


@api(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5,
     access=per_item("topics", "topics", topic(O.READ), TOPIC_DENIED, whole=_write_txn_read_group))
async def txn_offset_commit(broker: BrokerContext, ctx: RequestContext, req):
    T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    v = ctx.api_version
    now = broker.clock_ms()
    transactions = broker.transactions
    try:
        # the group's partition must be in this producer's open transaction (AddOffsetsToTxn first), or, for a
        # v2 producer, joins it now (KIP-890 part 2)
        add = v >= FIRST_TXN_OFFSET_COMMIT_VERSION_V2 and Features.of(broker.config).transactions_v2
        if await broker.coordination.check_txn_offset_commit(req.transactional_id, req.producer_id,
                                                             req.producer_epoch, req.group_id, add):
            await broker.transaction_state_replicated(req.transactional_id)
        _check_group_member(broker, req, v)
        commits = [(t.name, p.partition_index,
                    OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch if v >= 2 else -1,
                                      p.committed_metadata or "", now))
                   for t in req.topics for p in t.partitions]
        transactions.write_txn_offsets(req.producer_id, req.producer_epoch, req.group_id,
                                       list(offset_records(req.group_id, commits)))
        await _offsets_replicated(broker, req.group_id)
        code = errors.NONE
    except errors.KafkaApiError as e:
        code = _client_code(e.code, v)
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])


async def _offsets_replicated(broker: BrokerContext, group_id: str) -> None:
    partition = broker.groups.partition_for(group_id)
    code = await broker.partition_service.log_end_replicated(
        OFFSETS_TOPIC, partition, broker.config.get_int("offsets.commit.timeout.ms"))
    if code == errors.NotLeaderOrFollower.code:
        raise errors.NotCoordinator(f"no longer the coordinator of group {group_id}")
    if code:
        raise errors.CoordinatorNotAvailable(f"offsets of group {group_id} not replicated (error {code})")


# ---------------------------------------------------------------------------------------------
# EndTxn
# ---------------------------------------------------------------------------------------------
# v5 is transaction protocol v2 (KIP-890 part 2): the epoch bumps with every commit and abort, and the
# response carries the producer id and epoch the producer goes on with
@api(EndTxnRequest, EndTxnResponse, 0, 5, access=whole(lambda r, v: [Need(O.WRITE, TXN, r.transactional_id)]))
async def end_txn(broker: BrokerContext, ctx: RequestContext, req):
    v2 = ctx.api_version >= FIRST_END_TXN_VERSION_V2
    try:
        broker.check_transaction_coordinator(req.transactional_id)
        after = broker.transactions.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
                                            bump_epoch=v2)
        await broker.transaction_state_replicated(req.transactional_id)
    except errors.KafkaApiError as e:
        return EndTxnResponse(throttle_time_ms=0, error_code=_client_code(e.code, ctx.api_version),
                              producer_id=-1, producer_epoch=-1)
    return EndTxnResponse(throttle_time_ms=0, error_code=errors.NONE, producer_id=after.producer_id,
                          producer_epoch=after.producer_epoch)


# ---------------------------------------------------------------------------------------------
# DescribeTransactions / ListTransactions
# ---------------------------------------------------------------------------------------------
@api(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0, access=per_item(
    "transactional_ids", "transaction_states", lambda c, t: c.allowed(O.DESCRIBE, TXN, t), TXN_DENIED))
async def describe_transactions(broker: BrokerContext, ctx: RequestContext, req):
    S = DescribeTransactionsResponse.TransactionState
    out = []
    for txn_id in req.transactional_ids:
        try:
            broker.check_transaction_coordinator(txn_id)
            m = broker.transactions.describe(txn_id)
        except errors.KafkaApiError as e:
            out.append(S(error_code=e.code, transactional_id=txn_id, transaction_state="",
                         transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                         producer_epoch=-1, topics=[]))
            continue
        out.append(S(error_code=errors.NONE, transactional_id=txn_id, transaction_state=m.state.kafka_name,
                     transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.start_ms,
                     producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                     topics=[S.TopicData(topic=t, partitions=ps) for t, ps in m.topics().items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)


@api(ListTransactionsRequest, ListTransactionsResponse, 0, 2, access=Access(listing=ListingRule(
    "transaction_states", lambda c, t: c.allowed(O.DESCRIBE, TXN, t.transactional_id))))
async def list_transactions(broker: BrokerContext, ctx: RequestContext, req):
    S = ListTransactionsResponse.TransactionState
    v = ctx.api_version
    try:
        txns, unknown = broker.transactions.list_transactions(
            req.state_filters or [], req.producer_id_filters or [],
            req.duration_filter if v >= 1 else -1,
            req.transactional_id_pattern if v >= 2 else None)
    except re.error:  # a bad regular expression in transactional_id_pattern
        return ListTransactionsResponse(throttle_time_ms=0, error_code=errors.InvalidRequest.code,
                                        unknown_state_filters=[], transaction_states=[])
    return ListTransactionsResponse(throttle_time_ms=0, error_code=errors.NONE, unknown_state_filters=unknown,
                                    transaction_states=[S(transactional_id=m.transactional_id,
                                                          producer_id=m.producer_id,
                                                          transaction_state=m.state.kafka_name) for m in txns])


# ---------------------------------------------------------------------------------------------
# WriteTxnMarkers (inter-broker: the transaction coordinator to the leaders of its partitions)
# ---------------------------------------------------------------------------------------------
@api(WriteTxnMarkersRequest, WriteTxnMarkersResponse, 0, 2, access=cluster_whole(O.CLUSTER_ACTION))  # coordinator -> leaders
async def write_txn_markers(broker: BrokerContext, ctx: RequestContext, req):
    """Append each COMMIT/ABORT marker as this partition's leader (replicated like any append, and
    answered once the in-sync replicas have it, as Kafka's acks=-1 append of markers); a marker in
    ``__consumer_offsets`` also settles the transaction's pending offsets of the groups there."""
    service = broker.partition_service
    codes: dict[tuple[int, str, int], int] = {}
    pending: list[tuple[tuple[int, str, int], PendingAcks]] = []  # markers awaiting the in-sync replicas
    for marker in req.markers:
        pid = marker.producer_id
        for topic in marker.topics:
            for p in topic.partition_indexes:
                key = (pid, topic.name, p)
                outcome = service.append_marker(topic.name, p, producer_id=pid, producer_epoch=marker.producer_epoch,
                                                commit=marker.transaction_result,
                                                coordinator_epoch=marker.coordinator_epoch, now_ms=broker.clock_ms(),
                                                transaction_version=marker.transaction_version)
                codes[key] = outcome.error
                if outcome.error != errors.NONE:
                    continue
                if topic.name == OFFSETS_TOPIC:
                    broker.transactions.complete_offsets(pid, p, marker.transaction_result)
                pending.append((key, PendingAcks(topic.name, p, outcome.last_offset)))
    if pending:
        timeout_ms = broker.config.get_int("request.timeout.ms") // 2
        for (key, _p), code in zip(pending, await service.wait_for_acks([p for _key, p in pending], timeout_ms)):
            codes[key] = code
    R = WriteTxnMarkersResponse.WritableTxnMarkerResult
    T = R.WritableTxnMarkerTopicResult
    P = T.WritableTxnMarkerPartitionResult
    return WriteTxnMarkersResponse(markers=[
        R(producer_id=m.producer_id, topics=[
            T(name=t.name, partitions=[P(partition_index=p, error_code=codes[(m.producer_id, t.name, p)])
                                       for p in t.partition_indexes]) for t in m.topics])
        for m in req.markers])
