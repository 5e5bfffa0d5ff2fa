"""A streams group's records in ``__consumer_offsets``, in Kafka 4.4's key/value schemas (record types 17-23 of
``tidelake/protocol/schemas/StreamsGroup*.json``), so a restarted broker, or a new coordinator in a cluster, keeps
the group: its topology, epochs, members, target and current assignments. Members' sessions and revocation
timers start again at load; the shutdown request and task offsets are not recorded (Kafka's are not either).

``records(group)`` is the group's whole durable state as {key: value}; the coordinator writes what differs from
what it wrote before (``changes``: new values and tombstones) and ``rebuild`` makes the group again from the records
a replay found. ``StreamsGroupMetadataValue.MetadataHash`` holds a hash of the topic partition counts the topology
was configured with (Kafka's is a hash of the topics' metadata image; only equality matters to either).
"""
from __future__ import annotations

import zlib
from typing import Callable

from tidelake.coordinator.record_codec import (decode_key, decode_value, encode_key, encode_value, record_class,
                                               record_type)
from tidelake.coordinator.streams_group import (MEMBER_STATE_BYTES, STABLE, STATIC_LEAVE_EPOCH, UNREVOKED_TASKS,
                                                StreamsGroup, StreamsMember, Tasks)
from tidelake.coordinator.streams_topology import CopartitionGroup, Subtopology, TopicInfo, Topology

STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23

_NAMES = {STREAMS_GROUP_METADATA: "StreamsGroupMetadata", STREAMS_GROUP_MEMBER_METADATA: "StreamsGroupMemberMetadata",
          STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: "StreamsGroupTargetAssignmentMetadata",
          STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: "StreamsGroupTargetAssignmentMember",
          STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: "StreamsGroupCurrentMemberAssignment",
          STREAMS_GROUP_TOPOLOGY: "StreamsGroupTopology"}
_KEYS = {t: record_class(n + "Key") for t, n in _NAMES.items()}
_VALUES = {t: record_class(n + "Value") for t, n in _NAMES.items()}
_MEMBER_KEYED = (STREAMS_GROUP_MEMBER_METADATA, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
                 STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT)
_STATES_BY_BYTE = {b: name for name, b in MEMBER_STATE_BYTES.items()}


def is_streams_record(key: bytes) -> bool:
    return len(key) >= 2 and record_type(key) in _NAMES


def key_of(key: bytes) -> tuple[int, str, str | None]:
    """(record type, group id, member id or None)."""
    t = record_type(key)
    k = decode_key(_KEYS[t], key)
    return t, k.group_id, (k.member_id if t in _MEMBER_KEYED else None)


def _key(t: int, group_id: str, member_id: str | None = None) -> bytes:
    fields = {"group_id": group_id}
    if t in _MEMBER_KEYED:
        fields["member_id"] = member_id or ""
    return encode_key(t, _KEYS[t](version=0, **fields))


def _task_ids(cls, tasks) -> list:
    by: dict[str, list[int]] = {}
    for sid, p in sorted(tasks):
        by.setdefault(sid, []).append(p)
    return [cls(subtopology_id=sid, partitions=ps) for sid, ps in by.items()]


def _tasks_from(wire) -> frozenset:
    return frozenset((t.subtopology_id, p) for t in wire or () for p in t.partitions)


def metadata_hash(snapshot: dict[str, int | None]) -> int:
    text = ",".join(f"{t}={n}" for t, n in sorted(snapshot.items()))
    return zlib.crc32(text.encode())


def records(g: StreamsGroup) -> dict[bytes, bytes]:
    """The group's durable state as its records (none once it is dead)."""
    if g.dead:
        return {}
    gid = g.group_id
    out: dict[bytes, bytes] = {}
    V = _VALUES[STREAMS_GROUP_METADATA]
    validated = g.topology.epoch if g.configured is not None and g.configured.ready and g.topology else -1
    out[_key(STREAMS_GROUP_METADATA, gid)] = encode_value(V(
        version=0, epoch=g.group_epoch, metadata_hash=metadata_hash(g.metadata_snapshot),
        validated_topology_epoch=validated, last_assignment_configs=None, stored_description_topology_epoch=-1,
        failed_description_topology_epoch=-1))
    if g.topology is not None:
        out[_key(STREAMS_GROUP_TOPOLOGY, gid)] = _topology_value(g.topology)
    V = _VALUES[STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA]
    out[_key(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, gid)] = encode_value(
        V(version=0, assignment_epoch=g.assignment_epoch, assignment_timestamp=0))
    for mid, m in g.members.items():
        V = _VALUES[STREAMS_GROUP_MEMBER_METADATA]
        endpoint = V.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]) if m.user_endpoint else None
        out[_key(STREAMS_GROUP_MEMBER_METADATA, gid, mid)] = encode_value(V(
            version=0, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms, topology_epoch=m.topology_epoch, process_id=m.process_id,
            user_endpoint=endpoint,
            client_tags=[V.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())]))
        target = g.target.get(mid)
        if target is not None:
            V = _VALUES[STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER]
            out[_key(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, mid)] = encode_value(V(
                version=0, active_tasks=_task_ids(V.TaskIds, target.active),
                standby_tasks=_task_ids(V.TaskIds, target.standby), warmup_tasks=_task_ids(V.TaskIds, target.warmup)))
        V = _VALUES[STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT]
        # a departed static member is recorded with epoch -2 (its epoch in PreviousMemberEpoch), as Kafka's
        epoch, previous = (STATIC_LEAVE_EPOCH, m.epoch) if m.departed else (m.epoch, m.previous_epoch)
        a, r = m.assigned, m.pending_revocation
        out[_key(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, mid)] = encode_value(V(
            version=0, member_epoch=epoch, previous_member_epoch=previous, state=MEMBER_STATE_BYTES[m.state],
            active_tasks=_task_ids(V.TaskIds, a.active), standby_tasks=_task_ids(V.TaskIds, a.standby),
            warmup_tasks=_task_ids(V.TaskIds, a.warmup),
            active_tasks_pending_revocation=_task_ids(V.TaskIds, r.active),
            standby_tasks_pending_revocation=_task_ids(V.TaskIds, r.standby),
            warmup_tasks_pending_revocation=_task_ids(V.TaskIds, r.warmup)))
    return out


def _topology_value(t: Topology) -> bytes:
    V = _VALUES[STREAMS_GROUP_TOPOLOGY]
    S = V.Subtopology
    I = S.TopicInfo

    def info(i: TopicInfo):
        return I(name=i.name, partitions=i.partitions, replication_factor=i.replication_factor,
                 topic_configs=[I.TopicConfig(key=k, value=v) for k, v in i.configs])
    return encode_value(V(version=0, epoch=t.epoch, subtopologies=[
        S(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics), source_topic_regex=[],
          state_changelog_topics=[info(i) for i in s.state_changelog_topics],
          repartition_sink_topics=list(s.repartition_sink_topics),
          repartition_source_topics=[info(i) for i in s.repartition_source_topics],
          copartition_groups=[S.CopartitionGroup(source_topics=list(c.source_topics), source_topic_regex=[],
                                                 repartition_source_topics=list(c.repartition_source_topics))
                              for c in s.copartition_groups])
        for s in t.subtopologies]))


def changes(old: dict[bytes, bytes], new: dict[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """The records that turn ``old`` into ``new``: changed values, then tombstones (member records before the
    group's own, as Kafka orders a deletion)."""
    out: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in new.items() if old.get(k) != v]
    gone = [k for k in old if k not in new]
    gone.sort(key=lambda k: (record_type(k) not in _MEMBER_KEYED, k))
    out.extend((k, None) for k in gone)
    return out


def rebuild(group_id: str, recs: dict[bytes, bytes], now_ms: int, *,
            partitions_of: Callable[[str], int | None], **settings) -> StreamsGroup | None:
    """The group from its replayed records (None without its StreamsGroupMetadata record: no group); every
    member's session starts now, as does the rebalance timeout of one still revoking."""
    by_type: dict[int, dict[str | None, object]] = {}
    for k, v in recs.items():
        t, _gid, mid = key_of(k)
        by_type.setdefault(t, {})[mid] = decode_value(_VALUES[t], v)
    meta = by_type.get(STREAMS_GROUP_METADATA, {}).get(None)
    if meta is None:
        return None
    g = StreamsGroup(group_id, partitions_of=partitions_of, **settings)
    g.group_epoch = meta.epoch
    assignment = by_type.get(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, {}).get(None)
    g.assignment_epoch = assignment.assignment_epoch if assignment is not None else 0
    topology = by_type.get(STREAMS_GROUP_TOPOLOGY, {}).get(None)
    if topology is not None:
        g.topology = _topology_from(topology)
        # configured again from the topics as they are now; the group epoch moves only if they changed since
        snapshot = {t: partitions_of(t) for t in g.topic_names()}
        g.configure_with(snapshot)
        if metadata_hash(snapshot) != meta.metadata_hash:
            g.group_epoch += 1
    for mid, mm in by_type.get(STREAMS_GROUP_MEMBER_METADATA, {}).items():
        endpoint = (mm.user_endpoint.host, mm.user_endpoint.port) if mm.user_endpoint is not None else None
        m = StreamsMember(mid, mm.instance_id, mm.rack_id, mm.client_id, mm.client_host, mm.rebalance_timeout_ms,
                          mm.topology_epoch, mm.process_id, endpoint, {kv.key: kv.value for kv in mm.client_tags or ()},
                          now_ms)
        a = by_type.get(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, {}).get(mid)
        if a is not None:
            if a.member_epoch == STATIC_LEAVE_EPOCH:
                m.departed, m.epoch = True, a.previous_member_epoch
            else:
                m.epoch, m.previous_epoch = a.member_epoch, a.previous_member_epoch
            m.state = _STATES_BY_BYTE.get(a.state, STABLE)
            m.assigned = Tasks(_tasks_from(a.active_tasks), _tasks_from(a.standby_tasks), _tasks_from(a.warmup_tasks))
            m.pending_revocation = Tasks(_tasks_from(a.active_tasks_pending_revocation),
                                         _tasks_from(a.standby_tasks_pending_revocation),
                                         _tasks_from(a.warmup_tasks_pending_revocation))
            if m.state == UNREVOKED_TASKS:
                m.revocation_deadline_ms = now_ms + m.rebalance_timeout_ms
        g.members[mid] = m
        if m.instance_id is not None:
            g.static_members[m.instance_id] = mid
    for mid, t in by_type.get(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, {}).items():
        if mid in g.members:
            g.target[mid] = Tasks(_tasks_from(t.active_tasks), _tasks_from(t.standby_tasks),
                                  _tasks_from(t.warmup_tasks))
    return g


def _topology_from(v) -> Topology:
    def info(i) -> TopicInfo:
        return TopicInfo(i.name, i.partitions, i.replication_factor,
                         tuple((c.key, c.value) for c in i.topic_configs or ()))
    return Topology(v.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.repartition_sink_topics),
                    tuple(info(i) for i in s.state_changelog_topics),
                    tuple(info(i) for i in s.repartition_source_topics),
                    tuple(CopartitionGroup(tuple(c.source_topics), tuple(c.repartition_source_topics))
                          for c in s.copartition_groups))
        for s in v.subtopologies))
