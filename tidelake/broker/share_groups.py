"""How the broker hosts share groups (KIP-932): the ``ShareGroupCoordinator``'s outputs are its
share-partition snapshots, the groups' records in ``__consumer_offsets`` (membership, epochs, assignments, the
initialized partitions: written by the group's coordinator before it answers, replayed as it loads the group's
partition) and the groups' ``share.*`` configs, kept with a broker alone's metadata (``metadata.json``), in a
cluster in ZooKeeper (``cluster_role.ZooKeeperGroupConfigs``).

A broker alone appends the snapshots to its ``__share_group_state`` (compacted, created on first use),
replayed at start. In a cluster (``share_persister.py``) the group's coordinator (the leader of its
``__consumer_offsets`` partition) answers heartbeats, each partition's leader holds that partition's
share-partitions, and the ``ShareStateCoordinator`` of the leader of each ``__share_group_state`` partition keeps
their persisted state; ``share_leadership`` moves both with leadership.
"""
from __future__ import annotations

import logging

from typing import Callable

from tidelake.broker.config import BrokerConfig
from tidelake.broker.coordinator_appends import CoordinatorAppends
from tidelake.broker.coordinators import INTERNAL_TOPIC_CONFIGS
from tidelake.broker.partitions import Partitions
from tidelake.broker.topics import TopicManager
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.coordinator.share_coordinator import ShareStateCoordinator
from tidelake.coordinator.share_group import ShareGroupCoordinator
from tidelake.coordinator.share_group_records import replay as share_group_replay
from tidelake.coordinator.share_state import SHARE_STATE_TOPIC, replay
from tidelake.coordinator.txn_offsets import resolve_transactional_records
from tidelake.errors import NotCoordinator, NotLeaderOrFollower, TopicAlreadyExists, UnknownTopicOrPartition
from tidelake.log import LogManager
from tidelake.protocol.records import Record, build_batch

log = logging.getLogger("tidelake.broker.share_groups")


def build_share_coordinator(config: BrokerConfig, topics: TopicManager, partitions: Partitions,
                            appends: CoordinatorAppends, group_partition: Callable[[str], int],
                            leads: Callable[[str, int], bool] | None = None) -> ShareGroupCoordinator:
    """A broker alone (``leads`` None) holds and persists every share-partition itself; one of a cluster holds
    those of the partitions it ``leads`` and persists nothing directly (its ``SharePersister`` does). Either writes
    the records of the groups it coordinates to their ``__consumer_offsets`` partition (``group_partition``)."""
    share_config = ShareGroupConfig.from_properties(config)

    def write_group(group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        partition = group_partition(group_id)
        now = partitions.clock_ms()
        try:
            appends.append(OFFSETS_TOPIC, partition,
                           build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)]), now_ms=now)
        except (NotLeaderOrFollower, UnknownTopicOrPartition):
            raise NotCoordinator(f"this broker does not lead {OFFSETS_TOPIC}-{partition}, share group "
                                 f"{group_id}'s partition") from None

    def topic_name_of(topic_id):
        info = topics.by_id(topic_id)
        return info.name if info is not None else None

    def write(partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        if topics.get(SHARE_STATE_TOPIC) is None:
            try:
                topics.create(SHARE_STATE_TOPIC, share_config.state_partitions, INTERNAL_TOPIC_CONFIGS, internal=True)
            except TopicAlreadyExists:
                pass
        now = partitions.clock_ms()
        batch = build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)])
        partitions.append(SHARE_STATE_TOPIC, partition, batch, now_ms=now)

    def topic_id_of(name: str):
        info = topics.get(name)
        return info.topic_id if info is not None else None

    def partitions_of(name: str) -> int | None:
        info = topics.get(name)
        return info.partitions if info is not None else None

    def topic_exists(topic_id) -> bool:
        return topics.by_id(topic_id) is not None

    def start_offset(topic_id, partition: int, earliest: bool) -> int | None:
        info = topics.by_id(topic_id)
        plog = partitions.logs.get(info.name, partition) if info is not None else None
        if plog is None or (leads is not None and not leads(info.name, partition)):
            return None
        return plog.log_start_offset if earliest else plog.high_watermark

    return ShareGroupCoordinator(share_config, topic_id_of=topic_id_of, partitions_of=partitions_of,
                                 topic_exists=topic_exists, start_offset=start_offset,
                                 write=write if leads is None else None,
                                 # a cluster's group configs are ZooKeeper's, applied as the broker joins
                                 group_configs=topics.metadata.group_configs if leads is None else None,
                                 save_group_configs=topics.metadata.set_group_configs if leads is None else None,
                                 holds_group_partitions=leads is None, write_group=write_group,
                                 topic_name_of=topic_name_of)


def build_share_state_coordinator(config: BrokerConfig, appends: CoordinatorAppends,
                                  clock_ms: Callable[[], int]) -> ShareStateCoordinator:
    """The share coordinator of the ``__share_group_state`` partitions this broker leads (a cluster's)."""
    def write(partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        now = clock_ms()
        try:
            appends.append(SHARE_STATE_TOPIC, partition,
                           build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)]), now_ms=now)
        except (NotLeaderOrFollower, UnknownTopicOrPartition):
            raise NotCoordinator(f"this broker does not lead {SHARE_STATE_TOPIC}-{partition}") from None

    return ShareStateCoordinator(ShareGroupConfig.from_properties(config), write)


def share_leadership(share: ShareGroupCoordinator, state: ShareStateCoordinator, topics: TopicManager,
                     logs: LogManager, group_partition: Callable[[str], int],
                     clock_ms: Callable[[], int]) -> Callable[[str, int, bool], None]:
    """In a cluster, the hook run when this broker becomes or stops being a partition's leader: a
    ``__share_group_state`` partition's share-partition states are replayed or forgotten; a former leader of
    any other partition forgets its share-partitions (the new leader reads them back from the share coordinator
    before serving, and so does this broker if it leads the partition again). A leader that stays leader (a new
    leader epoch, its ISR changed) keeps them: its state may hold what a moving share coordinator has not
    been sent yet. A new leader of a ``__consumer_offsets`` partition loads the share groups hashed to it
    (``group_partition``) from its records there: their members go on heartbeating with their epochs; a former
    leader forgets them."""
    def changed(topic: str, partition: int, leader: bool) -> None:
        if topic == OFFSETS_TOPIC:
            gone = share.forget_members(lambda group_id: group_partition(group_id) == partition)
            if not leader:
                if gone:
                    log.info("no longer coordinating share group(s) %s of %s-%d", gone, OFFSETS_TOPIC, partition)
                return
            plog = logs.get(OFFSETS_TOPIC, partition)
            if plog is None:
                return
            records = resolve_transactional_records(plog.iter_batches(0))[0]
            loaded = share.load_groups(share_group_replay(records), clock_ms())
            if loaded:
                log.info("coordinating share group(s) %s of %s-%d", loaded, OFFSETS_TOPIC, partition)
            return
        if topic == SHARE_STATE_TOPIC:
            if not leader:
                state.unload_partition(partition)
                return
            plog = logs.get(SHARE_STATE_TOPIC, partition)
            records = resolve_transactional_records(plog.iter_batches(0))[0] if plog is not None else []
            n = state.load_partition(partition, records)
            log.info("share coordinator of %s-%d: %d share-partition states loaded", SHARE_STATE_TOPIC, partition, n)
            return
        info = topics.get(topic)
        if not leader and info is not None:
            n = share.unload_partition(info.topic_id, partition)
            if n:
                log.info("%s-%d: %d share-partition(s) unloaded (leadership lost)", topic, partition, n)
    return changed


def share_topic_deletion(state: ShareStateCoordinator, topics: TopicManager) -> Callable[[str], None]:
    """In a cluster, the hook run when a topic is deleted: the share coordinator tombstones the states of the
    topic's share-partitions it holds (as a broker alone does at its next tick). A share coordinator moving at that
    moment keeps them: harmless (a topic created again has another id) but not compacted away."""
    def deleted(topic: str) -> None:
        info = topics.get(topic)
        if info is None:
            return
        try:
            n = state.delete_topic(info.topic_id)
        except NotCoordinator as e:  # the state partition's leadership moved meanwhile
            log.warning("share state of deleted topic %s not tombstoned: %s", topic, e)
            return
        if n:
            log.info("share state of deleted topic %s (%s): %d share-partition(s) tombstoned", topic, info.topic_id, n)
    return deleted


def load_share_state(share: ShareGroupCoordinator, topics: TopicManager, logs: LogManager) -> int:
    """Replay ``__share_group_state`` into ``share``; the number of share-partitions restored (those of
    topics deleted meanwhile are forgotten, with their tombstones)."""
    records = _committed_records(SHARE_STATE_TOPIC, topics, logs)
    if records is None:
        return 0
    restored = replay(records, share.config)
    for key, sp in restored.items():
        share.restore(key.group_id, key.topic_id, key.partition, sp)
    n = len(restored) - share.forget_deleted_topics()
    log.info("share coordinator loaded %d share-partitions from %s", n, SHARE_STATE_TOPIC)
    return n


def load_share_groups(share: ShareGroupCoordinator, topics: TopicManager, logs: LogManager, now_ms: int) -> int:
    """A broker alone: replay the share groups' records of ``__consumer_offsets`` into ``share`` (their members'
    sessions start now); how many groups."""
    records = _committed_records(OFFSETS_TOPIC, topics, logs)
    if records is None:
        return 0
    loaded = share.load_groups(share_group_replay(records), now_ms)
    if loaded:
        log.info("share group coordinator loaded %d share group(s) from %s", len(loaded), OFFSETS_TOPIC)
    return len(loaded)


def _committed_records(topic: str, topics: TopicManager, logs: LogManager) -> list[Record] | None:
    """Every record of an internal topic's partitions held here, aborted transactions' left out, in each
    partition's order; None when the topic does not exist."""
    info = topics.get(topic)
    if info is None:
        return None
    records = []
    for p in range(info.partitions):
        plog = logs.get(topic, p)
        if plog is not None:
            committed, _open = resolve_transactional_records(plog.iter_batches(0))
            records.extend(committed)
    return records
