"""``__consumer_offsets``: the record key/value types of groups and offsets, and the offset store.

Records (Kafka's group-coordinator message specs, ``tidelake/protocol/schemas/<Name>.json``, coded
by ``record_codec``; a key starts with its int16 record type, a value with its int16 version):

- type 0/1 ``OffsetCommitKey`` (group, topic, partition) -> ``OffsetCommitValue`` (offset, leader
  epoch, metadata, commit timestamp); v3 is written, v0..v4 are read
- type 2 ``GroupMetadataKey`` (group) -> ``GroupMetadataValue`` (classic group: protocol type,
  generation, protocol, leader, members with their subscription and assignment); v3 is written,
  v0..v4 are read

KIP-848 consumer groups (Kafka 4.0's records; every value is version 0, flexible):

- type 3 ``ConsumerGroupMetadata`` (group) -> ``Epoch`` (the group epoch)
- type 4 ``ConsumerGroupPartitionMetadata`` (group) -> the subscribed topics (id, name, partitions)
- type 5 ``ConsumerGroupMemberMetadata`` (group, member) -> instance, rack, client, subscription, assignor
- type 6 ``ConsumerGroupTargetAssignmentMetadata`` (group) -> ``AssignmentEpoch``
- type 7 ``ConsumerGroupTargetAssignmentMember`` (group, member) -> the member's target partitions
- type 8 ``ConsumerGroupCurrentMemberAssignment`` (group, member) -> member epoch, previous epoch,
  state, assigned partitions, partitions pending revocation

A ``None`` value is a tombstone (offset deleted / member left / group deleted); the topic is
compacted, so the latest record per key is the state.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from tidelake.coordinator.record_codec import (decode_key as decode_record_key,
                                               decode_value as decode_record_value, encode_key, encode_value,
                                               record_class, record_type)
# part of this module's API: the group coordinator's partition of a group id
from tidelake.coordinator.record_codec import partition_for  # noqa: F401

OFFSETS_TOPIC = "__consumer_offsets"

# key record types (the key's int16 prefix; Kafka's "apiKey" of the key spec)
LEGACY_OFFSET_COMMIT_KEY = 0  # read only: the same body as OFFSET_COMMIT_KEY
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2
# value versions written (the newest non-flexible ones, which every Kafka reads)
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_OffsetCommitKey = record_class("OffsetCommitKey")
_OffsetCommitValue = record_class("OffsetCommitValue")
_GroupMetadataKey = record_class("GroupMetadataKey")
_GroupMetadataValue = record_class("GroupMetadataValue")


# ---- records ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: list[MemberRecord] = field(default_factory=list)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return encode_key(OFFSET_COMMIT_KEY, _OffsetCommitKey(version=0, group=group, topic=topic, partition=partition))


def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    return encode_value(_OffsetCommitValue(
        version=OFFSET_COMMIT_VALUE_VERSION, offset=om.offset, leader_epoch=om.leader_epoch,
        metadata=om.metadata or "", commit_timestamp=om.commit_timestamp_ms))


def group_metadata_key(group: str) -> bytes:
    return encode_key(GROUP_METADATA_KEY, _GroupMetadataKey(version=0, group=group))


def group_metadata_value(g: GroupMetadataRecord) -> bytes:
    M = _GroupMetadataValue.MemberMetadata
    return encode_value(_GroupMetadataValue(
        version=GROUP_METADATA_VALUE_VERSION, protocol_type=g.protocol_type, generation=g.generation,
        protocol=g.protocol, leader=g.leader, current_state_timestamp=g.current_state_timestamp_ms,
        members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                   client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                   session_timeout=m.session_timeout_ms, subscription=m.subscription, assignment=m.assignment)
                 for m in g.members]))


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


def decode_key(data: bytes) -> "OffsetKey | GroupKey | ConsumerGroupKey":
    t = record_type(data)
    if t in (LEGACY_OFFSET_COMMIT_KEY, OFFSET_COMMIT_KEY):
        k = decode_record_key(_OffsetCommitKey, data)
        return OffsetKey(k.group or "", k.topic or "", k.partition)
    if t == GROUP_METADATA_KEY:
        return GroupKey(decode_record_key(_GroupMetadataKey, data).group or "")
    if t in _MEMBER_KEYED:
        k = decode_record_key(_KEY_CLASSES[t], data)
        return ConsumerGroupKey(t, k.group_id, k.member_id)
    if t in _KEY_CLASSES:
        return ConsumerGroupKey(t, decode_record_key(_KEY_CLASSES[t], data).group_id)
    raise ValueError(f"unknown __consumer_offsets key version {t}")


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    v = decode_record_value(_OffsetCommitValue, data)
    return OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata or "", v.commit_timestamp)


def decode_group_value(data: bytes) -> GroupMetadataRecord:
    v = decode_record_value(_GroupMetadataValue, data)
    return GroupMetadataRecord(
        v.protocol_type or "", v.generation, v.protocol, v.leader, v.current_state_timestamp,
        [MemberRecord(m.member_id or "", m.group_instance_id, m.client_id or "", m.client_host or "",
                      # v0 has no rebalance timeout (Kafka reads it as the session timeout; -1 says "absent")
                      m.rebalance_timeout if v.version >= 1 else -1, m.session_timeout,
                      bytes(m.subscription or b""), bytes(m.assignment or b"")) for m in v.members or ()])


# ---- KIP-848 consumer group records ------------------------------------------------------------

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8

_RECORD_NAMES = {
    CONSUMER_GROUP_METADATA: "ConsumerGroupMetadata",
    CONSUMER_GROUP_PARTITION_METADATA: "ConsumerGroupPartitionMetadata",
    CONSUMER_GROUP_MEMBER_METADATA: "ConsumerGroupMemberMetadata",
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: "ConsumerGroupTargetAssignmentMetadata",
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: "ConsumerGroupTargetAssignmentMember",
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignment",
}
_KEY_CLASSES = {t: record_class(n + "Key") for t, n in _RECORD_NAMES.items()}
_VALUE_CLASSES = {t: record_class(n + "Value") for t, n in _RECORD_NAMES.items()}
_MEMBER_KEYED = (CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                 CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT)

# Kafka's MemberState byte values (org.apache.kafka.coordinator.group.modern.MemberState)
MEMBER_STATE_STABLE = 0
MEMBER_STATE_UNREVOKED_PARTITIONS = 1
MEMBER_STATE_UNRELEASED_PARTITIONS = 2

# partitions by topic id, as the records hold them: {topic id: (partition, ...)} sorted
PartitionsById = dict[uuid.UUID, tuple[int, ...]]


@dataclass(frozen=True)
class ConsumerGroupKey:
    record_type: int  # 3..8
    group: str
    member_id: str | None = None


@dataclass
class ConsumerMemberMetadata:
    """ConsumerGroupMemberMetadataValue."""
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass
class ConsumerMemberAssignment:
    """ConsumerGroupCurrentMemberAssignmentValue."""
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: PartitionsById = field(default_factory=dict)
    pending_revocation: PartitionsById = field(default_factory=dict)


@dataclass
class ConsumerGroupRecords:
    """The durable state of one KIP-848 group, exactly what its records in ``__consumer_offsets`` hold
    (topic ids, not names). ``epoch is None``: no ConsumerGroupMetadata record (no group)."""
    epoch: int | None = None
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] | None = None  # name -> (id, partitions)
    members: dict[str, ConsumerMemberMetadata] = field(default_factory=dict)
    assignment_epoch: int | None = None
    target: dict[str, PartitionsById] = field(default_factory=dict)
    current: dict[str, ConsumerMemberAssignment] = field(default_factory=dict)

    def apply(self, key: ConsumerGroupKey, value: bytes | None) -> None:
        t, mid = key.record_type, key.member_id
        if value is None:
            if t == CONSUMER_GROUP_METADATA:
                self.epoch = None
            elif t == CONSUMER_GROUP_PARTITION_METADATA:
                self.subscription_metadata = None
            elif t == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
                self.assignment_epoch = None
            else:
                {CONSUMER_GROUP_MEMBER_METADATA: self.members, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: self.target,
                 CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: self.current}[t].pop(mid, None)
            return
        v = decode_record_value(_VALUE_CLASSES[t], value)
        if t == CONSUMER_GROUP_METADATA:
            self.epoch = v.epoch
        elif t == CONSUMER_GROUP_PARTITION_METADATA:
            self.subscription_metadata = {tm.topic_name: (tm.topic_id, tm.num_partitions) for tm in v.topics}
        elif t == CONSUMER_GROUP_MEMBER_METADATA:
            self.members[mid] = ConsumerMemberMetadata(
                v.instance_id, v.rack_id, v.client_id, v.client_host, list(v.subscribed_topic_names),
                v.subscribed_topic_regex, v.rebalance_timeout_ms, v.server_assignor)
        elif t == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = v.assignment_epoch
        elif t == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            self.target[mid] = _partitions_from_wire(v.topic_partitions)
        else:
            self.current[mid] = ConsumerMemberAssignment(
                v.member_epoch, v.previous_member_epoch, v.state, _partitions_from_wire(v.assigned_partitions),
                _partitions_from_wire(v.partitions_pending_revocation))


def _partitions_from_wire(topic_partitions) -> PartitionsById:
    return {tp.topic_id: tuple(sorted(tp.partitions)) for tp in topic_partitions or ()}


def consumer_group_key(record_type: int, group: str, member_id: str | None = None) -> bytes:
    fields = {"group_id": group}
    if record_type in _MEMBER_KEYED:
        fields["member_id"] = member_id or ""
    return encode_key(record_type, _KEY_CLASSES[record_type](version=0, **fields))


def consumer_group_value(record_type: int, state: object) -> bytes:
    """The value record of type ``record_type`` for ``state`` (an int epoch, the subscription
    metadata dict, a ConsumerMemberMetadata, a PartitionsById or a ConsumerMemberAssignment)."""
    V = _VALUE_CLASSES[record_type]
    if record_type == CONSUMER_GROUP_METADATA:
        v = V(version=0, epoch=state)
    elif record_type == CONSUMER_GROUP_PARTITION_METADATA:
        T = V.TopicMetadata
        v = V(version=0, topics=[T(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
                                 for name, (tid, n) in sorted(state.items())])
    elif record_type == CONSUMER_GROUP_MEMBER_METADATA:
        m: ConsumerMemberMetadata = state
        v = V(version=0, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
              client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
              subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
              server_assignor=m.server_assignor, classic_member_metadata=None)
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        v = V(version=0, assignment_epoch=state)
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        v = V(version=0, topic_partitions=_partitions_to_wire(V.TopicPartition, state))
    else:
        a: ConsumerMemberAssignment = state
        v = V(version=0, member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
              state=a.state, assigned_partitions=_partitions_to_wire(V.TopicPartitions, a.assigned),
              partitions_pending_revocation=_partitions_to_wire(V.TopicPartitions, a.pending_revocation))
    return encode_value(v)


def _partitions_to_wire(cls, partitions: PartitionsById) -> list:
    return [cls(topic_id=tid, partitions=list(ps)) for tid, ps in sorted(partitions.items(), key=lambda kv: str(kv[0]))]


def _changed(old: object, new: object) -> bool:
    return old is not new and old != new  # (unchanged members are the same objects: skip comparing)


def consumer_group_records(group: str, old: ConsumerGroupRecords, new: ConsumerGroupRecords,
                           members: Iterable[str] | None = None) -> list[tuple[bytes, bytes | None]]:
    """The records that turn ``old`` into ``new`` (Kafka's order: a leaving member's current
    assignment, target and metadata tombstones first; a deleted group's metadata tombstones last).
    ``members``: the only member ids that may differ (None: any)."""
    out: list[tuple[bytes, bytes | None]] = []
    key = consumer_group_key
    if members is None:
        members = (old.members.keys() | old.target.keys() | old.current.keys() | new.members.keys()
                   | new.target.keys() | new.current.keys())
    members = sorted(members)

    def per_member(record_type: int, old_records: dict, new_records: dict) -> None:
        for mid in members:
            value = new_records.get(mid)
            if value is None:
                if mid in old_records and mid in new.members:  # (a leaving member's: written above)
                    out.append((key(record_type, group, mid), None))
            elif _changed(old_records.get(mid), value):
                out.append((key(record_type, group, mid), consumer_group_value(record_type, value)))

    for mid in members:  # members that left
        if mid in new.members:
            continue
        if mid in old.current and mid not in new.current:
            out.append((key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group, mid), None))
        if mid in old.target and mid not in new.target:
            out.append((key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group, mid), None))
        if mid in old.members:
            out.append((key(CONSUMER_GROUP_MEMBER_METADATA, group, mid), None))
    per_member(CONSUMER_GROUP_MEMBER_METADATA, old.members, new.members)
    if new.subscription_metadata is not None and new.subscription_metadata != old.subscription_metadata:
        out.append((key(CONSUMER_GROUP_PARTITION_METADATA, group),
                    consumer_group_value(CONSUMER_GROUP_PARTITION_METADATA, new.subscription_metadata)))
    if new.epoch is not None and new.epoch != old.epoch:
        out.append((key(CONSUMER_GROUP_METADATA, group), consumer_group_value(CONSUMER_GROUP_METADATA, new.epoch)))
    per_member(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, old.target, new.target)
    if new.assignment_epoch is not None and new.assignment_epoch != old.assignment_epoch:
        out.append((key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group),
                    consumer_group_value(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, new.assignment_epoch)))
    per_member(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, old.current, new.current)
    # the group itself going away
    if new.assignment_epoch is None and old.assignment_epoch is not None:
        out.append((key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group), None))
    if new.subscription_metadata is None and old.subscription_metadata is not None:
        out.append((key(CONSUMER_GROUP_PARTITION_METADATA, group), None))
    if new.epoch is None and old.epoch is not None:
        out.append((key(CONSUMER_GROUP_METADATA, group), None))
    return out


# ---- in-memory store ------------------------------------------------------------------------------

class OffsetStore:
    """Committed offsets per group, the materialized view of ``__consumer_offsets``.

    The coordinator appends the records first and then applies them here (``apply_record``), and
    ``on_start`` replays the whole topic through ``apply_record`` — one code path for both.
    """

    def __init__(self) -> None:
        self._offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.groups: dict[str, GroupMetadataRecord] = {}  # last GroupMetadataValue per group
        self.consumer_groups: dict[str, ConsumerGroupRecords] = {}  # KIP-848 groups' records

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group, {}).get((topic, partition))

    def group_offsets(self, group: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return dict(self._offsets.get(group, {}))

    def has_offsets(self, group: str) -> bool:
        return bool(self._offsets.get(group))

    def known_groups(self) -> set[str]:
        return (set(g for g, offs in self._offsets.items() if offs) | set(self.groups)
                | {g for g, r in self.consumer_groups.items() if r.epoch is not None})

    def put(self, group: str, topic: str, partition: int, om: OffsetAndMetadata) -> None:
        self._offsets.setdefault(group, {})[(topic, partition)] = om

    def delete(self, group: str, topic: str, partition: int) -> None:
        offs = self._offsets.get(group)
        if offs is not None:
            offs.pop((topic, partition), None)
            if not offs:
                del self._offsets[group]

    def delete_group(self, group: str) -> None:
        self._offsets.pop(group, None)
        self.groups.pop(group, None)
        self.consumer_groups.pop(group, None)

    def consumer_group_records(self, group: str) -> ConsumerGroupRecords:
        """The KIP-848 records of ``group`` as applied so far (empty if none)."""
        return self.consumer_groups.get(group) or ConsumerGroupRecords()

    def apply_record(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            if value is None:
                self.delete(k.group, k.topic, k.partition)
            else:
                self.put(k.group, k.topic, k.partition, decode_offset_value(value))
        elif isinstance(k, ConsumerGroupKey):
            rec = self.consumer_groups.setdefault(k.group, ConsumerGroupRecords())
            rec.apply(k, value)
            if rec == ConsumerGroupRecords():
                del self.consumer_groups[k.group]  # every record of the group tombstoned
        else:
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = decode_group_value(value)


def offset_records(group: str, offsets: Iterable[tuple[str, int, OffsetAndMetadata | None]]) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) records for commits; a None offset is a tombstone."""
    for topic, partition, om in offsets:
        yield offset_commit_key(group, topic, partition), (None if om is None else offset_commit_value(om))
