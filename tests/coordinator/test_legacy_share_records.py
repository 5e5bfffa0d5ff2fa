"""Share records in Kafka 4.4's layout, and the ones an older tidelake wrote at the same version number (a data
directory of that tidelake still loads): ShareSnapshotValue (SnapshotEpoch uint16, no Create/WriteTimestamp) in
``__share_group_state`` and ShareGroupStatePartitionMetadataValue (a CreateTimestamp per topic) in
``__consumer_offsets``. The old records are written here exactly as the old writers did, from the old specs kept as
``Legacy<Name>.json``."""
import uuid

from tidelake.coordinator.record_codec import decode_value, encode_key, encode_value, record_class
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.coordinator.share_group_records import (SHARE_GROUP_METADATA, SHARE_GROUP_STATE_PARTITION_METADATA,
                                                      SharePartitionsMetadata, replay as replay_groups,
                                                      share_group_key, share_group_value)
from tidelake.coordinator.share_partition import SharePartition, StateBatch
from tidelake.coordinator.share_state import SNAPSHOT, ShareStateKey, decode_record, replay, snapshot_record

CONFIG = ShareGroupConfig(record_lock_duration_ms=1000, delivery_count_limit=3, partition_max_record_locks=100,
                          session_timeout_ms=5000)
TOPIC_ID = uuid.UUID("3f6b1b3e-54a4-4c36-9d59-8a9f1f2c0a11")
KEY = ShareStateKey("g", TOPIC_ID, 0)
BATCHES = (StateBatch(10, 12, 0, 1), StateBatch(13, 13, 2, 2), StateBatch(14, 20, 4, 3))  # available, acked, archived


def old_snapshot_record(key: ShareStateKey, start_offset: int, state_epoch: int, leader_epoch: int,
                        batches) -> tuple[bytes, bytes]:
    """share_state.snapshot_record as tidelake wrote it before Kafka 4.4's layout."""
    old_key = record_class("ShareSnapshotKey")
    old_value = record_class("LegacyShareSnapshotValue")
    k = encode_key(SNAPSHOT, old_key(version=0, group_id=key.group_id, topic_id=key.topic_id, partition=key.partition))
    B = old_value.StateBatch
    v = encode_value(old_value(version=0, snapshot_epoch=0, state_epoch=state_epoch, leader_epoch=leader_epoch,
                               start_offset=start_offset,
                               state_batches=[B(first_offset=b.first_offset, last_offset=b.last_offset,
                                                delivery_state=b.state, delivery_count=b.delivery_count)
                                              for b in batches]))
    return k, v


def test_a_snapshot_is_written_in_kafka_44s_layout():
    sp = SharePartition.restored(CONFIG, 10, 3, BATCHES)
    _k, v = snapshot_record(KEY, sp, 7, now_ms=1_700_000_000_123)
    kafka = decode_value(record_class("ShareSnapshotValue"), v)
    assert (kafka.snapshot_epoch, kafka.state_epoch, kafka.leader_epoch, kafka.start_offset) == (0, 3, 7, 10)
    assert (kafka.create_timestamp, kafka.write_timestamp, kafka.delivery_complete_count) == \
        (1_700_000_000_123, 1_700_000_000_123, -1)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in kafka.state_batches] == \
        [(10, 12, 0, 1), (13, 13, 2, 2), (14, 20, 4, 3)]


def test_an_old_snapshot_and_a_new_one_both_replay():
    old = old_snapshot_record(KEY, 10, 3, 7, BATCHES)
    r = decode_record(*old)
    assert (r.snapshot, r.start_offset, r.state_epoch, r.batches) == (True, 10, 3, BATCHES)
    other = ShareStateKey("g", TOPIC_ID, 1)
    new = snapshot_record(other, SharePartition.restored(CONFIG, 5, 2, (StateBatch(5, 6, 0, 1),)), 1)
    state = replay([old, new], CONFIG)
    assert (state[KEY].start_offset, state[KEY].state_epoch) == (10, 3)
    assert state[KEY].state_batches() == list(SharePartition.restored(CONFIG, 10, 3, BATCHES).state_batches())
    assert (state[other].start_offset, state[other].state_epoch) == (5, 2)
    # a new snapshot of the same share-partition after an old one replaces it
    newer = snapshot_record(KEY, SharePartition.restored(CONFIG, 21, 3, ()), 7)
    assert replay([old, newer], CONFIG)[KEY].start_offset == 21


def test_an_old_state_partition_metadata_record_replays():
    old_value = record_class("LegacyShareGroupStatePartitionMetadataValue")
    Info = old_value.TopicPartitionsInfo
    v = encode_value(old_value(version=0, initializing_topics=[Info(topic_id=TOPIC_ID, topic_name="t", partitions=[2],
                                                                   create_timestamp=-1)],
                               initialized_topics=[Info(topic_id=TOPIC_ID, topic_name="t", partitions=[1, 0],
                                                        create_timestamp=-1)], deleting_topics=[]))
    records = [(share_group_key(SHARE_GROUP_METADATA, "g"), share_group_value(SHARE_GROUP_METADATA, 4)),
               (share_group_key(SHARE_GROUP_STATE_PARTITION_METADATA, "g"), v)]
    assert replay_groups(records)["g"].partitions == SharePartitionsMetadata({TOPIC_ID: ("t", (2,))},
                                                                             {TOPIC_ID: ("t", (0, 1))})
    new = share_group_value(SHARE_GROUP_STATE_PARTITION_METADATA, replay_groups(records)["g"].partitions)
    assert len(new) < len(v)   # Kafka 4.4's layout: no CreateTimestamp
    assert replay_groups(records[:1] + [(records[1][0], new)])["g"].partitions == replay_groups(records)["g"].partitions
