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

A ``None`` value is a tombstone (offset deleted / group deleted); the topic is compacted, so the
latest record per key is the state.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable, Iterator

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


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupKey(r.string() or "")
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


# ---- in-memory store ------------------------------------------------------------------------------

class OffsetStore:
    """Committed offsets per group, the materialized view of ``__consumer_offsets``.

    The coordinator appends the records first and then applies them here (``apply_record``), and
    ``on_start`` replays the whole topic through ``apply_record`` — one code path for both.
    """

    def __init__(self) -> None:
        self._offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.groups: dict[str, GroupMetadataRecord] = {}  # last GroupMetadataValue per group

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group, {}).get((topic, partition))

    def group_offsets(self, group: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return dict(self._offsets.get(group, {}))

    def has_offsets(self, group: str) -> bool:
        return bool(self._offsets.get(group))

    def known_groups(self) -> set[str]:
        return set(g for g, offs in self._offsets.items() if offs) | set(self.groups)

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

    def apply_record(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            if value is None:
                self.delete(k.group, k.topic, k.partition)
            else:
                self.put(k.group, k.topic, k.partition, decode_offset_value(value))
        else:
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = decode_group_value(value)


def offset_records(group: str, offsets: Iterable[tuple[str, int, OffsetAndMetadata | None]]) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) records for commits; a None offset is a tombstone."""
    for topic, partition, om in offsets:
        yield offset_commit_key(group, topic, partition), (None if om is None else offset_commit_value(om))
