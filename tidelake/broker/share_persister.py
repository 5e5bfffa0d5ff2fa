"""Where a broker's share-partitions keep their state (KIP-932's persister): the one place where a broker alone
and one of a cluster differ for share groups.

* A broker alone holds every share-partition and appends their snapshots to its own ``__share_group_state``,
  replayed at start (``share_groups.load_share_state``).
* In a cluster the leader of a partition holds its share-partitions (the in-flight records and their locks) and
  keeps their state at the share coordinator, the leader of the state's ``__share_group_state`` partition
  (created through the controller on first use): ReadShareGroupState when it starts serving a share-partition
  (after a restart or a leadership move, and again when a new share session first fetches it),
  InitializeShareGroupState for one without state (at the offset ``share.auto.offset.reset`` picks), then
  WriteShareGroupState after each change. A write that fails (the coordinator moving) is tried again at the next
  flush; until then the leader still holds the state, and if it dies meanwhile its records are delivered again (at
  least once, as promised). The group's coordinator changes the state for Alter/DeleteShareGroupOffsets
  (InitializeShareGroupState at a newer state epoch, DeleteShareGroupState): a leader still holding the
  share-partition is fenced on its next write (FENCED_STATE_EPOCH) and drops it, and a new share session's first
  fetch of it reads the state again, so the next consumers start from the changed state.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import NamedTuple, Protocol

from tidelake import errors
from tidelake.broker.config import BrokerConfig
from tidelake.broker.coordinators import INTERNAL_TOPIC_CONFIGS
from tidelake.broker.topics import TopicManager
from tidelake.cluster.channel import BrokerChannel, ChannelError
from tidelake.cluster.member import ClusterMember
from tidelake.coordinator.share_coordinator import PersistedState
from tidelake.coordinator.share_group import ShareGroupCoordinator
from tidelake.coordinator.share_partition import SharePartition, StateBatch
from tidelake.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateKey, state_partition
from tidelake.protocol.messages import (DeleteShareGroupStateRequest, InitializeShareGroupStateRequest,
                                        ReadShareGroupStateRequest, ReadShareGroupStateResponse,
                                        WriteShareGroupStateRequest)

log = logging.getLogger("tidelake.broker.share_persister")

STATE_API_VERSION = 0
UNINITIALIZED_OFFSET = -1  # InitializeShareGroupState's start offset for "by share.auto.offset.reset, when served"
# a state request to the share coordinator: a dead coordinator's broker refuses the connection at once, a hung
# one must not hold a consumer's ShareFetch past its own timeout
STATE_REQUEST_TIMEOUT_S = 5.0


class SharePersister(Protocol):
    async def load(self, share: ShareGroupCoordinator, group_id: str, topic: str, topic_id: uuid.UUID,
                   partition: int, *, new_session: bool) -> bool:
        """Make the share-partition's persisted state (if any) this broker's before it serves it (``new_session``:
        a share session's first fetch of it, which reads it again: it may have been altered or deleted since);
        False while it cannot be read (its share coordinator moving: nothing is served from the partition
        meanwhile, as Kafka leaves a share-partition still initializing out of the answer). Raises
        NotLeaderOrFollower."""

    async def alter_offset(self, share: ShareGroupCoordinator, key: ShareStateKey, start_offset: int) -> None:
        """AlterShareGroupOffsets for one share-partition: its state starts over at ``start_offset``."""

    async def delete_offsets(self, share: ShareGroupCoordinator, group_id: str, topic_id: uuid.UUID,
                             partitions: int) -> None:
        """DeleteShareGroupOffsets for one topic (of ``partitions`` partitions): the group's state of it is
        forgotten (tombstones), and the group starts over by ``share.auto.offset.reset``."""

    async def flush(self, share: ShareGroupCoordinator) -> None:
        """Persist every share-partition changed since the last flush."""

    async def initialize_pending(self, share: ShareGroupCoordinator) -> None:
        """Initialize the state of the share-partitions the groups coordinated here wait for before they are
        assigned (a cluster's; a broker alone's ``tick`` does it)."""

    async def read_state(self, share: ShareGroupCoordinator, key: ShareStateKey) -> PersistedState | None:
        """A share-partition's state as persisted (None: it has none), for DescribeShareGroupOffsets. Raises
        CoordinatorNotAvailable while it cannot be read."""

    def close(self) -> None:
        """Close the connections to other brokers (at shutdown)."""


class LocalSharePersister:
    """A broker alone: its share-partitions were replayed at start; snapshots go to its own state topic."""

    async def load(self, share: ShareGroupCoordinator, group_id: str, topic: str, topic_id: uuid.UUID,
                   partition: int, *, new_session: bool) -> bool:
        return True

    async def alter_offset(self, share: ShareGroupCoordinator, key: ShareStateKey, start_offset: int) -> None:
        sp = share.share_partition(key.group_id, key.topic_id, key.partition)
        if sp is None:
            share.initialize(key.group_id, key.topic_id, key.partition, start_offset)
        else:
            sp.reset(start_offset)
        share.flush()

    async def delete_offsets(self, share: ShareGroupCoordinator, group_id: str, topic_id: uuid.UUID,
                             partitions: int) -> None:
        share.delete_offsets(group_id, topic_id)

    async def flush(self, share: ShareGroupCoordinator) -> None:
        share.flush()

    async def initialize_pending(self, share: ShareGroupCoordinator) -> None:
        return None

    async def read_state(self, share: ShareGroupCoordinator, key: ShareStateKey) -> PersistedState | None:
        sp = share.share_partition(key.group_id, key.topic_id, key.partition)
        return None if sp is None else PersistedState(sp.start_offset, sp.state_epoch, tuple(sp.state_batches()))

    def close(self) -> None:
        return None


class StateRead(NamedTuple):
    """ReadShareGroupState's answer: the state (None: it has none) and its state epoch (of the deleted one, if
    any: the next initialization is newer)."""
    state: PersistedState | None
    state_epoch: int


def share_state_configs(config: BrokerConfig) -> dict[str, str]:
    """``__share_group_state``'s topic configs: compacted, min.insync.replicas from
    ``share.coordinator.state.topic.min.isr``, never above the replication factor."""
    rf = config.get_int("share.coordinator.state.topic.replication.factor")
    min_isr = max(1, min(config.get_int("share.coordinator.state.topic.min.isr"), rf))
    return {**INTERNAL_TOPIC_CONFIGS, "min.insync.replicas": str(min_isr)}


class ReplicatedSharePersister:
    """One broker of a cluster: share-partition state kept at each share-partition's share coordinator."""

    def __init__(self, member: ClusterMember, config: BrokerConfig, topics: TopicManager, node_id: int):
        self._member, self._config, self._topics, self._node_id = member, config, topics, node_id
        self._channels: dict[int, BrokerChannel] = {}
        # one flush at a time: a share-partition's snapshots reach its coordinator in the order they were taken
        self._flushing = asyncio.Lock()

    def _state_partitions(self) -> int:
        info = self._topics.get(SHARE_STATE_TOPIC)
        return info.partitions if info is not None else self._config.get_int(
            "share.coordinator.state.topic.num.partitions")

    async def _coordinator(self, key: ShareStateKey) -> BrokerChannel:
        """The channel to the share coordinator of ``key`` (the leader of its state partition), creating the
        state topic on first use. Raises CoordinatorNotAvailable."""
        n = self._state_partitions()
        leader = await self._member.internal_topic_leader(
            SHARE_STATE_TOPIC, n, self._config.get_int("share.coordinator.state.topic.replication.factor"),
            share_state_configs(self._config), state_partition(key, n), self._member.inter_broker_listener)
        ch = self._channels.get(leader.broker_id)
        if ch is None or (ch.host, ch.port) != (leader.host, leader.port):
            if ch is not None:
                ch.close()
            ch = self._channels[leader.broker_id] = BrokerChannel(
                leader.broker_id, leader.host, leader.port, client_id=f"broker-{self._node_id}-share-state",
                timeout_s=STATE_REQUEST_TIMEOUT_S)
        return ch

    async def load(self, share: ShareGroupCoordinator, group_id: str, topic: str, topic_id: uuid.UUID,
                   partition: int, *, new_session: bool) -> bool:
        held = share.share_partition(group_id, topic_id, partition)
        if held is not None and not new_session:
            return True
        key = ShareStateKey(group_id, topic_id, partition)
        leader_epoch = self._member.check_leader(topic, partition)
        try:
            read = await self._read(key, leader_epoch)
        except errors.CoordinatorNotAvailable as e:
            log.info("share state of %s:%s-%d not readable yet: %s", group_id, topic, partition, e)
            return held is not None  # one held is served as it is
        held = share.share_partition(group_id, topic_id, partition)  # (loaded meanwhile by another fetch)
        if held is not None:
            if read.state is not None and read.state.state_epoch == held.state_epoch:
                return True
            # the group's coordinator altered or deleted it since: its in-flight records are void, as in Kafka
            log.info("share group %s: %s-%d was changed by the group's coordinator (state epoch %d, held %d): "
                     "read again", group_id, topic, partition, read.state_epoch, held.state_epoch)
            share.drop_share_partition(group_id, topic_id, partition)
        if read.state is not None:
            state = read.state
            share.restore(group_id, topic_id, partition, SharePartition.restored(
                share.config_for(group_id), state.start_offset, state.state_epoch, state.batches))
            log.info("share group %s: %s-%d resumed from its persisted state at offset %d (%d in flight)",
                     group_id, topic, partition, state.start_offset, sum(
                         b.last_offset - b.first_offset + 1 for b in state.batches))
            return True
        start = share.reset_offset(group_id, topic_id, partition)
        if start is None:
            return True  # not readable here: the fetch answers why
        try:
            await self._initialize(key, start, read.state_epoch + 1)
        except errors.KafkaApiError as e:  # the coordinator moving, or another fetch initialized it first
            log.info("share state of %s:%s-%d not initialized yet: %s", group_id, topic, partition, e)
            return False
        if share.share_partition(group_id, topic_id, partition) is None:
            share.restore(group_id, topic_id, partition,
                          SharePartition.restored(share.config_for(group_id), start, read.state_epoch + 1, ()))
        return True

    async def alter_offset(self, share: ShareGroupCoordinator, key: ShareStateKey, start_offset: int) -> None:
        read = await self._read(key, -1)
        await self._initialize(key, start_offset, read.state_epoch + 1)

    async def initialize_pending(self, share: ShareGroupCoordinator) -> None:
        # As Kafka's group coordinator: the state is initialized without a start offset (-1), which the partition's
        # leader resolves by share.auto.offset.reset when it first serves the share-partition; one a leader (or
        # another initialization) made first counts as initialized too.
        unreachable: set[int] = set()  # share coordinators' brokers that failed in this round: tried at the next
        for key in share.pending_initializations():
            channel = None
            try:
                channel = await self._coordinator(key)
                if channel.broker_id in unreachable:
                    continue
                read = await self._read(key, -1)
                if read.state is None:
                    await self._initialize(key, UNINITIALIZED_OFFSET, read.state_epoch + 1)
            except errors.KafkaApiError as e:
                if channel is not None and isinstance(e, errors.CoordinatorNotAvailable):
                    unreachable.add(channel.broker_id)
                log.info("share state of %s:%s-%d not initialized yet (%s); tried again at the next tick",
                         key.group_id, key.topic_id, key.partition, e)
                continue
            share.mark_initialized(key)

    async def delete_offsets(self, share: ShareGroupCoordinator, group_id: str, topic_id: uuid.UUID,
                             partitions: int) -> None:
        share.forget_initialized(group_id, topic_id)
        D = DeleteShareGroupStateRequest.DeleteStateData
        for partition in range(partitions):
            key = ShareStateKey(group_id, topic_id, partition)
            await self._change(key, DeleteShareGroupStateRequest(group_id=group_id, topics=[D(
                topic_id=topic_id, partitions=[D.PartitionData(partition=partition)])]))

    async def _initialize(self, key: ShareStateKey, start_offset: int, state_epoch: int) -> None:
        I = InitializeShareGroupStateRequest.InitializeStateData
        await self._change(key, InitializeShareGroupStateRequest(group_id=key.group_id, topics=[I(
            topic_id=key.topic_id, partitions=[I.PartitionData(partition=key.partition, state_epoch=state_epoch,
                                                               start_offset=start_offset)])]))

    async def _change(self, key: ShareStateKey, request) -> None:
        """An Initialize or DeleteShareGroupState of one share-partition at its share coordinator. Raises
        CoordinatorNotAvailable, or the error it answered."""
        try:
            response = await (await self._coordinator(key)).request(request, STATE_API_VERSION)
        except ChannelError as e:
            raise errors.CoordinatorNotAvailable(str(e)) from None
        (result,) = [p for r in response.results for p in r.partitions]
        if result.error_code:
            raise errors.KafkaApiError(result.error_message or f"the share coordinator answered error "
                                       f"{result.error_code}", result.error_code)

    async def read_state(self, share: ShareGroupCoordinator, key: ShareStateKey) -> PersistedState | None:
        return (await self._read(key, -1)).state

    async def _read(self, key: ShareStateKey, leader_epoch: int) -> "StateRead":
        """ReadShareGroupState at the key's share coordinator. Raises CoordinatorNotAvailable."""
        R = ReadShareGroupStateRequest.ReadStateData
        request = ReadShareGroupStateRequest(group_id=key.group_id, topics=[R(topic_id=key.topic_id, partitions=[
            R.PartitionData(partition=key.partition, leader_epoch=leader_epoch)])])
        try:
            response: ReadShareGroupStateResponse = await (await self._coordinator(key)).request(
                request, STATE_API_VERSION)
        except ChannelError as e:
            raise errors.CoordinatorNotAvailable(str(e)) from None
        (result,) = [p for r in response.results for p in r.partitions]
        if result.error_code:
            raise errors.CoordinatorNotAvailable(f"the share coordinator answered error {result.error_code}: "
                                                 f"{result.error_message}")
        if result.start_offset < 0:
            return StateRead(None, result.state_epoch)
        return StateRead(PersistedState(result.start_offset, result.state_epoch, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in result.state_batches)), result.state_epoch)

    async def flush(self, share: ShareGroupCoordinator) -> None:
        async with self._flushing:
            W = WriteShareGroupStateRequest.WriteStateData
            P, B = W.PartitionData, W.PartitionData.StateBatch
            writes = []
            for key, sp in share.take_changed():  # the states as taken now, before any wait
                leader_epoch = self._leader_epoch(key)
                if leader_epoch < 0:  # no longer the partition's leader: the next one serves what was persisted
                    continue
                writes.append((key, sp, WriteShareGroupStateRequest(group_id=key.group_id, topics=[W(
                    topic_id=key.topic_id, partitions=[P(
                        partition=key.partition, state_epoch=sp.state_epoch, leader_epoch=leader_epoch,
                        start_offset=sp.start_offset,
                        state_batches=[B(first_offset=b.first_offset, last_offset=b.last_offset,
                                         delivery_state=b.state, delivery_count=b.delivery_count)
                                       for b in sp.state_batches()])])])))
            unreachable: set[int] = set()  # coordinators' brokers that failed in this flush: not waited for again
            for key, sp, request in writes:
                try:
                    channel = await self._coordinator(key)
                    if channel.broker_id in unreachable:
                        sp.persist_again()
                        continue
                    response = await channel.request(request, STATE_API_VERSION)
                    code, message = next(((p.error_code, p.error_message) for r in response.results
                                          for p in r.partitions if p.error_code), (errors.NONE, None))
                except ChannelError as e:
                    unreachable.add(channel.broker_id)
                    code, message = errors.CoordinatorNotAvailable.code, str(e)
                except errors.KafkaApiError as e:
                    code, message = e.code, str(e)
                if code == errors.FencedStateEpoch.code:  # altered or deleted by the group's coordinator
                    log.info("share state of %s:%s-%d changed elsewhere (%s): dropped here, read again at the next "
                             "fetch", key.group_id, key.topic_id, key.partition, message)
                    share.drop_share_partition(key.group_id, key.topic_id, key.partition)
                elif code:
                    log.info("share state of %s:%s-%d not written (error %d: %s); tried again at the next flush",
                             key.group_id, key.topic_id, key.partition, code, message)
                    sp.persist_again()

    def _leader_epoch(self, key: ShareStateKey) -> int:
        """This broker's leader epoch of the share-partition's partition; -1 if it no longer leads it."""
        info = self._topics.by_id(key.topic_id)
        try:
            return self._member.check_leader(info.name, key.partition) if info is not None else -1
        except errors.KafkaApiError:
            return -1

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
