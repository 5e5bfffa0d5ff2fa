"""KIP-932's inter-broker share-state APIs, answered by the share coordinator (the leader of the share-partition's
``__share_group_state`` partition): InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState and
DeleteShareGroupState. Partition leaders send them (``broker/share_persister.py``).

This module translates between the wire and ``tidelake.coordinator.share_coordinator``. A write is answered once
the state partition's in-sync replicas have it, so a state a leader was told is written survives the
coordinator's broker.
"""
from __future__ import annotations

import logging
from typing import NamedTuple

from tidelake import errors
from tidelake.broker.access import cluster_whole
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.registry import api
from tidelake.coordinator.share_coordinator import PersistedState
from tidelake.coordinator.share_partition import StateBatch
from tidelake.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateKey
from tidelake.protocol.messages import (DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
                                        InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
                                        ReadShareGroupStateRequest, ReadShareGroupStateResponse,
                                        WriteShareGroupStateRequest, WriteShareGroupStateResponse)
from tidelake.security.acl.model import Operation as O

log = logging.getLogger("tidelake.broker.share_state")

UNINITIALIZED = -1  # ReadShareGroupState's start offset of a share-partition with no state


class PartitionOutcome(NamedTuple):
    code: int
    message: str | None


async def _replicated(broker: BrokerContext, partitions: set[int]) -> int:
    """The error code once every written state partition is on its in-sync replicas (0)."""
    timeout_ms = broker.config.get_int("request.timeout.ms")
    for partition in sorted(partitions):
        code = await broker.partition_service.log_end_replicated(SHARE_STATE_TOPIC, partition, timeout_ms)
        if code not in (errors.NONE, errors.NotEnoughReplicasAfterAppend.code):
            return code
    return errors.NONE


def _code(e: errors.KafkaApiError) -> int:
    return _coordinator_code(e.code)


def _coordinator_code(code: int) -> int:
    # a deposed coordinator's append fails as the partition's non-leader: the sender looks for the new one
    return errors.NotCoordinator.code if code in (errors.NotLeaderOrFollower.code,
                                                 errors.UnknownTopicOrPartition.code) else code


@api(ReadShareGroupStateRequest, ReadShareGroupStateResponse, 0, 0, access=cluster_whole(O.CLUSTER_ACTION))
async def read_share_group_state(broker: BrokerContext, ctx: RequestContext, req):
    R = ReadShareGroupStateResponse.ReadStateResult
    P, B = R.PartitionResult, R.PartitionResult.StateBatch
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            key = ShareStateKey(req.group_id, t.topic_id, p.partition)
            try:
                state = broker.share_state.read(key, p.leader_epoch)
            except errors.KafkaApiError as e:
                parts.append(P(partition=p.partition, error_code=_code(e), error_message=str(e), state_epoch=0,
                               start_offset=UNINITIALIZED, state_batches=[]))
                continue
            if state is None:  # its state epoch: the deleted state's, so that the next initialization is newer
                epoch = max(0, broker.share_state.last_state_epoch(key))
                parts.append(P(partition=p.partition, error_code=0, error_message=None, state_epoch=epoch,
                               start_offset=UNINITIALIZED, state_batches=[]))
                continue
            parts.append(P(partition=p.partition, error_code=0, error_message=None, state_epoch=state.state_epoch,
                           start_offset=state.start_offset,
                           state_batches=[B(first_offset=b.first_offset, last_offset=b.last_offset,
                                            delivery_state=b.state, delivery_count=b.delivery_count)
                                          for b in state.batches]))
        results.append(R(topic_id=t.topic_id, partitions=parts))
    return ReadShareGroupStateResponse(results=results)


async def _apply(broker: BrokerContext, req, change) -> dict[tuple, PartitionOutcome]:
    """Run ``change(key, partition data)`` (it returns the state partition written) for each partition of the
    request, then wait for the replicas; (topic id, partition) -> its outcome."""
    outcome: dict[tuple, PartitionOutcome] = {}
    written: dict[int, list[tuple]] = {}
    for t in req.topics:
        for p in t.partitions:
            try:
                state_partition = change(ShareStateKey(req.group_id, t.topic_id, p.partition), p)
            except errors.KafkaApiError as e:
                outcome[(t.topic_id, p.partition)] = PartitionOutcome(_code(e), str(e))
                continue
            written.setdefault(state_partition, []).append((t.topic_id, p.partition))
            outcome[(t.topic_id, p.partition)] = PartitionOutcome(errors.NONE, None)
    for state_partition, keys in written.items():
        code = await _replicated(broker, {state_partition})
        if code:
            log.warning("share state of group %s not replicated in %s-%d (error %d)", req.group_id,
                        SHARE_STATE_TOPIC, state_partition, code)
            for key in keys:
                outcome[key] = PartitionOutcome(_coordinator_code(code),
                                                f"{SHARE_STATE_TOPIC}-{state_partition} not replicated")
    return outcome


def _write_results(req, outcome, result_cls):
    P = result_cls.PartitionResult
    return [result_cls(topic_id=t.topic_id, partitions=[
        P(partition=p.partition, error_code=outcome[(t.topic_id, p.partition)].code,
          error_message=outcome[(t.topic_id, p.partition)].message) for p in t.partitions]) for t in req.topics]


@api(WriteShareGroupStateRequest, WriteShareGroupStateResponse, 0, 0, access=cluster_whole(O.CLUSTER_ACTION))
async def write_share_group_state(broker: BrokerContext, ctx: RequestContext, req):
    def change(key: ShareStateKey, p) -> int:
        state = PersistedState(p.start_offset, p.state_epoch, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches))
        return broker.share_state.write_state(key, state, p.leader_epoch)
    outcome = await _apply(broker, req, change)
    return WriteShareGroupStateResponse(
        results=_write_results(req, outcome, WriteShareGroupStateResponse.WriteStateResult))


@api(InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, 0, 0,
     access=cluster_whole(O.CLUSTER_ACTION))
async def initialize_share_group_state(broker: BrokerContext, ctx: RequestContext, req):
    def change(key: ShareStateKey, p) -> int:
        return broker.share_state.initialize(key, p.start_offset, p.state_epoch)
    outcome = await _apply(broker, req, change)
    return InitializeShareGroupStateResponse(
        results=_write_results(req, outcome, InitializeShareGroupStateResponse.InitializeStateResult))


@api(DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, 0, 0, access=cluster_whole(O.CLUSTER_ACTION))
async def delete_share_group_state(broker: BrokerContext, ctx: RequestContext, req):
    outcome = await _apply(broker, req, lambda key, _p: broker.share_state.delete_state(key))
    return DeleteShareGroupStateResponse(
        results=_write_results(req, outcome, DeleteShareGroupStateResponse.DeleteStateResult))
