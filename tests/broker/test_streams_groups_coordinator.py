"""The streams group coordinator (KIP-1071) without a broker: the topology configured against the topics (statuses,
internal topics to create with the counts Kafka decides), the sticky balanced task assignment with standbys,
revocation before reassignment, session timeouts, offset-commit epochs, and the StreamsGroup* records of
__consumer_offsets replayed into the same group."""
from __future__ import annotations

from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.group_coordinator import GroupCoordinator
from tidelake.coordinator.streams_assignor import AssignmentMember, assign
from tidelake.coordinator.streams_group import (STALE_MEMBER_EPOCH, UNRELEASED_TASKS, UNREVOKED_TASKS,
                                                StreamsHeartbeat, Tasks)
from tidelake.coordinator.streams_group_records import is_streams_record
from tidelake.coordinator.streams_topology import (INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS,
                                                   MISSING_SOURCE_TOPICS, Subtopology, TopicInfo, Topology, configure)
import pytest

from tidelake.errors import FencedMemberEpoch, GroupIdNotFound, InconsistentGroupProtocol, UnknownMemberId

REPARTITION = "app-count-repartition"
CHANGELOG = "app-count-changelog"
# the word count of tests/java/StreamsCount.java: words -> (group by) repartition -> count (store + changelog)
TOPOLOGY = Topology(0, (
    Subtopology("0", source_topics=("words",), repartition_sink_topics=(REPARTITION,)),
    Subtopology("1", repartition_source_topics=(TopicInfo(REPARTITION, configs=(("cleanup.policy", "delete"),)),),
                state_changelog_topics=(TopicInfo(CHANGELOG, configs=(("cleanup.policy", "compact"),)),)),
))
ALL_TASKS = {(s, p) for s in "01" for p in range(4)}


class Topics:
    def __init__(self, **counts: int) -> None:
        self.counts = dict(counts)

    def __call__(self, name: str) -> int | None:
        return self.counts.get(name)


def coordinator(topics: Topics, written: list | None = None, **config) -> GroupCoordinator:
    c = GroupConfig()
    for k, v in config.items():
        setattr(c, k, v)
    return GroupCoordinator(c, write=lambda _p, records: (written if written is not None else []).extend(records),
                            partitions_of=topics)


def join(group, member: str, now: int, process: str | None = None):
    return group.heartbeat(StreamsHeartbeat(member, 0, rebalance_timeout_ms=30000, topology=TOPOLOGY,
                                            process_id=process or f"process-{member}", client_tags={}), now)


def beat(group, member: str, epoch: int, now: int, owned: Tasks | None = None):
    return group.heartbeat(StreamsHeartbeat(member, epoch, owned=owned), now)


def test_configure_decides_internal_topics_as_kafka():
    assert configure(TOPOLOGY, Topics()).status == (MISSING_SOURCE_TOPICS, "Source topics words are missing.")
    missing = configure(TOPOLOGY, Topics(words=4))
    assert missing.status[0] == MISSING_INTERNAL_TOPICS and not missing.tasks
    assert [(t.name, t.partitions, dict(t.configs)) for t in missing.to_create] == [
        (CHANGELOG, 4, {"cleanup.policy": "compact"}), (REPARTITION, 4, {"cleanup.policy": "delete"})]
    ready = configure(TOPOLOGY, Topics(words=4, **{REPARTITION: 4, CHANGELOG: 4}))
    assert ready.ready and ready.tasks == {"0": 4, "1": 4}
    wrong = configure(TOPOLOGY, Topics(words=4, **{REPARTITION: 4, CHANGELOG: 2}))
    assert wrong.status[0] == INCORRECTLY_PARTITIONED_TOPICS and CHANGELOG in wrong.status[1]


def test_members_get_tasks_once_internal_topics_exist_then_share_them_after_revocation():
    topics = Topics(words=4)
    g = coordinator(topics).streams_group("app", create=True)
    first = join(g, "a", 0)
    assert first.error == 0 and first.tasks == Tasks() and first.status[0][0] == MISSING_INTERNAL_TOPICS
    assert {t.name for t in first.to_create} == {REPARTITION, CHANGELOG}
    topics.counts.update({t.name: t.partitions for t in first.to_create})   # the broker creates them
    r = beat(g, "a", first.member_epoch, 100, owned=Tasks())
    assert r.status == [] and r.tasks.active == ALL_TASKS and g.state == "Stable"
    epoch_a = r.member_epoch
    # b joins: the target splits 4/4, but b gets nothing a still holds
    b = join(g, "b", 200)
    assert b.tasks == Tasks() and g.members["b"].state == UNRELEASED_TASKS and g.state == "Reconciling"
    a = beat(g, "a", epoch_a, 300, owned=Tasks(frozenset(ALL_TASKS)))
    assert g.members["a"].state == UNREVOKED_TASKS and a.member_epoch == epoch_a and len(a.tasks.active) == 4
    kept = a.tasks.active
    # a heartbeat still owning them changes nothing; a reported revocation moves a to the new epoch
    assert beat(g, "a", epoch_a, 400, owned=Tasks(frozenset(ALL_TASKS))).tasks is None
    a = beat(g, "a", epoch_a, 500, owned=Tasks(kept))
    assert a.member_epoch == g.assignment_epoch > epoch_a
    b = beat(g, "b", b.member_epoch, 600, owned=Tasks())
    assert b.tasks.active == ALL_TASKS - kept and g.state == "Stable"
    # an epoch the member does not have is fenced; an unknown member is told so
    assert beat(g, "a", epoch_a - 1, 700).error == FencedMemberEpoch.code
    assert beat(g, "z", 1, 700).error == UnknownMemberId.code


def test_the_other_protocols_cannot_take_a_streams_group():
    gc = coordinator(Topics(words=4))
    join(gc.streams_group("app", create=True), "a", 0)
    with pytest.raises(GroupIdNotFound, match="not a consumer group"):
        gc.consumer_group("app", create=True)         # ConsumerGroupHeartbeat
    with pytest.raises(InconsistentGroupProtocol):
        gc.classic_group("app", create=True, now_ms=0)  # JoinGroup
    gc.commit("offsets-only", [("words", 0, None)], 0)  # an empty classic group (offsets committed alone) ...
    assert gc.streams_group("offsets-only", create=True).state == "Empty"   # ... becomes a streams group
    with pytest.raises(GroupIdNotFound, match="not a streams group"):
        gc.consumer_group("kip848", create=True).heartbeat(
            member_id="", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=30000,
            subscribed_topic_names=["words"], subscribed_topic_regex=None, server_assignor=None, owned=None,
            client_id="c", client_host="h", now_ms=0)
        gc.streams_group("kip848", create=True)


def test_session_timeout_hands_the_tasks_over_and_commits_check_the_epoch():
    topics = Topics(words=4, **{REPARTITION: 4, CHANGELOG: 4})
    gc = coordinator(topics, streams_session_timeout_ms=10000)
    g = gc.streams_group("app", create=True)
    a = join(g, "a", 0)
    b = join(g, "b", 0)
    a = beat(g, "a", a.member_epoch, 10, owned=Tasks())
    a = beat(g, "a", a.member_epoch, 20, owned=Tasks(a.tasks.active))
    b = beat(g, "b", b.member_epoch, 30, owned=Tasks())
    assert len(g.members["a"].assigned.active) == len(g.members["b"].assigned.active) == 4
    assert gc.validate_commit("app", "b", None, b.member_epoch, 40) == 0
    assert gc.validate_commit("app", "b", None, b.member_epoch - 1, 40) == STALE_MEMBER_EPOCH
    assert gc.validate_commit("app", "nobody", None, 3, 40) == UnknownMemberId.code
    assert gc.validate_commit("app", "", None, -1, 40) != 0   # a standalone commit only while the group is empty
    gc.tick(9000)
    b = beat(g, "b", b.member_epoch, 9000, owned=Tasks(g.members["b"].assigned.active))
    gc.tick(10031)                                            # a was last heard at 20
    assert set(g.members) == {"b"}
    b = beat(g, "b", b.member_epoch, 10040, owned=Tasks(g.members["b"].assigned.active))
    assert b.tasks.active == ALL_TASKS and g.state == "Stable"
    # leaving empties the group: a standalone commit is accepted again, the group can be deleted
    assert g.heartbeat(StreamsHeartbeat("b", -1), 10050).member_epoch == -1
    assert g.state == "Empty" and gc.validate_commit("app", "", None, -1, 10060) == 0
    assert gc.group_state("app") == ("Empty", "streams", "streams")
    assert gc.delete_group("app") == 0 and "app" not in gc.known_group_ids()


def test_assignor_is_sticky_balanced_and_keeps_standbys_off_the_active_process():
    tasks = sorted(ALL_TASKS)
    first = assign({"a": AssignmentMember("p1"), "b": AssignmentMember("p2")}, tasks, num_standby=1)
    assert sorted(len(x.active) for x in first.values()) == [4, 4]
    for m, other in (("a", "b"), ("b", "a")):
        assert first[m].standby == first[other].active   # each task's standby on the other process
    # a third member takes its share, the others keep most of theirs
    members = {m: AssignmentMember(p, first[m].active, first[m].standby) for m, p in (("a", "p1"), ("b", "p2"))}
    members["c"] = AssignmentMember("p3")
    second = assign(members, tasks, num_standby=1)
    assert sorted(len(x.active) for x in second.values()) == [2, 3, 3]
    assert len(second["a"].active & first["a"].active) == 3 and len(second["b"].active & first["b"].active) == 3
    for m, x in second.items():
        for t in x.standby:
            owner = next(o for o, y in second.items() if t in y.active)
            assert members[owner].process_id != members[m].process_id
    # one process, two threads: no standby (it would sit on the same state directory)
    same = assign({"a": AssignmentMember("p"), "b": AssignmentMember("p")}, tasks, num_standby=1)
    assert all(not x.standby for x in same.values())
    # only stateful tasks (subtopology 1 keeps the counts) get standbys
    counted = assign({"a": AssignmentMember("p1"), "b": AssignmentMember("p2")}, tasks, num_standby=1, stateful={"1"})
    assert {t[0] for x in counted.values() for t in x.standby} == {"1"}


def test_records_in_consumer_offsets_rebuild_the_group():
    topics = Topics(words=4, **{REPARTITION: 4, CHANGELOG: 4})
    written: list = []
    gc = coordinator(topics, written)
    g = gc.streams_group("app", create=True)
    a = join(g, "a", 0)
    b = join(g, "b", 0)
    a = beat(g, "a", a.member_epoch, 10, owned=Tasks())
    a = beat(g, "a", a.member_epoch, 20, owned=Tasks(a.tasks.active))
    b = beat(g, "b", b.member_epoch, 30, owned=Tasks())
    assert written and all(is_streams_record(k) for k, _v in written)
    again = coordinator(topics)
    again.load(written, now_ms=1000)
    h = again.groups["app"]
    assert (h.group_epoch, h.assignment_epoch, h.topology, h.state) == (g.group_epoch, g.assignment_epoch,
                                                                         TOPOLOGY, "Stable")
    for mid in ("a", "b"):
        m, n = g.members[mid], h.members[mid]
        assert (n.epoch, n.assigned, n.state, n.process_id, n.last_heartbeat_ms) == (m.epoch, m.assigned, m.state,
                                                                                       m.process_id, 1000)
        assert h.target[mid] == g.target[mid]
    # the members go on heart-beating with their epochs: nothing moves
    assert beat(h, "b", b.member_epoch, 1100, owned=Tasks(h.members["b"].assigned.active)).error == 0
    assert h.group_epoch == g.group_epoch
    # left and deleted: every record tombstoned, a replay finds no group
    later: list = []
    again.write = lambda _p, records: later.extend(records)
    for mid in ("a", "b"):
        h.heartbeat(StreamsHeartbeat(mid, -1), 1200)
    assert again.delete_group("app") == 0
    replayed: dict = {}
    for k, v in written + later:
        replayed[k] = v
    assert set(replayed.values()) == {None}
    third = coordinator(topics)
    third.load(written + later, now_ms=2000)
    assert "app" not in third.groups
