"""How the broker hosts its two coordinators: the internal topics they write, the callbacks that
are their only outputs, and the replay of their state at start.

* ``GroupCoordinator`` writes group and offset records to ``__consumer_offsets`` (50 compacted
  partitions by default, created at start) and is rebuilt from it.
* ``TransactionCoordinator`` writes its state to ``__transaction_state`` (created on first use),
  COMMIT/ABORT markers to the partitions of a transaction, and transactional offset commits to
  ``__consumer_offsets``; committed ones reach the group coordinator through ``apply_offsets``.

Both coordinators count the ``__consumer_offsets`` partitions the same way: the existing topic's
partition count, else ``offsets.topic.num.partitions``.
"""
from __future__ import annotations

import logging

from tidelake.broker.config import BrokerConfig
from tidelake.broker.partitions import Partitions
from tidelake.broker.topics import TopicManager
from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.group_coordinator import GroupCoordinator
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.transactions import OffsetRecord, TransactionCoordinator
from tidelake.coordinator.txn_log import TRANSACTION_STATE_TOPIC
from tidelake.coordinator.txn_offsets import resolve_transactional_records
from tidelake.errors import TopicAlreadyExists, UnknownTopicOrPartition
from tidelake.log import LogManager
from tidelake.protocol.records import Record, build_batch, decode_records

log = logging.getLogger("tidelake.broker.coordinators")

# Kafka's configs for both internal topics (offsets.topic.* / transaction.state.log.*)
INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}


def offsets_partitions(config: BrokerConfig, topics: TopicManager) -> int:
    info = topics.get(OFFSETS_TOPIC)
    return info.partitions if info is not None else config.get_int("offsets.topic.num.partitions", 50)


def _batch(records: list[OffsetRecord], now: int, **batch_args) -> bytearray:
    """One batch of (key, value) records, all stamped ``now``."""
    return build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)], **batch_args)


def build_group_coordinator(config: BrokerConfig, topics: TopicManager, partitions: Partitions) -> GroupCoordinator:
    group_config = GroupConfig.from_properties(config)
    group_config.offsets_partitions = offsets_partitions(config, topics)  # what hashing uses

    def write(partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        now = partitions.clock_ms()
        partitions.append(OFFSETS_TOPIC, partition, _batch(records, now), now_ms=now)

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


def offsets_leadership(groups: GroupCoordinator, logs: LogManager, clock_ms):
    """In a cluster, the hook run when this broker becomes or stops being the leader of a partition:
    for ``__consumer_offsets`` the groups hashed to it are loaded from its log (this broker now
    coordinates them) or forgotten (another broker does)."""
    def changed(topic: str, partition: int, leader: bool) -> None:
        if topic != OFFSETS_TOPIC:
            return
        if not leader:
            gone = groups.unload_partition(partition)
            if gone:
                log.info("no longer coordinating %d group(s) of %s-%d", len(gone), OFFSETS_TOPIC, partition)
            return
        plog = logs.get(OFFSETS_TOPIC, partition)
        if plog is None:
            return
        groups.unload_partition(partition)
        records, _open = resolve_transactional_records(plog.iter_batches(0))
        n = groups.load(records, clock_ms(), partition=partition)
        log.info("coordinating the groups of %s-%d (%d records loaded)", OFFSETS_TOPIC, partition, n)
    return changed


def build_transaction_coordinator(config: BrokerConfig, topics: TopicManager, partitions: Partitions,
                                  groups: GroupCoordinator, allocate_producer_id) -> TransactionCoordinator:
    state_partitions = config.get_int("transaction.state.log.num.partitions", 50)

    def write_state(partition: int, key: bytes, value: bytes | None) -> None:
        if topics.get(TRANSACTION_STATE_TOPIC) is None:
            try:
                topics.create(TRANSACTION_STATE_TOPIC, state_partitions, INTERNAL_TOPIC_CONFIGS, internal=True)
            except TopicAlreadyExists:
                pass
        now = partitions.clock_ms()
        partitions.append(TRANSACTION_STATE_TOPIC, partition, _batch([(key, value)], now), now_ms=now)

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
        partitions.append(OFFSETS_TOPIC, partition, batch, now_ms=now)

    def apply_offsets(records: list[OffsetRecord]) -> None:
        for key, value in records:
            groups.offsets.apply_record(key, value)

    return TransactionCoordinator(
        write_state=write_state, write_markers=write_markers, write_offsets=write_offsets,
        apply_offsets=apply_offsets, allocate_producer_id=allocate_producer_id, clock_ms=partitions.clock_ms,
        max_timeout_ms=config.get_int("transaction.max.timeout.ms", 900000),
        num_partitions=state_partitions, offsets_partitions=groups.config.offsets_partitions,
        id_expiration_ms=config.get_int("transactional.id.expiration.ms", 604800000))


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
