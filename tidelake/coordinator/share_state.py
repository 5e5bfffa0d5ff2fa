"""Share-partition state in ``__share_group_state``, as Kafka's share coordinator keeps it.

A share-partition (group, topic id, partition) lives in partition ``abs(hash("group:topicId:partition"))
% share.coordinator.state.topic.num.partitions`` of the compacted topic. Its records are Kafka's
ShareSnapshot (record type 0: the SPSO and every in-flight state batch) and ShareUpdate (type 1: state
batches changed since the snapshot). tidelake writes a ShareSnapshot after each change (the window is
bounded by ``group.share.partition.max.record.locks``) and reads both kinds back: replaying the topic
in order rebuilds every share-partition after a restart, or on the broker that takes the state over.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable

from tidelake.clock import wall_ms
from tidelake.coordinator.record_codec import (decode_key, decode_value, decode_value_or_legacy, encode_key,
                                               encode_value, partition_for, record_class, record_type)
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.coordinator.share_partition import SharePartition, StateBatch

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT, UPDATE = 0, 1  # record types

_SnapshotKey = record_class("ShareSnapshotKey")
_SnapshotValue = record_class("ShareSnapshotValue")
_LegacySnapshotValue = record_class("LegacyShareSnapshotValue")  # what tidelake wrote before Kafka 4.4's layout
_UpdateKey = record_class("ShareUpdateKey")
_UpdateValue = record_class("ShareUpdateValue")


@dataclass(frozen=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class ShareStateRecord:
    """One decoded state record: a snapshot replaces the share-partition's state, an update patches it."""
    key: ShareStateKey
    snapshot: bool
    start_offset: int  # -1 in an update that leaves it
    state_epoch: int
    batches: tuple[StateBatch, ...]


def state_partition(key: ShareStateKey, partitions: int) -> int:
    return partition_for(f"{key.group_id}:{key.topic_id}:{key.partition}", partitions)


def snapshot_record(key: ShareStateKey, sp: SharePartition, leader_epoch: int,
                    now_ms: int | None = None) -> tuple[bytes, bytes]:
    """The ShareSnapshot (key, value) of a share-partition's current state, in Kafka 4.4's layout. Create and write
    timestamps are both the time of this snapshot: the state's first creation time is not kept (nothing reads it
    back), and Kafka's readers take any value. DeliveryCompleteCount (KIP-1226) is left unset (-1, "unknown")."""
    now = wall_ms() if now_ms is None else now_ms
    k = encode_key(SNAPSHOT, _SnapshotKey(version=0, group_id=key.group_id, topic_id=key.topic_id,
                                          partition=key.partition))
    B = _SnapshotValue.StateBatch
    v = encode_value(_SnapshotValue(
        version=0, snapshot_epoch=0, state_epoch=sp.state_epoch, leader_epoch=leader_epoch,
        start_offset=sp.start_offset, delivery_complete_count=-1, create_timestamp=now, write_timestamp=now,
        state_batches=[B(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.state,
                         delivery_count=b.delivery_count) for b in sp.state_batches()]))
    return k, v


def decode_state_key(key: bytes) -> ShareStateKey:
    """The share-partition a record's key names. ValueError for a record type this version does not know."""
    kind = record_type(key)
    if kind not in (SNAPSHOT, UPDATE):
        raise ValueError(f"unknown {SHARE_STATE_TOPIC} record type {kind}")
    k = decode_key(_SnapshotKey if kind == SNAPSHOT else _UpdateKey, key)
    return ShareStateKey(k.group_id, k.topic_id, k.partition)


def decode_record(key: bytes, value: bytes | None) -> ShareStateRecord | None:
    """A state record, or None for a tombstone (the share-partition's state was deleted). ValueError for a
    record type or body this version does not know."""
    state_key = decode_state_key(key)
    if value is None:
        return None
    kind = record_type(key)
    v = (decode_value_or_legacy(_SnapshotValue, _LegacySnapshotValue, value) if kind == SNAPSHOT
         else decode_value(_UpdateValue, value))
    batches = tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in v.state_batches)
    return ShareStateRecord(state_key, kind == SNAPSHOT, v.start_offset,
                            v.state_epoch if kind == SNAPSHOT else -1, batches)


def tombstone_key(key: ShareStateKey) -> bytes:
    return encode_key(SNAPSHOT, _SnapshotKey(version=0, group_id=key.group_id, topic_id=key.topic_id,
                                             partition=key.partition))


def replay(records: Iterable[tuple[bytes, bytes | None]], config: ShareGroupConfig) -> dict[ShareStateKey, SharePartition]:
    """Every share-partition the records (in log order) leave behind; a record this version cannot decode
    is skipped (a later snapshot of its share-partition replaces it)."""
    state: dict[ShareStateKey, tuple[int, int, dict[int, StateBatch]]] = {}
    for key, value in records:
        try:
            r = decode_record(key, value)
        except ValueError:
            continue
        if r is None:
            if record_type(key) == SNAPSHOT:
                state.pop(decode_state_key(key), None)
            continue
        if r.snapshot:
            state[r.key] = (r.start_offset, r.state_epoch, {b.first_offset: b for b in r.batches})
            continue
        start, epoch, batches = state.get(r.key, (r.start_offset, 0, {}))
        if r.start_offset >= 0:
            start = r.start_offset
        for b in r.batches:
            batches[b.first_offset] = b
        state[r.key] = (start, epoch, batches)
    out = {}
    for key, (start, epoch, batches) in state.items():
        kept = [b for b in batches.values() if b.last_offset >= start]
        out[key] = SharePartition.restored(config, start, epoch, kept)
    return out
