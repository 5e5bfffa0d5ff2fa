"""``__consumer_offsets``: Kafka's record key/value formats, the coordinator partition, the offset store.

Record formats (Kafka's group-coordinator message specs; big-endian, non-flexible versions):

- key version 0/1 ``OffsetCommitKey``: ``int16 version, string group, string topic, int32 partition``
- value ``OffsetCommitValue`` v3: ``int16 3, int64 offset, int32 leaderEpoch, string metadata,
  int64 commitTimestamp`` (v1 adds expireTimestamp; v0/v1/v2 are read, v3 is written)
- key version 2 ``GroupMetadataKey``: ``int16 2, string group``
- value ``GroupMetadataValue`` v3: ``int16 3, string protocolType, int32 generation,
  nullable string protocol, nullable string leader, int64 currentStateTimestamp,
  [member: string memberId, nullable string groupInstanceId, string clientId, string clientHost,
  int32 rebalanceTimeout, int32 sessionTimeout, bytes subscription, bytes assignment]``
  (v0..v3 read; v4 is the flexible encoding and is not produced here)

KIP-848 consumer groups (Kafka 4.0's records; key = ``int16 record type`` + non-flexible body,
value = ``int16 0`` + flexible body; codec: kafka-python's schema-driven ``ApiData`` over Kafka's JSON
specs in ``tidelake/protocol/schemas/ConsumerGroup*Key|Value.json``):

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

import struct
import types
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from kafka.protocol.api_data import ApiData

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_OFFSETS_PARTITIONS = 50

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def partition_for(group_id: str, num_partitions: int = DEFAULT_OFFSETS_PARTITIONS) -> int:
    """``abs(javaStringHash(group.id)) % offsets.topic.num.partitions`` (Kafka's Utils.abs: MIN -> 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# ---- primitive codecs --------------------------------------------------------------------------

class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> "_Writer":
        self.parts.append(struct.pack(">h", v)); return self

    def i32(self, v: int) -> "_Writer":
        self.parts.append(struct.pack(">i", v)); return self

    def i64(self, v: int) -> "_Writer":
        self.parts.append(struct.pack(">q", v)); return self

    def string(self, v: str | None) -> "_Writer":
        if v is None:
            return self.i16(-1)
        b = v.encode()
        self.i16(len(b)); self.parts.append(b); return self

    def bytes_(self, v: bytes | None) -> "_Writer":
        if v is None:
            return self.i32(-1)
        self.i32(len(v)); self.parts.append(bytes(v)); return self

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data); self.pos = 0

    def _unpack(self, fmt: str, n: int) -> int:
        if self.pos + n > len(self.data):
            raise ValueError("truncated coordinator record")
        (v,) = struct.unpack_from(fmt, self.data, self.pos); self.pos += n; return v

    def i16(self) -> int: return self._unpack(">h", 2)
    def i32(self) -> int: return self._unpack(">i", 4)
    def i64(self) -> int: return self._unpack(">q", 8)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = bytes(self.data[self.pos:self.pos + n]).decode(); self.pos += n; return v

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        v = bytes(self.data[self.pos:self.pos + n]); self.pos += n; return v


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
    return _Writer().i16(OFFSET_COMMIT_KEY_VERSION).string(group).string(topic).i32(partition).done()


def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    return (_Writer().i16(OFFSET_COMMIT_VALUE_VERSION).i64(om.offset).i32(om.leader_epoch)
            .string(om.metadata or "").i64(om.commit_timestamp_ms).done())


def group_metadata_key(group: str) -> bytes:
    return _Writer().i16(GROUP_METADATA_KEY_VERSION).string(group).done()


def group_metadata_value(g: GroupMetadataRecord) -> bytes:
    w = (_Writer().i16(GROUP_METADATA_VALUE_VERSION).string(g.protocol_type).i32(g.generation)
         .string(g.protocol).string(g.leader).i64(g.current_state_timestamp_ms).i32(len(g.members)))
    for m in g.members:
        (w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
         .i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment))
    return w.done()


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


def decode_key(data: bytes) -> "OffsetKey | GroupKey | ConsumerGroupKey":
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupKey(r.string() or "")
    if version in _KEY_CLASSES:
        body = _decode_body(_KEY_CLASSES[version], bytes(data[2:]), header=False)
        return ConsumerGroupKey(version, body.group_id, getattr(body, "member_id", None))
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.i16()
    if version > 3:
        raise ValueError(f"OffsetCommitValue v{version} (flexible) is not read here")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    ts = r.i64()
    return OffsetAndMetadata(offset, leader_epoch, metadata, ts)


def decode_group_value(data: bytes) -> GroupMetadataRecord:
    r = _Reader(data)
    version = r.i16()
    if version > 3:
        raise ValueError(f"GroupMetadataValue v{version} (flexible) is not read here")
    g = GroupMetadataRecord(r.string() or "", r.i32(), r.string(), r.string())
    if version >= 2:
        g.current_state_timestamp_ms = r.i64()
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id, client_host = r.string() or "", r.string() or ""
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        g.members.append(MemberRecord(member_id, instance, client_id, client_host, rebalance, session,
                                      r.bytes_() or b"", r.bytes_() or b""))
    return g


# ---- KIP-848 consumer group records ------------------------------------------------------------

_SCHEMAS = "tidelake.protocol.schemas"


def _coordinator_record_class(name: str) -> type:
    """A kafka-python ``ApiData`` class for one of Kafka's coordinator record specs. Kafka marks them
    ``coordinator-key`` / ``coordinator-value``; kafka-python's ApiData codes ``data`` specs, and the
    wire layout is the same (an int16 prefix, then the fields)."""
    def body(ns: dict) -> None:
        ns["__module__"] = __name__
        ns["json_patch"] = classmethod(lambda mcls, j: {**j, "type": "data"})
    return types.new_class(name, (ApiData,), {"load_json": _SCHEMAS}, body)


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
_KEY_CLASSES = {t: _coordinator_record_class(n + "Key") for t, n in _RECORD_NAMES.items()}
_VALUE_CLASSES = {t: _coordinator_record_class(n + "Value") for t, n in _RECORD_NAMES.items()}
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
        v = _decode_body(_VALUE_CLASSES[t], bytes(value), header=True)
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


def _decode_body(cls, data: bytes, *, header: bool):
    """Decode a coordinator record body (version 0, the only one Kafka defines for these), raising
    ValueError for another version or a malformed body, as the other record decoders do."""
    if header:
        if len(data) < 2 or struct.unpack_from(">h", data)[0] != 0:
            raise ValueError(f"{cls.__name__}: only version 0 is known")
        data = data[2:]
    try:
        return cls.decode(data, version=0, header=False)
    except (ValueError, struct.error, EOFError, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"malformed {cls.__name__}: {e}") from e


def _partitions_from_wire(topic_partitions) -> PartitionsById:
    return {tp.topic_id: tuple(sorted(tp.partitions)) for tp in topic_partitions or ()}


def consumer_group_key(record_type: int, group: str, member_id: str | None = None) -> bytes:
    fields = {"group_id": group}
    if record_type in _MEMBER_KEYED:
        fields["member_id"] = member_id or ""
    body = _KEY_CLASSES[record_type](version=0, **fields).encode(version=0, header=False)
    return struct.pack(">h", record_type) + body


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
    return bytes(v.encode(version=0))


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
