"""Share groups' state machines (KIP-932) with a fake clock: membership and the simple assignor, record
acquisition, acknowledgement, lock expiry, the delivery-count limit, the SPSO, and the state records."""
import uuid

import pytest

from tidelake import errors
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.coordinator.share_group import INITIALIZING_HEARTBEAT_INTERVAL_MS, ShareGroupCoordinator
from tidelake.coordinator.share_partition import (ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, GAP, REJECT,
                                                  RELEASE, RENEW, AcquiredRange, SharePartition)
from tidelake.coordinator.share_state import ShareStateKey, decode_state_key, replay, snapshot_record

CONFIG = ShareGroupConfig(record_lock_duration_ms=1000, delivery_count_limit=3, partition_max_record_locks=10,
                          session_timeout_ms=5000)
TOPIC_ID = uuid.UUID(int=7)


def offsets(first, last, deliverable=True):
    return [(o, deliverable) for o in range(first, last + 1)]


def coordinator():
    return ShareGroupCoordinator(CONFIG, topic_id_of={"t": TOPIC_ID}.get, partitions_of={"t": 2}.get,
                                 topic_exists={TOPIC_ID}.__contains__, start_offset=lambda _t, _p, _earliest: 0)


def hb(c, member, epoch, subscribed=None, now_ms=0):
    return c.heartbeat("g", member, epoch, subscribed=subscribed, rack_id=None, client_id="c", client_host="h",
                       now_ms=now_ms)


def test_partitions_are_assigned_once_initialized_and_balanced():
    c = coordinator()
    a = hb(c, "a", 0, ["t"])
    b = hb(c, "b", 0, ["t"])
    assert a.assignment == {} and b.assignment == {}  # Kafka's rule: nothing before its share state exists
    assert b.heartbeat_interval_ms == INITIALIZING_HEARTBEAT_INTERVAL_MS  # come back soon for it
    assert c.share_partition("g", TOPIC_ID, 0) is None
    c.tick(1)  # initializes both partitions, off the heartbeats
    assert c.share_partition("g", TOPIC_ID, 0).start_offset == 0 and c.share_partition("g", TOPIC_ID, 1)
    a2 = hb(c, "a", a.member_epoch, now_ms=2)
    b2 = hb(c, "b", b.member_epoch, now_ms=2)
    assert sorted(a2.assignment[TOPIC_ID] + b2.assignment[TOPIC_ID]) == [0, 1]
    assert a2.member_epoch == b2.member_epoch and a2.heartbeat_interval_ms == CONFIG.heartbeat_interval_ms
    assert hb(c, "a", a2.member_epoch, now_ms=3).assignment is None  # unchanged: not sent again
    # b leaves: a has both partitions from its next heartbeat
    hb(c, "b", -1, now_ms=3)
    assert hb(c, "a", a2.member_epoch, now_ms=4).assignment == {TOPIC_ID: (0, 1)}
    # a member joining a group whose partitions are initialized is assigned at once
    assert sum(len(ps) for ps in hb(c, "d", 0, ["t"], now_ms=5).assignment.values()) == 1


def test_unknown_member_and_stale_epoch_are_refused():
    c = coordinator()
    with pytest.raises(errors.UnknownMemberId):
        c.heartbeat("g", "x", 3, subscribed=None, rack_id=None, client_id="c", client_host="h", now_ms=0)
    a = c.heartbeat("g", "a", 0, subscribed=["t"], rack_id=None, client_id="c", client_host="h", now_ms=0)
    with pytest.raises(errors.FencedMemberEpoch):
        c.heartbeat("g", "a", a.member_epoch + 5, subscribed=None, rack_id=None, client_id="c", client_host="h",
                    now_ms=0)


def test_an_expired_member_is_removed_and_its_records_released():
    c = coordinator()
    c.heartbeat("g", "a", 0, subscribed=["t"], rack_id=None, client_id="c", client_host="h", now_ms=0)
    sp = c.initialize("g", TOPIC_ID, 0, 0)
    assert sp.acquire("a", offsets(0, 4), 100, now_ms=0) == [AcquiredRange(0, 4, 1)]
    assert c.tick(4999) == []
    assert c.tick(5000) == [("g", "a")]
    assert not c.is_member("g", "a")
    assert sp.in_flight(AVAILABLE) == [0, 1, 2, 3, 4]


def test_two_members_never_hold_the_same_record():
    sp = SharePartition(CONFIG, 0)
    got_a = sp.acquire("a", offsets(0, 5), 3, now_ms=0)
    got_b = sp.acquire("b", offsets(0, 5), 100, now_ms=0)
    assert got_a == [AcquiredRange(0, 2, 1)] and got_b == [AcquiredRange(3, 5, 1)]
    assert sp.acquire("c", offsets(0, 5), 100, now_ms=0) == []
    with pytest.raises(errors.InvalidRecordState):
        sp.acknowledge("b", 0, 2, [ACCEPT], now_ms=0)  # a's records
    assert sp.in_flight(ACQUIRED) == [0, 1, 2, 3, 4, 5]  # nothing changed by the refused batch


def test_acknowledgements_move_the_start_offset():
    sp = SharePartition(CONFIG, 10)
    sp.acquire("a", offsets(10, 14), 100, now_ms=0)
    sp.acknowledge("a", 11, 12, [ACCEPT], now_ms=0)
    assert sp.start_offset == 10  # 10 is still acquired
    sp.acknowledge("a", 10, 10, [REJECT], now_ms=0)
    assert sp.start_offset == 13
    sp.acknowledge("a", 13, 14, [RELEASE, ACCEPT], now_ms=0)
    assert sp.start_offset == 13 and sp.in_flight(AVAILABLE) == [13]
    assert sp.acquire("b", offsets(13, 14), 100, now_ms=0) == [AcquiredRange(13, 13, 2)]
    sp.acknowledge("b", 13, 13, [ACCEPT], now_ms=0)
    assert sp.start_offset == 15 and sp.records == {}


def test_an_expired_lock_releases_and_renew_extends_it():
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", offsets(0, 1), 100, now_ms=0)
    sp.acknowledge("a", 1, 1, [RENEW], now_ms=900)
    assert sp.expire_locks(999) == 0
    assert sp.expire_locks(1000) == 1  # offset 0's lock ran out; offset 1 was renewed until 1900
    assert sp.in_flight(AVAILABLE) == [0] and sp.in_flight(ACQUIRED) == [1]
    with pytest.raises(errors.InvalidRecordState):
        sp.acknowledge("a", 0, 0, [ACCEPT], now_ms=1000)  # no longer a's
    assert sp.acquire("b", offsets(0, 1), 100, now_ms=1000) == [AcquiredRange(0, 0, 2)]


def test_the_delivery_count_limit_archives_a_poison_record():
    sp = SharePartition(CONFIG, 0)
    for attempt in range(1, 4):
        assert sp.acquire("a", offsets(0, 0), 100, now_ms=attempt * 10_000) == [AcquiredRange(0, 0, attempt)]
        sp.expire_locks(attempt * 10_000 + 1000)
    assert sp.records == {} and sp.start_offset == 1  # delivered 3 times: archived, the SPSO moved on
    assert sp.acquire("a", offsets(0, 0), 100, now_ms=50_000) == []


def test_records_not_deliverable_are_archived_and_gaps_acknowledged():
    sp = SharePartition(CONFIG, 0)
    got = sp.acquire("a", [(0, True), (1, False), (2, True)], 100, now_ms=0)
    assert got == [AcquiredRange(0, 0, 1), AcquiredRange(2, 2, 1)]
    sp.acknowledge("a", 0, 0, [GAP], now_ms=0)
    assert sp.start_offset == 2


def test_the_in_flight_window_is_bounded():
    sp = SharePartition(CONFIG, 0)
    assert sp.acquire("a", offsets(0, 30), 100, now_ms=0) == [AcquiredRange(0, 9, 1)]
    assert sp.next_fetch_offset() is None
    sp.acknowledge("a", 0, 4, [ACCEPT], now_ms=0)
    assert sp.next_fetch_offset() == 10


def test_a_snapshot_replays_to_the_same_state_without_locks():
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", offsets(0, 5), 100, now_ms=0)
    sp.acknowledge("a", 0, 1, [ACCEPT], now_ms=0)
    sp.acknowledge("a", 3, 3, [ACCEPT], now_ms=0)
    sp.acknowledge("a", 4, 4, [REJECT], now_ms=0)
    key = ShareStateKey("g", TOPIC_ID, 0)
    older = snapshot_record(key, SharePartition(CONFIG, 0), 0)
    restored = replay([older, snapshot_record(key, sp, 0)], CONFIG)[key]
    assert restored.start_offset == 2
    assert {o: (r.state, r.delivery_count) for o, r in restored.records.items()} == {
        2: (AVAILABLE, 1), 3: (ACKNOWLEDGED, 0 + 1), 4: (ARCHIVED, 1), 5: (AVAILABLE, 1)}
    assert restored.acquire("b", offsets(2, 5), 100, now_ms=0) == [AcquiredRange(2, 2, 2), AcquiredRange(5, 5, 2)]


def test_a_deleted_topics_share_partitions_are_forgotten_with_tombstones():
    written: list[tuple[int, list]] = []
    topics = {TOPIC_ID}
    c = ShareGroupCoordinator(CONFIG, topic_id_of=lambda n: TOPIC_ID if n == "t" and TOPIC_ID in topics else None,
                              partitions_of={"t": 2}.get, topic_exists=topics.__contains__,
                              start_offset=lambda _t, _p, _earliest: 0,
                              write=lambda partition, records: written.append((partition, records)))
    hb(c, "a", 0, ["t"])
    c.tick(1)
    c.flush()
    assert sorted(decode_state_key(key).partition for _p, records in written for key, _v in records) == [0, 1]
    written.clear()
    topics.clear()  # the topic is deleted
    c.tick(2)
    tombstones = [(key, value) for _p, records in written for key, value in records]
    assert len(tombstones) == 2 and all(value is None for _k, value in tombstones)
    assert sorted(decode_state_key(key).partition for key, _v in tombstones) == [0, 1]
    assert c.share_partition("g", TOPIC_ID, 0) is None and c.groups["g"].initializing == set()
