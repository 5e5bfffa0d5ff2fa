"""A share group's records in ``__consumer_offsets`` (KIP-932, Kafka 4.1's record types): what a group's
coordinator writes as its membership changes and replays when it loads the group's partition.

Records (``tidelake/protocol/schemas/<Name>.json``, coded by ``record_codec``; every value is version 0, flexible):

- type 10 ``ShareGroupMemberMetadata`` (group, member) -> rack, client id and host, subscribed topic names
- type 11 ``ShareGroupMetadata`` (group) -> the group epoch (and Kafka 4.1's topic metadata hash, written 0:
  this coordinator recomputes the assignment from the topics it sees instead)
- type 12 ``ShareGroupTargetAssignmentMetadata`` (group) -> the assignment epoch
- type 13 ``ShareGroupTargetAssignmentMember`` (group, member) -> the member's target partitions
- type 14 ``ShareGroupCurrentMemberAssignment`` (group, member) -> member epoch, previous epoch, state and the
  partitions the member was last told
- type 15 ``ShareGroupStatePartitionMetadata`` (group) -> the partitions whose share state is initialized or being
  initialized (and topics whose state is being deleted: none here, a deletion is done when it is answered)

A ``None`` value is a tombstone (a member left, the group deleted); the topic is compacted, so the latest record of
each key is the group's state. The records are diffed from the state like the KIP-848 ones (``offsets.py``).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tidelake.coordinator.record_codec import (decode_key, decode_value, decode_value_or_legacy, encode_key,
                                               encode_value, record_class, record_type)

SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15

_RECORD_NAMES = {
    SHARE_GROUP_MEMBER_METADATA: "ShareGroupMemberMetadata",
    SHARE_GROUP_METADATA: "ShareGroupMetadata",
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: "ShareGroupTargetAssignmentMetadata",
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: "ShareGroupTargetAssignmentMember",
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: "ShareGroupCurrentMemberAssignment",
    SHARE_GROUP_STATE_PARTITION_METADATA: "ShareGroupStatePartitionMetadata",
}
_KEY_CLASSES = {t: record_class(n + "Key") for t, n in _RECORD_NAMES.items()}
_VALUE_CLASSES = {t: record_class(n + "Value") for t, n in _RECORD_NAMES.items()}
# ShareGroupStatePartitionMetadataValue as tidelake wrote it before Kafka 4.4's layout (a CreateTimestamp per topic)
_LEGACY_PARTITIONS_VALUE = record_class("LegacyShareGroupStatePartitionMetadataValue")
_MEMBER_KEYED = (SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                 SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT)
MEMBER_STATE_STABLE = 0  # Kafka's MemberState: a share-group member is always stable (nothing to revoke)

PartitionsById = dict[uuid.UUID, tuple[int, ...]]  # {topic id: (partition, ...) sorted}


@dataclass(frozen=True)
class ShareGroupKey:
    record_type: int  # 10..15
    group_id: str
    member_id: str | None = None


@dataclass(frozen=True)
class ShareMemberMetadata:
    """ShareGroupMemberMetadataValue."""
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareMemberAssignment:
    """ShareGroupCurrentMemberAssignmentValue."""
    member_epoch: int
    previous_member_epoch: int
    assigned: PartitionsById


@dataclass(frozen=True)
class SharePartitionsMetadata:
    """ShareGroupStatePartitionMetadataValue: topic id -> (name, partitions)."""
    initializing: dict[uuid.UUID, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    initialized: dict[uuid.UUID, tuple[str, tuple[int, ...]]] = field(default_factory=dict)


@dataclass
class ShareGroupRecords:
    """The durable state of one share group, exactly what its records hold. ``epoch is None``: no
    ShareGroupMetadata record (no group)."""
    epoch: int | None = None
    members: dict[str, ShareMemberMetadata] = field(default_factory=dict)
    assignment_epoch: int | None = None
    target: dict[str, PartitionsById] = field(default_factory=dict)
    current: dict[str, ShareMemberAssignment] = field(default_factory=dict)
    partitions: SharePartitionsMetadata | None = None

    def apply(self, key: ShareGroupKey, value: bytes | None) -> None:
        t, mid = key.record_type, key.member_id
        if value is None:
            if t == SHARE_GROUP_METADATA:
                self.epoch = None
            elif t == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
                self.assignment_epoch = None
            elif t == SHARE_GROUP_STATE_PARTITION_METADATA:
                self.partitions = None
            else:
                self._per_member(t).pop(mid, None)
            return
        v = (decode_value_or_legacy(_VALUE_CLASSES[t], _LEGACY_PARTITIONS_VALUE, value)
             if t == SHARE_GROUP_STATE_PARTITION_METADATA else decode_value(_VALUE_CLASSES[t], value))
        if t == SHARE_GROUP_METADATA:
            self.epoch = v.epoch
        elif t == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = v.assignment_epoch
        elif t == SHARE_GROUP_STATE_PARTITION_METADATA:
            self.partitions = SharePartitionsMetadata(
                {tp.topic_id: (tp.topic_name, tuple(sorted(tp.partitions))) for tp in v.initializing_topics or ()},
                {tp.topic_id: (tp.topic_name, tuple(sorted(tp.partitions))) for tp in v.initialized_topics or ()})
        elif t == SHARE_GROUP_MEMBER_METADATA:
            self.members[mid] = ShareMemberMetadata(v.rack_id, v.client_id, v.client_host,
                                                    tuple(v.subscribed_topic_names or ()))
        elif t == SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
            self.target[mid] = _partitions_from_wire(v.topic_partitions)
        else:
            self.current[mid] = ShareMemberAssignment(v.member_epoch, v.previous_member_epoch,
                                                      _partitions_from_wire(v.assigned_partitions))

    def _per_member(self, record_type: int) -> dict:
        return {SHARE_GROUP_MEMBER_METADATA: self.members, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: self.target,
                SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: self.current}[record_type]


def is_share_group_key(key: bytes | None) -> bool:
    return key is not None and len(key) >= 2 and record_type(key) in _KEY_CLASSES


def decode_share_group_key(data: bytes) -> ShareGroupKey:
    t = record_type(data)
    if t not in _KEY_CLASSES:
        raise ValueError(f"not a share group record type: {t}")
    k = decode_key(_KEY_CLASSES[t], data)
    return ShareGroupKey(t, k.group_id, k.member_id if t in _MEMBER_KEYED else None)


def share_group_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    fields = {"group_id": group_id}
    if record_type in _MEMBER_KEYED:
        fields["member_id"] = member_id or ""
    return encode_key(record_type, _KEY_CLASSES[record_type](version=0, **fields))


def share_group_value(record_type: int, state: object) -> bytes:
    """The value record of ``record_type`` for ``state`` (an int epoch, a ShareMemberMetadata, a PartitionsById, a
    ShareMemberAssignment or a SharePartitionsMetadata)."""
    V = _VALUE_CLASSES[record_type]
    if record_type == SHARE_GROUP_METADATA:
        v = V(version=0, epoch=state, metadata_hash=0)
    elif record_type == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
        v = V(version=0, assignment_epoch=state)
    elif record_type == SHARE_GROUP_MEMBER_METADATA:
        m: ShareMemberMetadata = state
        v = V(version=0, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
              subscribed_topic_names=list(m.subscribed_topic_names))
    elif record_type == SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
        v = V(version=0, topic_partitions=_partitions_to_wire(V.TopicPartition, state))
    elif record_type == SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        a: ShareMemberAssignment = state
        v = V(version=0, member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
              state=MEMBER_STATE_STABLE, assigned_partitions=_partitions_to_wire(V.TopicPartitions, a.assigned))
    else:
        p: SharePartitionsMetadata = state
        Info = V.TopicPartitionsInfo

        def infos(topics: dict) -> list:
            return [Info(topic_id=tid, topic_name=name, partitions=list(parts))
                    for tid, (name, parts) in sorted(topics.items(), key=lambda kv: str(kv[0]))]
        v = V(version=0, initializing_topics=infos(p.initializing), initialized_topics=infos(p.initialized),
              deleting_topics=[])
    return encode_value(v)


def _partitions_from_wire(topic_partitions) -> PartitionsById:
    return {tp.topic_id: tuple(sorted(tp.partitions)) for tp in topic_partitions or ()}


def _partitions_to_wire(cls, partitions: PartitionsById) -> list:
    return [cls(topic_id=tid, partitions=list(ps)) for tid, ps in sorted(partitions.items(), key=lambda kv: str(kv[0]))]


def share_group_records(group_id: str, old: ShareGroupRecords,
                        new: ShareGroupRecords) -> list[tuple[bytes, bytes | None]]:
    """The records that turn ``old`` into ``new``, in Kafka's order: a leaving member's current assignment, target
    and metadata tombstones first; a deleted group's own records' tombstones last."""
    out: list[tuple[bytes, bytes | None]] = []
    key = share_group_key
    members = sorted(old.members.keys() | old.target.keys() | old.current.keys() | new.members.keys()
                     | new.target.keys() | new.current.keys())
    for mid in members:  # members that left
        if mid in new.members:
            continue
        for record_type, records in ((SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, old.current),
                                     (SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, old.target),
                                     (SHARE_GROUP_MEMBER_METADATA, old.members)):
            if mid in records:
                out.append((key(record_type, group_id, mid), None))

    def per_member(record_type: int, old_records: dict, new_records: dict) -> None:
        for mid in members:
            if mid in new.members and mid in new_records and old_records.get(mid) != new_records[mid]:
                out.append((key(record_type, group_id, mid), share_group_value(record_type, new_records[mid])))

    per_member(SHARE_GROUP_MEMBER_METADATA, old.members, new.members)
    if new.epoch is not None and new.epoch != old.epoch:
        out.append((key(SHARE_GROUP_METADATA, group_id), share_group_value(SHARE_GROUP_METADATA, new.epoch)))
    if new.partitions is not None and new.partitions != old.partitions:
        out.append((key(SHARE_GROUP_STATE_PARTITION_METADATA, group_id),
                    share_group_value(SHARE_GROUP_STATE_PARTITION_METADATA, new.partitions)))
    per_member(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, old.target, new.target)
    if new.assignment_epoch is not None and new.assignment_epoch != old.assignment_epoch:
        out.append((key(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
                    share_group_value(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, new.assignment_epoch)))
    per_member(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, old.current, new.current)
    # the group itself going away
    if new.assignment_epoch is None and old.assignment_epoch is not None:
        out.append((key(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_id), None))
    if new.partitions is None and old.partitions is not None:
        out.append((key(SHARE_GROUP_STATE_PARTITION_METADATA, group_id), None))
    if new.epoch is None and old.epoch is not None:
        out.append((key(SHARE_GROUP_METADATA, group_id), None))
    return out


def replay(records) -> dict[str, ShareGroupRecords]:
    """The share groups of (key, value) records of ``__consumer_offsets`` in log order (other record types
    skipped, and a record that does not decode, as the group coordinator skips one); a group whose records are all
    tombstoned is absent."""
    groups: dict[str, ShareGroupRecords] = {}
    for key, value in records:
        if not is_share_group_key(key):
            continue
        try:
            k = decode_share_group_key(key)
            groups.setdefault(k.group_id, ShareGroupRecords()).apply(k, value)
        except ValueError:
            continue
    return {g: r for g, r in groups.items() if r != ShareGroupRecords()}
