"""How the broker hosts share groups (KIP-932): the ``ShareGroupCoordinator``'s outputs are its
share-partition snapshots, appended to ``__share_group_state`` (compacted, created on first use) and replayed
at start, and the groups' ``share.*`` configs, kept with the broker's metadata (``metadata.json``).

A replicated cluster does not serve share groups yet (``handlers/share_groups.py`` refuses the heartbeat):
the state topic would have to be created through the controller, and each share-partition would have to be
rebuilt by the new leader of its partition from the state topic.
"""
from __future__ import annotations

import logging

from tidelake.broker.config import BrokerConfig
from tidelake.broker.coordinators import INTERNAL_TOPIC_CONFIGS
from tidelake.broker.partitions import Partitions
from tidelake.broker.topics import TopicManager
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.coordinator.share_group import ShareGroupCoordinator
from tidelake.coordinator.share_state import SHARE_STATE_TOPIC, replay
from tidelake.coordinator.txn_offsets import resolve_transactional_records
from tidelake.errors import TopicAlreadyExists
from tidelake.log import LogManager
from tidelake.protocol.records import Record, build_batch

log = logging.getLogger("tidelake.broker.share_groups")


def build_share_coordinator(config: BrokerConfig, topics: TopicManager, partitions: Partitions) -> ShareGroupCoordinator:
    share_config = ShareGroupConfig.from_properties(config)

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
        if plog is None:
            return None
        return plog.log_start_offset if earliest else plog.high_watermark

    return ShareGroupCoordinator(share_config, topic_id_of=topic_id_of, partitions_of=partitions_of,
                                 topic_exists=topic_exists, start_offset=start_offset, write=write,
                                 group_configs=topics.metadata.group_configs,
                                 save_group_configs=topics.metadata.set_group_configs)


def load_share_state(share: ShareGroupCoordinator, topics: TopicManager, logs: LogManager) -> int:
    """Replay ``__share_group_state`` into ``share``; the number of share-partitions restored (those of
    topics deleted meanwhile are forgotten, with their tombstones)."""
    info = topics.get(SHARE_STATE_TOPIC)
    if info is None:
        return 0
    records = []
    for p in range(info.partitions):
        plog = logs.get(SHARE_STATE_TOPIC, p)
        if plog is not None:
            plain, _open = resolve_transactional_records(plog.iter_batches(0))
            records.extend(plain)
    restored = replay(records, share.config)
    for key, sp in restored.items():
        share.restore(key.group_id, key.topic_id, key.partition, sp)
    n = len(restored) - share.forget_deleted_topics()
    log.info("share coordinator loaded %d share-partitions from %s", n, SHARE_STATE_TOPIC)
    return n
