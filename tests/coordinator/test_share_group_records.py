"""A share group's records in __consumer_offsets (KIP-932): what the coordinator writes as members join, are
assigned, leave and as the group is deleted, and a new coordinator's replay of them."""
import uuid

import pytest

from tidelake import errors
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.coordinator.share_group import ShareGroupCoordinator
from tidelake.coordinator.share_group_records import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    ShareGroupKey, ShareGroupRecords, ShareMemberAssignment, ShareMemberMetadata, SharePartitionsMetadata,
    decode_share_group_key, replay, share_group_key, share_group_records, share_group_value)
from tidelake.coordinator.share_state import ShareStateKey

CONFIG = ShareGroupConfig(record_lock_duration_ms=1000, delivery_count_limit=3, partition_max_record_locks=10,
                          session_timeout_ms=5000)
TOPIC_ID = uuid.UUID(int=7)


def coordinator(log: list, holds_group_partitions: bool = True) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(CONFIG, topic_id_of={"t": TOPIC_ID}.get, partitions_of={"t": 2}.get,
                                 topic_exists={TOPIC_ID}.__contains__, start_offset=lambda _t, _p, _earliest: 0,
                                 holds_group_partitions=holds_group_partitions,
                                 write_group=lambda _group, records: log.extend(records),
                                 topic_name_of={TOPIC_ID: "t"}.get)


def hb(c, member, epoch, subscribed=None, now_ms=0):
    return c.heartbeat("g", member, epoch, subscribed=subscribed, rack_id="r1", client_id="cid", client_host="/h",
                       now_ms=now_ms)


def described(c: ShareGroupCoordinator) -> tuple:
    g = c.groups["g"]
    return g.epoch, g.assignment_epoch, {m.member_id: (m.epoch, m.assignment, m.subscribed, m.client_id, m.rack_id)
                                         for m in g.members.values()}


def test_every_record_type_round_trips_and_tombstones_remove_it():
    group = ShareGroupRecords(
        epoch=5, members={"m": ShareMemberMetadata("r", "cid", "/h", ("a", "b"))}, assignment_epoch=4,
        target={"m": {TOPIC_ID: (0, 1)}}, current={"m": ShareMemberAssignment(4, 3, {TOPIC_ID: (1,)})},
        partitions=SharePartitionsMetadata({TOPIC_ID: ("t", (2,))}, {TOPIC_ID: ("t", (0, 1))}))
    records = share_group_records("g", ShareGroupRecords(), group)
    assert sorted(decode_share_group_key(k).record_type for k, _v in records) == list(range(10, 16))
    assert replay(records) == {"g": group}
    assert decode_share_group_key(share_group_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m")) == \
        ShareGroupKey(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    gone = share_group_records("g", group, ShareGroupRecords())
    assert all(v is None for _k, v in gone)
    assert [decode_share_group_key(k).record_type for k, _v in gone] == [  # Kafka's order: the member's, then
        SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,  # the group's own last
        SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, SHARE_GROUP_STATE_PARTITION_METADATA,
        SHARE_GROUP_METADATA]
    assert replay(records + gone) == {}
    with pytest.raises(ValueError):  # a record this module does not know is not taken for one
        decode_share_group_key(b"\x00\x03" + share_group_key(SHARE_GROUP_METADATA, "g")[2:])


def test_the_metadata_value_is_kafkas_layout():
    # Kafka 4.1's ShareGroupMetadataValue v0: int16 version, int32 epoch, int64 metadata hash, no tagged fields
    assert share_group_value(SHARE_GROUP_METADATA, 7) == b"\x00\x00" + b"\x00\x00\x00\x07" + b"\x00" * 8 + b"\x00"


def test_a_new_coordinator_replays_members_epochs_and_assignments_and_the_members_carry_on():
    log: list = []
    c = coordinator(log)
    hb(c, "a", 0, ["t"])
    hb(c, "b", 0, ["t"])
    c.tick(1)  # both partitions initialized
    a = hb(c, "a", c.groups["g"].members["a"].epoch, now_ms=2)
    b = hb(c, "b", c.groups["g"].members["b"].epoch, now_ms=2)
    assert a.assignment and b.assignment
    before = described(c)
    restarted = coordinator([])
    restarted.restore("g", TOPIC_ID, 0, c.share_partition("g", TOPIC_ID, 0))  # (the share state's own replay)
    restarted.restore("g", TOPIC_ID, 1, c.share_partition("g", TOPIC_ID, 1))
    assert restarted.load_groups(replay(log), now_ms=1000) == ["g"]
    assert described(restarted) == before
    # the members go on with their epochs: neither fenced nor reassigned
    again = hb(restarted, "a", a.member_epoch, now_ms=1001)
    assert again.member_epoch == a.member_epoch and again.assignment is None
    assert described(restarted)[0] == before[0]
    # a member's session starts at the load: "b" expires 5 s after it, not after its last heartbeat before
    assert restarted.tick(1000 + CONFIG.session_timeout_ms - 1) == []
    assert restarted.tick(1000 + CONFIG.session_timeout_ms) == [("g", "b")]


def test_a_leaving_member_is_tombstoned_and_a_deleted_group_leaves_nothing():
    log: list = []
    c = coordinator(log)
    hb(c, "a", 0, ["t"])
    b = hb(c, "b", 0, ["t"])
    c.tick(1)
    log.clear()
    hb(c, "b", -1)
    tombstoned = {(decode_share_group_key(k).record_type, decode_share_group_key(k).member_id) for k, v in log
                  if v is None}
    assert tombstoned == {(SHARE_GROUP_MEMBER_METADATA, "b"), (SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, "b"),
                          (SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, "b")}
    with pytest.raises(errors.NonEmptyGroup):
        c.delete_group("g")
    hb(c, "a", -1)
    with pytest.raises(errors.GroupIdNotFound):
        c.delete_group("other")
    log.clear()
    c.delete_group("g")
    assert "g" not in c.groups and c.share_partition("g", TOPIC_ID, 0) is None  # its share state forgotten too
    assert log and all(v is None for _k, v in log)
    assert b.member_id == "b"


def test_a_deleted_group_replays_to_nothing():
    log: list = []
    c = coordinator(log)
    hb(c, "a", 0, ["t"])
    c.tick(1)
    hb(c, "a", -1)
    c.delete_group("g")
    assert replay(log) == {}
    assert coordinator([]).load_groups(replay(log), 0) == []


def test_in_a_cluster_the_initialized_partitions_are_replayed_and_assigned_at_once():
    log: list = []
    c = coordinator(log, holds_group_partitions=False)
    hb(c, "a", 0, ["t"])
    assert c.pending_initializations() == [ShareStateKey("g", TOPIC_ID, 0), ShareStateKey("g", TOPIC_ID, 1)]
    c.mark_initialized(ShareStateKey("g", TOPIC_ID, 0))
    a = hb(c, "a", c.groups["g"].members["a"].epoch, now_ms=1)
    assert a.assignment == {TOPIC_ID: (0,)}
    new = coordinator([], holds_group_partitions=False)
    new.load_groups(replay(log), now_ms=2)
    assert described(new) == described(c)
    assert new.pending_initializations() == [ShareStateKey("g", TOPIC_ID, 1)]  # still being initialized
    again = hb(new, "a", a.member_epoch, now_ms=3)  # partition 0 stays assigned: no new epoch
    assert again.member_epoch == a.member_epoch and again.assignment is None


def test_a_record_that_does_not_decode_is_skipped_not_fatal():
    group = ShareGroupRecords(epoch=3, partitions=SharePartitionsMetadata())
    records = share_group_records("g", ShareGroupRecords(), group)
    broken = [(share_group_key(SHARE_GROUP_METADATA, "h"), b"\x00\x07garbage")]  # a value version no spec defines
    assert replay(broken + records) == {"g": group}
