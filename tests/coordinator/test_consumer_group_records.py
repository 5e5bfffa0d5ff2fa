"""KIP-848 groups in __consumer_offsets: Kafka's ConsumerGroup* record layouts, the diff the
coordinator writes as the state machine moves, and replay after a "restart" (a new coordinator
loading the same records) — members keep ids, epochs, assignments and pending revocations."""
from __future__ import annotations

import struct
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelake import errors
from tidelake.coordinator.assignors import TopicPartition as TP
from tidelake.coordinator import consumer_group as consumer_group_module
from tidelake.coordinator.consumer_group import ConsumerGroup
from tidelake.coordinator.group import ClassicGroup
from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.group_coordinator import GroupCoordinator
from tidelake.coordinator.offsets import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, ConsumerGroupKey, ConsumerGroupRecords, ConsumerMemberAssignment,
    ConsumerMemberMetadata, OffsetStore, consumer_group_key, consumer_group_records, consumer_group_value, decode_key,
)

T_ID = uuid.UUID("00000000-0000-0000-0000-0000000000aa")
U_ID = uuid.UUID("00000000-0000-0000-0000-0000000000bb")


# ---- byte layouts ------------------------------------------------------------------------------

def test_keys_are_kafkas_record_type_then_fields():
    assert consumer_group_key(CONSUMER_GROUP_METADATA, "g") == struct.pack(">hh1s", 3, 1, b"g")
    assert consumer_group_key(CONSUMER_GROUP_PARTITION_METADATA, "g") == struct.pack(">hh1s", 4, 1, b"g")
    for record_type in (5, 7, 8):
        assert consumer_group_key(record_type, "g", "m1") == struct.pack(">hh1sh2s", record_type, 1, b"g", 2, b"m1")
    assert consumer_group_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, "grp") == struct.pack(">hh3s", 6, 3, b"grp")
    assert decode_key(struct.pack(">hh1sh2s", 8, 1, b"g", 2, b"m1")) == ConsumerGroupKey(8, "g", "m1")
    assert decode_key(struct.pack(">hh1s", 3, 1, b"g")) == ConsumerGroupKey(3, "g", None)


def test_values_are_kafkas_flexible_layouts():
    # ConsumerGroupMetadataValue v0: int16 version, int32 epoch, empty tagged fields
    assert consumer_group_value(CONSUMER_GROUP_METADATA, 7) == b"\x00\x00" + struct.pack(">i", 7) + b"\x00"
    assert consumer_group_value(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 9) == b"\x00\x00\x00\x00\x00\x09\x00"
    # ConsumerGroupCurrentMemberAssignmentValue v0: epoch, previous epoch, state (int8), then compact
    # arrays of (uuid topic id, compact int32 array, tags), then the message's tags
    value = consumer_group_value(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                 ConsumerMemberAssignment(5, 4, 1, {T_ID: (0, 2)}, {}))
    assert value == (b"\x00\x00" + struct.pack(">iib", 5, 4, 1)
                     + b"\x02" + T_ID.bytes + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
                     + b"\x01" + b"\x00")
    # ConsumerGroupMemberMetadataValue v0: compact (nullable) strings, int32 rebalance timeout
    value = consumer_group_value(CONSUMER_GROUP_MEMBER_METADATA, ConsumerMemberMetadata(
        None, "r", "c", "/h", ["a"], None, 300, "range"))
    assert value == (b"\x00\x00" + b"\x00" + b"\x02r" + b"\x02c" + b"\x03/h" + b"\x02\x02a" + b"\x00"
                     + struct.pack(">i", 300) + b"\x06range" + b"\x00")
    # ConsumerGroupTargetAssignmentMemberValue and ConsumerGroupPartitionMetadataValue
    assert consumer_group_value(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, {T_ID: (1,)}) == (
        b"\x00\x00" + b"\x02" + T_ID.bytes + b"\x02" + struct.pack(">i", 1) + b"\x00" + b"\x00")
    assert consumer_group_value(CONSUMER_GROUP_PARTITION_METADATA, {"t": (T_ID, 3)}) == (
        b"\x00\x00" + b"\x02" + T_ID.bytes + b"\x02t" + struct.pack(">i", 3) + b"\x01" + b"\x00" + b"\x00")


def _sample_state() -> ConsumerGroupRecords:
    return ConsumerGroupRecords(
        epoch=4, subscription_metadata={"t": (T_ID, 3), "u": (U_ID, 1)},
        members={"m1": ConsumerMemberMetadata(None, None, "c1", "/h1", ["t", "u"], None, 5000, None),
                 "m2": ConsumerMemberMetadata("i-2", "rack-a", "c2", "/h2", [], "t|u", 7000, "range")},
        assignment_epoch=4, target={"m1": {T_ID: (0, 1)}, "m2": {T_ID: (2,), U_ID: (0,)}},
        current={"m1": ConsumerMemberAssignment(4, 3, 0, {T_ID: (0, 1)}, {}),
                 "m2": ConsumerMemberAssignment(3, 2, 1, {T_ID: (2,)}, {U_ID: (0,)})})


def test_diff_round_trips_and_tombstones_everything_on_delete():
    state = _sample_state()
    records = consumer_group_records("g", ConsumerGroupRecords(), state)
    store = OffsetStore()
    for k, v in records:
        store.apply_record(k, v)
    assert store.consumer_groups["g"] == state and store.known_groups() == {"g"}
    assert consumer_group_records("g", state, state) == []  # nothing changed: nothing written
    # one member leaves: its three records are tombstoned, first its current assignment
    after = _sample_state()
    for d in (after.members, after.target, after.current):
        del d["m2"]
    after.epoch = 5
    diff = consumer_group_records("g", state, after)
    assert diff[:3] == [(consumer_group_key(8, "g", "m2"), None), (consumer_group_key(7, "g", "m2"), None),
                        (consumer_group_key(5, "g", "m2"), None)]
    assert (consumer_group_key(3, "g"), consumer_group_value(3, 5)) in diff
    for k, v in diff:
        store.apply_record(k, v)
    assert store.consumer_groups["g"] == after
    # the group deleted: every remaining record tombstoned, the group's own last
    gone = consumer_group_records("g", after, ConsumerGroupRecords())
    assert all(v is None for _, v in gone) and gone[-1][0] == consumer_group_key(3, "g")
    for k, v in gone:
        store.apply_record(k, v)
    assert "g" not in store.consumer_groups and store.known_groups() == set()


# ---- the coordinator writing and replaying -----------------------------------------------------

TOPICS = {"t": 4, "u": 2}
IDS = {"t": T_ID, "u": U_ID}


class Log:
    """An in-memory __consumer_offsets: (partition, key, value) in append order."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None]] = []

    def write(self, partition: int, records) -> None:
        self.records += [(partition, k, v) for k, v in records]

    def replay(self) -> list[tuple[bytes, bytes | None]]:
        by_partition: dict[int, list] = {}
        for p, k, v in self.records:
            by_partition.setdefault(p, []).append((k, v))
        return [kv for p in sorted(by_partition) for kv in by_partition[p]]

    def compacted(self) -> list[tuple[bytes, bytes | None]]:
        """What log compaction leaves once tombstones expire: the latest value per key, in order."""
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        for i, (k, v) in enumerate(self.replay()):
            latest[k] = (i, v)
        return [(k, v) for k, (i, v) in sorted(latest.items(), key=lambda kv: kv[1][0]) if v is not None]


def coordinator(log: Log, now_ms: int = 0, records=None, topics=TOPICS) -> GroupCoordinator:
    config = GroupConfig(consumer_session_timeout_ms=10000, consumer_heartbeat_interval_ms=500,
                         consumer_assignors=("range",))
    names = {v: k for k, v in IDS.items()}
    gc = GroupCoordinator(config, write=log.write, partitions_of=topics.get, list_topics=lambda: list(topics),
                          topic_id_of=lambda n: IDS.get(n) if n in topics else None,
                          topic_name_of=lambda i: names.get(i) if names.get(i) in topics else None)
    gc.load(log.replay() if records is None else records, now_ms)
    return gc


def hb(gc, member_id="", epoch=0, now=0, topics=("t",), owned=None, instance=None):
    group = gc.consumer_group("g", create=epoch == 0)
    return group.heartbeat(member_id=member_id, member_epoch=epoch, instance_id=instance, rack_id=None,
                           rebalance_timeout_ms=5000,
                           subscribed_topic_names=list(topics) if topics is not None else None,
                           subscribed_topic_regex=None, server_assignor=None, owned=owned,
                           client_id="c", client_host="/127.0.0.1", now_ms=now)


def view(group) -> dict:
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch, "state": group.state,
            "target": {m: sorted(t) for m, t in group.target.items()},
            "members": {mid: (m.epoch, m.previous_epoch, m.state, sorted(m.assigned), sorted(m.pending_revocation),
                              m.instance_id, m.departed, m.subscribed_topics)
                        for mid, m in group.members.items()}}


def stable_pair(gc):
    """Two members, reconciled to a Stable group (a's epoch 1 -> 2 through a revocation)."""
    a = hb(gc, now=0)
    b = hb(gc, now=1)
    a2 = hb(gc, a.member_id, a.member_epoch, now=2, topics=None, owned=a.assignment)
    a3 = hb(gc, a.member_id, a.member_epoch, now=3, topics=None, owned=a2.assignment)
    b2 = hb(gc, b.member_id, b.member_epoch, now=4, topics=None, owned=[])
    assert gc.groups["g"].state == "Stable" and a3.member_epoch == b2.member_epoch == 2
    return a.member_id, a2.assignment, b.member_id, b2.assignment


def test_stable_group_replays_and_members_continue_without_rebalance():
    log = Log()
    gc = coordinator(log)
    a, a_parts, b, b_parts = stable_pair(gc)
    before = view(gc.groups["g"])
    assert {decode_key(k).record_type for _, k, v in log.records} == {3, 4, 5, 6, 7, 8}

    restarted = coordinator(log, now_ms=100_000)  # the wall clock moved on while the broker was down
    group = restarted.groups["g"]
    assert view(group) == before
    written = len(log.records)
    # the members keep heart-beating with their ids and epochs: accepted, same epoch, same partitions
    ra = hb(restarted, a, 2, now=100_001, topics=None, owned=a_parts)
    rb = hb(restarted, b, 2, now=100_002, topics=None, owned=b_parts)
    assert (ra.error, ra.member_epoch, ra.assignment) == (0, 2, a_parts)  # (re)sent once: unchanged
    assert (rb.error, rb.member_epoch, rb.assignment) == (0, 2, b_parts)
    assert hb(restarted, a, 2, now=100_003, topics=None, owned=a_parts).assignment is None
    assert view(group) == before and len(log.records) == written  # no rebalance, nothing new to write
    # a stale or unknown epoch is still fenced after the replay
    assert hb(restarted, a, 7, now=100_004, topics=None).error == errors.FencedMemberEpoch.code


def test_sessions_restart_at_load_time_and_expiry_writes_tombstones():
    log = Log()
    gc = coordinator(log)
    a, a_parts, b, _ = stable_pair(gc)
    restarted = coordinator(log, now_ms=50_000)
    for now in range(51_000, 60_001, 1000):  # only a keeps heart-beating
        hb(restarted, a, restarted.groups["g"].members[a].epoch, now=now, topics=None,
           owned=sorted(restarted.groups["g"].members[a].assigned))
        restarted.tick(now)
    assert b in restarted.groups["g"].members  # 10 s since the load, not since its last heartbeat
    restarted.tick(60_001)
    assert b not in restarted.groups["g"].members
    assert (decode_key(log.records[-1][1]), log.records[-1][2]) == (ConsumerGroupKey(3, "g"), log.records[-1][2])
    tombstoned = {decode_key(k) for _, k, v in log.records if v is None}
    assert {ConsumerGroupKey(t, "g", b) for t in (5, 7, 8)} <= tombstoned
    # a second restart no longer knows b; a gets everything once it reconciles
    again = coordinator(log, now_ms=70_000)
    assert set(again.groups["g"].members) == {a}
    m = again.groups["g"].members[a]
    r = hb(again, a, m.epoch, now=70_001, topics=None, owned=sorted(m.assigned))
    assert r.error == 0 and sorted(again.groups["g"].members[a].assigned) == [TP("t", p) for p in range(4)]


def test_pending_revocation_survives_restart_and_its_timeout_restarts():
    log = Log()
    gc = coordinator(log)
    a = hb(gc, now=0)
    b = hb(gc, now=1)
    kept = hb(gc, a.member_id, a.member_epoch, now=2, topics=None, owned=a.assignment).assignment
    revoking = sorted(set(a.assignment) - set(kept))
    before = view(gc.groups["g"])
    assert before["members"][a.member_id][2] == "unrevoked_partitions"

    restarted = coordinator(log, now_ms=1_000_000)
    assert view(restarted.groups["g"]) == before
    restarted.tick(1_000_000 + 5000)  # a's rebalance timeout (5 s) counts from the load
    assert a.member_id in restarted.groups["g"].members
    # b still gets nothing a has not given up; once a reports the revocation, b gets it
    assert hb(restarted, b.member_id, b.member_epoch, now=1_000_010, topics=None, owned=[]).assignment in ([], None)
    hb(restarted, a.member_id, a.member_epoch, now=1_000_020, topics=None, owned=kept)
    r = hb(restarted, b.member_id, b.member_epoch, now=1_000_030, topics=None, owned=[])
    assert r.assignment == revoking and restarted.groups["g"].state == "Stable"


def test_rebalance_timeout_fences_a_member_that_never_revokes_after_restart():
    log = Log()
    gc = coordinator(log)
    a = hb(gc, now=0)
    hb(gc, now=1)
    hb(gc, a.member_id, a.member_epoch, now=2, topics=None, owned=a.assignment)
    restarted = coordinator(log, now_ms=1_000)
    restarted.tick(1_000 + 5001)
    assert a.member_id not in restarted.groups["g"].members
    assert ConsumerGroupKey(8, "g", a.member_id) in {decode_key(k) for _, k, v in log.records if v is None}


def test_leave_static_departure_and_delete_are_durable():
    log = Log()
    gc = coordinator(log)
    s = hb(gc, instance="i-s", now=0)
    d = hb(gc, now=1)
    assert hb(gc, d.member_id, -1, now=2, topics=None).error == 0  # leaves for good
    assert hb(gc, s.member_id, -2, now=3, topics=None).error == 0  # static member: may come back
    restarted = coordinator(log, now_ms=10)
    group = restarted.groups["g"]
    assert set(group.members) == {s.member_id} and group.members[s.member_id].departed
    back = hb(restarted, instance="i-s", now=11)  # a new incarnation takes over the old assignment
    assert back.error == 0 and back.member_id != s.member_id
    assert sorted(group.members[back.member_id].assigned) == s.assignment
    assert hb(restarted, back.member_id, -1, now=12, topics=None).error == 0
    assert restarted.groups["g"].state == "Empty"

    empty = coordinator(log, now_ms=20)
    assert empty.groups["g"].state == "Empty" and "g" in empty.known_group_ids()
    assert empty.delete_group("g") == 0
    assert coordinator(log, now_ms=30).known_group_ids() == set()
    assert coordinator(log, records=log.compacted(), now_ms=30).known_group_ids() == set()


def test_conversion_between_protocols_tombstones_the_other_kind():
    log = Log()
    gc = coordinator(log)
    r = hb(gc, now=0)
    hb(gc, r.member_id, -1, now=1, topics=None)
    classic = gc.classic_group("g", create=True, now_ms=2)  # the empty consumer group becomes classic
    gc._persist(classic)  # (an empty classic group's GroupMetadataValue, as after its last member left)
    loaded = coordinator(log)
    assert "g" not in loaded.offsets.consumer_groups and isinstance(loaded.groups["g"], ClassicGroup)
    # and back: the empty classic group becomes a consumer group, its GroupMetadata tombstoned
    r = hb(loaded, now=3)
    loaded = coordinator(log, now_ms=4)
    assert "g" not in loaded.offsets.groups and isinstance(loaded.groups["g"], ConsumerGroup)
    assert set(loaded.groups["g"].members) == {r.member_id}


def test_deleted_topic_is_dropped_on_replay_and_triggers_a_new_assignment():
    log = Log()
    gc = coordinator(log)
    r = hb(gc, now=0, topics=("t", "u"))
    assert len(r.assignment) == 6
    restarted = coordinator(log, now_ms=10, topics={"t": 4})  # "u" was deleted while the broker was down
    group = restarted.groups["g"]
    assert sorted(group.members[r.member_id].assigned) == [TP("t", p) for p in range(4)]
    r2 = hb(restarted, r.member_id, r.member_epoch, now=11, topics=None,
            owned=[TP("t", p) for p in range(4)])
    assert r2.error == 0 and r2.member_epoch == r.member_epoch + 1  # the subscription metadata changed


# ---- property: whatever happened, a replay (full or compacted) rebuilds the live group -----------

OPS = st.lists(st.tuples(st.sampled_from(["join", "hb", "leave", "static_leave", "tick", "subscribe"]),
                         st.integers(0, 3)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_replay_rebuilds_the_live_group(ops):
    ids = iter(f"member-{i:02d}" for i in range(1000))  # deterministic ids: reproducible examples
    real_new_member_id = consumer_group_module.new_member_id
    consumer_group_module.new_member_id = lambda: next(ids)
    try:
        _run_and_replay(ops)
    finally:
        consumer_group_module.new_member_id = real_new_member_id


def _run_and_replay(ops) -> None:
    log = Log()
    gc = coordinator(log)
    now = 0
    for op, who in ops:
        now += 700
        group = gc.groups.get("g")
        members = sorted(group.members) if group is not None else []
        mid = members[who % len(members)] if members else None
        if op == "join" or mid is None:
            hb(gc, now=now, instance=f"i-{who}" if who == 3 else None)
        elif op == "hb":
            m = group.members[mid]
            hb(gc, mid, m.epoch, now=now, topics=None, owned=sorted(m.assigned))
        elif op == "leave":
            hb(gc, mid, -1, now=now, topics=None)
        elif op == "static_leave":
            hb(gc, mid, -2, now=now, topics=None)
        elif op == "subscribe":
            hb(gc, mid, group.members[mid].epoch, now=now, topics=("t", "u") if who % 2 else ("u",))
        else:
            gc.tick(now + 4000 * who)
    live = gc.groups.get("g")
    for records in (log.replay(), log.compacted()):
        restarted = coordinator(log, now_ms=now, records=records)
        if live is None or live.dead:
            assert "g" not in restarted.groups
            continue
        assert view(restarted.groups["g"]) == view(live)
