"""The share coordinator's state machine (KIP-932, a cluster's keeper of share-partition state): it answers only for
the state partitions it loaded, replays them, writes one snapshot per write (read back as written, ACQUIRED never
persisted), fences older state epochs and a former leader's writes, forgets with a tombstone, and creates state
only by an initialization at a newer state epoch (a write to a deleted state is fenced)."""
import uuid

import pytest

from tidelake import errors
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.coordinator.share_coordinator import PersistedState, ShareStateCoordinator
from tidelake.coordinator.share_group import ShareGroupCoordinator
from tidelake.coordinator.share_partition import ACKNOWLEDGED, AVAILABLE, StateBatch
from tidelake.coordinator.share_state import ShareStateKey, replay

CONFIG = ShareGroupConfig(state_partitions=3)
KEY = ShareStateKey("g", uuid.UUID(int=5), 0)


def coordinator():
    log: list[tuple[int, bytes, bytes | None]] = []
    c = ShareStateCoordinator(CONFIG, lambda p, records: log.extend((p, k, v) for k, v in records))
    return c, log


def test_a_coordinator_answers_only_for_the_state_partitions_it_loaded():
    c, _log = coordinator()
    with pytest.raises(errors.NotCoordinator):
        c.read(KEY)
    c.load_partition(c.partition_for(KEY), [])
    assert c.read(KEY) is None  # led, but never written: uninitialized
    c.unload_partition(c.partition_for(KEY))
    with pytest.raises(errors.NotCoordinator):
        c.write_state(KEY, PersistedState(0, 0, ()), 1)


def test_a_write_is_read_back_and_replayed_by_the_next_coordinator():
    c, log = coordinator()
    partition = c.partition_for(KEY)
    c.load_partition(partition, [])
    state = PersistedState(10, 2, (StateBatch(10, 11, ACKNOWLEDGED, 1), StateBatch(12, 14, AVAILABLE, 2)))
    assert c.initialize(KEY, 10, 2) == partition
    assert c.write_state(KEY, state, 4) == partition
    assert c.read(KEY) == PersistedState(12, 2, (StateBatch(12, 14, AVAILABLE, 2),))  # SPSO past the done ones
    assert [p for p, _k, _v in log] == [partition, partition]
    following, _ = coordinator()  # another broker leading the partition next: it replays the log
    following.load_partition(partition, [(k, v) for _p, k, v in log])
    assert following.read(KEY) == c.read(KEY)


def test_an_older_state_epoch_is_fenced_and_a_delete_leaves_a_tombstone():
    c, log = coordinator()
    c.load_partition(c.partition_for(KEY), [])
    c.initialize(KEY, 5, 3)
    with pytest.raises(errors.FencedStateEpoch):
        c.write_state(KEY, PersistedState(0, 2, ()), 1)
    c.delete_state(KEY)
    assert c.read(KEY) is None
    assert log[-1][2] is None
    assert replay([(k, v) for _p, k, v in log], CONFIG) == {}
    # a leader still holding the deleted state cannot write it back; a new initialization is at a newer epoch
    with pytest.raises(errors.FencedStateEpoch):
        c.write_state(KEY, PersistedState(5, 3, ()), 1)
    assert c.last_state_epoch(KEY) == 3
    with pytest.raises(errors.FencedStateEpoch):
        c.initialize(KEY, 0, 3)
    c.initialize(KEY, 0, 4)
    assert c.read(KEY) == PersistedState(0, 4, ())


def test_a_deleted_topics_states_are_tombstoned_and_others_kept():
    c, log = coordinator()
    other = ShareStateKey("g", uuid.UUID(int=6), 0)
    for key in (KEY, other):
        c.load_partition(c.partition_for(key), [])
        c.initialize(key, 1, 0)
    assert c.delete_topic(KEY.topic_id) == 1
    assert c.read(KEY) is None and c.read(other) == PersistedState(1, 0, ())
    assert replay([(k, v) for _p, k, v in log], CONFIG).keys() == {other}


def test_a_former_leaders_late_write_is_fenced_by_the_new_leaders_read():
    c, _log = coordinator()
    c.load_partition(c.partition_for(KEY), [])
    c.initialize(KEY, 3, 0)
    c.write_state(KEY, PersistedState(3, 0, ()), 4)
    assert c.read(KEY, 5) == PersistedState(3, 0, ())  # the partition's next leader, epoch 5, takes it over
    with pytest.raises(errors.FencedLeaderEpoch):
        c.write_state(KEY, PersistedState(9, 0, ()), 4)
    assert c.read(KEY).start_offset == 3
    c.write_state(KEY, PersistedState(6, 0, ()), 5)
    assert c.read(KEY).start_offset == 6
    c.initialize(KEY, 8, 1)  # the group's coordinator (AlterShareGroupOffsets) names no leader epoch: not fenced
    assert c.read(KEY) == PersistedState(8, 1, ())


def test_a_cluster_share_group_assigns_partitions_once_initialized_and_a_lost_leadership_unloads():
    """In a cluster the group's coordinator does not hold the share-partitions: a partition is assigned once its
    state is initialized at its share coordinator (reported by mark_initialized; the tick does not initialize it
    here); a leader that loses a partition forgets its share-partitions (the next leader reads them back), a former
    coordinator its members."""
    tid = uuid.UUID(int=9)
    share = ShareGroupCoordinator(CONFIG, topic_id_of={"t": tid}.get, partitions_of={"t": 2}.get,
                                  topic_exists={tid}.__contains__, start_offset=lambda _t, _p, _e: 0,
                                  holds_group_partitions=False)
    answer = share.heartbeat("g", "m", 0, subscribed=["t"], rack_id=None, client_id="c", client_host="h", now_ms=0)
    assert answer.assignment == {}
    share.tick(1)
    assert share.pending_initializations() == [ShareStateKey("g", tid, 0), ShareStateKey("g", tid, 1)]
    assert share.share_partition("g", tid, 0) is None  # not initialized in memory here
    share.mark_initialized(ShareStateKey("g", tid, 1))
    answer = share.heartbeat("g", "m", answer.member_epoch, subscribed=None, rack_id=None, client_id="c",
                             client_host="h", now_ms=2)
    assert answer.assignment == {tid: (1,)}
    share.mark_initialized(ShareStateKey("g", tid, 0))
    answer = share.heartbeat("g", "m", answer.member_epoch, subscribed=None, rack_id=None, client_id="c",
                             client_host="h", now_ms=3)
    assert answer.assignment == {tid: (0, 1)} and share.pending_initializations() == []
    share.initialize_partition("g", tid, 0)
    share.initialize_partition("other", tid, 1)  # led here, its group coordinated elsewhere: not listed here
    assert [key for key, _sp in share.take_changed()] == [ShareStateKey("g", tid, 0), ShareStateKey("other", tid, 1)]
    assert sorted(share.groups) == ["g"]
    assert share.unload_partition(tid, 0) == 1 and share.share_partition("g", tid, 0) is None
    assert share.forget_members(lambda group_id: group_id == "g") == ["g"]  # the group's coordinator moved away
    assert not share.is_member("g", "m")
    with pytest.raises(errors.UnknownMemberId):
        share.heartbeat("g", "m", answer.member_epoch, subscribed=None, rack_id=None, client_id="c", client_host="h",
                        now_ms=1)
