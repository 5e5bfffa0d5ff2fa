"""How the broker hosts its two coordinators: the internal topics they write, the callbacks that
are their only outputs, and the replay of their state at start.

* ``GroupCoordinator`` writes group and offset records to ``__consumer_offsets`` (50 compacted
  partitions by default, created at start) and is rebuilt from it.
* ``TransactionCoordinator`` writes its state to ``__transaction_state`` (created on first use),
  COMMIT/ABORT markers to the partitions of a transaction, and transactional offset commits to
  ``__consumer_offsets``; committed ones reach the group coordinator through ``apply_offsets``.

Both coordinators count the ``__consumer_offsets`` partitions the same way: the existing topic's
partition count, else ``offsets.topic.num.partitions``.

In a cluster both coordinators follow the leadership of their internal topics' partitions
(``coordinator_leadership``): the leader of a partition loads its groups / transactions, a former
leader forgets them. Transaction-state appends are leader-only (a deposed coordinator gets
NOT_COORDINATOR) and markers go to the partitions' leaders through the cluster's WriteTxnMarkers sender.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from tidelake.broker.config import BrokerConfig
from tidelake.broker.coordinator_appends import CoordinatorAppends
from tidelake.broker.partitions import Partitions
from tidelake.broker.topics import TopicManager
from tidelake.cluster.member import ClusterMember
from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.group_coordinator import GroupCoordinator
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.transactions import TransactionCoordinator
from tidelake.coordinator.txn_log import TRANSACTION_STATE_TOPIC
from tidelake.coordinator.txn_offsets import resolve_transactional_records
from tidelake.coordinator.txn_outputs import OffsetRecord
from tidelake.errors import (NONE, NotCoordinator, NotEnoughReplicasAfterAppend, NotLeaderOrFollower,
                             TopicAlreadyExists, UnknownTopicOrPartition)
from tidelake.log import LogManager
from tidelake.protocol.records import Record, build_batch, decode_records

log = logging.getLogger("tidelake.broker.coordinators")

# Kafka's configs for both internal topics (offsets.topic.* / transaction.state.log.*)
INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}


def offsets_partitions(config: BrokerConfig, topics: TopicManager) -> int:
    info = topics.get(OFFSETS_TOPIC)
    return info.partitions if info is not None else config.get_int("offsets.topic.num.partitions")


def _batch(records: list[OffsetRecord], now: int, **batch_args) -> bytearray:
    """One batch of (key, value) records, all stamped ``now``."""
    return build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)], **batch_args)


def build_group_coordinator(config: BrokerConfig, topics: TopicManager, appends: CoordinatorAppends,
                            clock_ms: Callable[[], int]) -> GroupCoordinator:
    group_config = GroupConfig.from_properties(config)
    group_config.offsets_partitions = offsets_partitions(config, topics)  # what hashing uses

    def write(partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        now = clock_ms()
        appends.append(OFFSETS_TOPIC, partition, _batch(records, now), now_ms=now)

    def partitions_of(topic: str) -> int | None:
        info = topics.get(topic)
        return info.partitions if info is not None else None

    def topic_id_of(name: str):
        info = topics.get(name)
        return info.topic_id if info is not None else None

    def topic_name_of(topic_id):
        info = topics.by_id(topic_id)
        return info.name if info is not None else None

    return GroupCoordinator(group_config, write=write, partitions_of=partitions_of,
                            list_topics=lambda: list(topics.metadata.topics),
                            topic_id_of=topic_id_of, topic_name_of=topic_name_of)


def load_groups(groups: GroupCoordinator, topics: TopicManager, logs: LogManager, now_ms: int) -> None:
    """Create ``__consumer_offsets`` if new, then replay it: plain and committed-transactional
    records (control and aborted ones skipped)."""
    n_partitions = groups.config.offsets_partitions
    if topics.get(OFFSETS_TOPIC) is None:
        topics.create(OFFSETS_TOPIC, n_partitions, INTERNAL_TOPIC_CONFIGS, internal=True)
    n = 0
    for p in range(n_partitions):
        plog = logs.get(OFFSETS_TOPIC, p)
        if plog is not None:
            records, _open = resolve_transactional_records(plog.iter_batches(0))
            n += groups.load(records, now_ms)
    log.info("group coordinator loaded %d __consumer_offsets records: %d groups", n, len(groups.known_group_ids()))


def transaction_state_configs(config: BrokerConfig) -> dict[str, str]:
    """``__transaction_state``'s topic configs: compacted, min.insync.replicas from
    ``transaction.state.log.min.isr`` (Kafka's default 2), never above the replication factor, so a
    smaller cluster still acknowledges its writes."""
    rf = config.get_int("transaction.state.log.replication.factor")
    min_isr = max(1, min(config.get_int("transaction.state.log.min.isr"), rf))
    return {**INTERNAL_TOPIC_CONFIGS, "min.insync.replicas": str(min_isr)}


def coordinator_leadership(groups: GroupCoordinator, transactions: TransactionCoordinator, logs: LogManager,
                           cluster: ClusterMember, clock_ms):
    """In a cluster, the hook run when this broker becomes or stops being the leader of a partition:
    for ``__consumer_offsets`` the groups hashed to it (and the offsets of transactions still open in
    it) are loaded from its log or forgotten; for ``__transaction_state`` the transactional ids hashed
    to it, with its leader epoch as the coordinator epoch, and transactions found in Prepare* are
    completed (their markers sent), as Kafka's coordinator does on load."""
    def changed(topic: str, partition: int, leader: bool) -> None:
        if topic == OFFSETS_TOPIC:
            offsets_changed(partition, leader)
        elif topic == TRANSACTION_STATE_TOPIC:
            transactions_changed(partition, leader)

    def offsets_changed(partition: int, leader: bool) -> None:
        if not leader:
            gone = groups.unload_partition(partition)
            transactions.unload_pending_offsets(partition)
            if gone:
                log.info("no longer coordinating %d group(s) of %s-%d", len(gone), OFFSETS_TOPIC, partition)
            return
        plog = logs.get(OFFSETS_TOPIC, partition)
        if plog is None:
            return
        groups.unload_partition(partition)
        transactions.unload_pending_offsets(partition)
        records, open_transactions = resolve_transactional_records(plog.iter_batches(0))
        n = groups.load(records, clock_ms(), partition=partition)
        transactions.load_pending_offsets(partition, open_transactions)
        log.info("coordinating the groups of %s-%d (%d records loaded)", OFFSETS_TOPIC, partition, n)

    def transactions_changed(partition: int, leader: bool) -> None:
        if not leader:
            gone = transactions.unload_partition(partition)
            if gone:
                log.info("no longer coordinating %d transactional id(s) of %s-%d", len(gone),
                         TRANSACTION_STATE_TOPIC, partition)
            return
        plog = logs.get(TRANSACTION_STATE_TOPIC, partition)
        if plog is None:
            return
        epoch = cluster.check_leader(TRANSACTION_STATE_TOPIC, partition)
        n = transactions.load_partition(partition, epoch, _state_records(plog))
        log.info("coordinating the transactions of %s-%d in coordinator epoch %d (%d records loaded)",
                 TRANSACTION_STATE_TOPIC, partition, epoch, n)
        prepared = transactions.prepared_ids(partition)
        if prepared:
            log.info("completing the transactions found in Prepare* in %s-%d: %s", TRANSACTION_STATE_TOPIC,
                     partition, prepared)
            transactions.complete_prepared()
    return changed


def _state_records(plog) -> list[tuple[bytes, bytes | None]]:
    records = []
    for header, data in plog.iter_batches(0):
        if not header.is_control:
            records.extend((r.key, r.value) for r in decode_records(data, 0, header))
    return records


def single_broker_transaction_coordinator(config: BrokerConfig, topics: TopicManager, partitions: Partitions,
                                          appends: CoordinatorAppends, groups: GroupCoordinator,
                                          allocate_producer_id: Callable[[], int]) -> TransactionCoordinator:
    """A broker alone: it writes every marker itself and its state needs no other replica."""

    def write_state(partition: int, key: bytes, value: bytes | None) -> None:
        if topics.get(TRANSACTION_STATE_TOPIC) is None:
            try:
                topics.create(TRANSACTION_STATE_TOPIC, coordinator.num_partitions, INTERNAL_TOPIC_CONFIGS,
                              internal=True)
            except TopicAlreadyExists:
                pass
        now = partitions.clock_ms()
        appends.append(TRANSACTION_STATE_TOPIC, partition, _batch([(key, value)], now), now_ms=now)

    coordinator = _transaction_coordinator(config, partitions, appends, groups, allocate_producer_id, write_state)
    return coordinator


def cluster_transaction_coordinator(config: BrokerConfig, partitions: Partitions, appends: CoordinatorAppends,
                                    groups: GroupCoordinator, cluster: ClusterMember) -> TransactionCoordinator:
    """One broker of a cluster: the leader of the id's ``__transaction_state`` partition (created by
    FindCoordinator) writes its state, markers go to the partitions' leaders once the state is replicated."""

    def write_state(partition: int, key: bytes, value: bytes | None) -> None:
        now = partitions.clock_ms()
        try:
            appends.append(TRANSACTION_STATE_TOPIC, partition, _batch([(key, value)], now), now_ms=now)
        except (NotLeaderOrFollower, UnknownTopicOrPartition):
            raise NotCoordinator(f"this broker does not lead {TRANSACTION_STATE_TOPIC}-{partition}") from None

    def send_markers(transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, tps: list[tuple[str, int]], done) -> None:
        """WriteTxnMarkers to the partitions' leaders, given up once this coordinator no longer owns the id's
        partition in that epoch."""
        state_partition = coordinator.partition_for(transactional_id)
        cluster.txn_markers.send(
            producer_id, producer_epoch, commit, coordinator_epoch, tps, done,
            still_owner=lambda: coordinator.partition_epochs.get(state_partition) == coordinator_epoch,
            transaction_version=coordinator.client_transaction_version(transactional_id))

    def state_replicated(partition: int, then) -> None:
        """``then(True)`` once the partition's in-sync replicas have everything written to it so far (its high
        watermark passed it, even if the ISR shrank below min.insync.replicas meanwhile)."""
        plog = partitions.logs.get(TRANSACTION_STATE_TOPIC, partition)
        if plog is None:
            then(False)
            return
        task = asyncio.get_running_loop().create_task(cluster.wait_for_acks(
            TRANSACTION_STATE_TOPIC, partition, plog.log_end_offset - 1,
            config.get_int("request.timeout.ms")))
        task.add_done_callback(lambda t: then(not t.cancelled() and t.exception() is None and t.result() in (
            NONE, NotEnoughReplicasAfterAppend.code)))

    coordinator = _transaction_coordinator(config, partitions, appends, groups, cluster.allocate_producer_id,
                                           write_state, send_markers, state_replicated)
    return coordinator


def _transaction_coordinator(config: BrokerConfig, partitions: Partitions, appends: CoordinatorAppends,
                             groups: GroupCoordinator, allocate_producer_id: Callable[[], int], write_state,
                             send_markers=None, state_replicated=None) -> TransactionCoordinator:
    def write_markers(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      tps: list[tuple[str, int]]) -> None:
        for topic, partition in tps:
            try:
                partitions.append_marker(topic, partition, producer_id=producer_id, producer_epoch=producer_epoch,
                                         commit=commit, coordinator_epoch=coordinator_epoch)
            except UnknownTopicOrPartition:
                log.warning("%s-%d no longer exists: no %s marker for producer %d", topic, partition,
                            "COMMIT" if commit else "ABORT", producer_id)

    def write_offsets(partition: int, producer_id: int, producer_epoch: int, records: list[OffsetRecord]) -> None:
        now = partitions.clock_ms()
        batch = _batch(records, now, producer_id=producer_id, producer_epoch=producer_epoch,
                       transactional=True)
        appends.append(OFFSETS_TOPIC, partition, batch, now_ms=now)

    def apply_offsets(records: list[OffsetRecord]) -> None:
        for key, value in records:
            groups.offsets.apply_record(key, value)

    return TransactionCoordinator(
        write_state=write_state, write_markers=write_markers, write_offsets=write_offsets,
        send_markers=send_markers, state_replicated=state_replicated,
        apply_offsets=apply_offsets, allocate_producer_id=allocate_producer_id, clock_ms=partitions.clock_ms,
        max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
        num_partitions=config.get_int("transaction.state.log.num.partitions"),
        offsets_partitions=groups.config.offsets_partitions,
        id_expiration_ms=config.get_int("transactional.id.expiration.ms"))


def load_transactions(transactions: TransactionCoordinator, logs: LogManager) -> None:
    """Replay ``__transaction_state``, rebuild the offsets of transactions still open in
    ``__consumer_offsets``, and finish transactions left in Prepare*."""
    n = 0
    for p in range(transactions.num_partitions):
        plog = logs.get(TRANSACTION_STATE_TOPIC, p)
        if plog is None:
            continue
        records = []
        for header, data in plog.iter_batches(0):
            if not header.is_control:
                records.extend((r.key, r.value) for r in decode_records(data, 0, header))
        n += transactions.load(records)
    if n:
        log.info("loaded %d transaction state records: %d transactional ids", n, len(transactions.transactions))
    for p in range(transactions.offsets_partitions):
        plog = logs.get(OFFSETS_TOPIC, p)
        first = plog.producer_state.first_unstable_offset() if plog is not None else None
        if first is not None:
            _, open_transactions = resolve_transactional_records(plog.iter_batches(first))
            transactions.load_pending_offsets(p, open_transactions)
    done = transactions.complete_prepared()
    if done:
        log.info("completed transactions left in Prepare* at restart: %s", done)
