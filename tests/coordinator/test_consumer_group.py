"""KIP-848 consumer group state machine: epochs, revocation before reassignment, fencing, timeouts."""
from __future__ import annotations

from tidelake import errors
from tidelake.coordinator.assignors import TopicPartition as TP
from tidelake.coordinator.consumer_group import ConsumerGroup

TOPICS = {"t": 4}


def new_group(assignors=("uniform",)):
    return ConsumerGroup("g", session_timeout_ms=10000, heartbeat_interval_ms=500, assignors=assignors,
                         partitions_of=TOPICS.get)


def hb(g, member_id="", epoch=0, now=0, topics=("t",), owned=None, assignor=None, instance=None):
    return g.heartbeat(member_id=member_id, member_epoch=epoch, instance_id=instance, rack_id=None,
                       rebalance_timeout_ms=5000, subscribed_topic_names=list(topics) if topics is not None else None,
                       subscribed_topic_regex=None, server_assignor=assignor, owned=owned,
                       client_id="c", client_host="/127.0.0.1", now_ms=now)


def test_second_member_gets_partitions_only_after_the_first_revokes():
    g = new_group()
    a = hb(g)
    assert a.error == 0 and a.member_epoch == 1 and a.assignment == [TP("t", p) for p in range(4)]
    b = hb(g, now=10)
    assert b.error == 0  # joined, but nothing is free yet:
    assert b.assignment == [] and g.state == "Reconciling"
    # a is told to keep two partitions; it stays at its epoch until it reports the revocation
    a2 = hb(g, a.member_id, a.member_epoch, now=20, topics=None, owned=[TP("t", p) for p in range(4)])
    kept = a2.assignment
    assert len(kept) == 2 and a2.member_epoch == 1
    b2 = hb(g, b.member_id, b.member_epoch, now=30, topics=None, owned=[])
    assert b2.assignment is None  # still nothing: a has not revoked yet
    a3 = hb(g, a.member_id, a.member_epoch, now=40, topics=None, owned=kept)
    assert a3.member_epoch == 2 and a3.assignment is None  # same partitions as last sent
    b3 = hb(g, b.member_id, b2.member_epoch, now=50, topics=None, owned=[])
    assert sorted(b3.assignment + kept) == [TP("t", p) for p in range(4)] and b3.member_epoch == 2
    assert g.state == "Stable"


def test_fencing_unknown_member_and_unsupported_assignor():
    g = new_group()
    a = hb(g)
    assert hb(g, a.member_id, 7, topics=None).error == errors.FencedMemberEpoch.code
    assert hb(g, "ghost", 3, topics=None).error == errors.UnknownMemberId.code
    assert hb(g, assignor="magic").error == errors.UnsupportedAssignor.code
    assert hb(g, topics=None).error == errors.InvalidRequest.code


def test_session_timeout_and_leave_move_partitions_and_revocation_timeout_fences():
    g = new_group(assignors=("range",))
    a = hb(g, now=0)
    b = hb(g, now=0)
    a = hb(g, a.member_id, a.member_epoch, now=1, topics=None, owned=a.assignment)
    a = hb(g, a.member_id, a.member_epoch, now=2, topics=None, owned=a.assignment)
    b = hb(g, b.member_id, b.member_epoch, now=3, topics=None, owned=[])
    assert len(a.assignment or []) + len(b.assignment or []) in (2, 4)
    # b stops heart-beating; a keeps going; b's session expires and a gets everything
    for t in range(1000, 10001, 1000):
        hb(g, a.member_id, g.members[a.member_id].epoch, now=t, topics=None,
           owned=sorted(g.members[a.member_id].assigned))
        g.tick(t)
    assert b.member_id in g.members
    g.tick(10004)
    assert b.member_id not in g.members
    r = hb(g, a.member_id, g.members[a.member_id].epoch, now=10005, topics=None,
           owned=sorted(g.members[a.member_id].assigned))
    assert r.assignment == [TP("t", p) for p in range(4)]
    # a new member c joins; a never acknowledges the revocation and is fenced after its rebalance timeout
    c = hb(g, now=11000)
    hb(g, a.member_id, r.member_epoch, now=11001, topics=None, owned=r.assignment)
    g.tick(11001 + 5001)
    assert a.member_id not in g.members
    c2 = hb(g, c.member_id, c.member_epoch, now=16010, topics=None, owned=[])
    assert c2.assignment == [TP("t", p) for p in range(4)]
    assert hb(g, c.member_id, -1, now=16020, topics=None).member_epoch == -1 and g.state == "Empty"


def test_static_member_leaves_with_minus_two_and_comes_back_with_its_assignment():
    g = new_group()
    a = hb(g, instance="i-a")
    assert hb(g, a.member_id, -2, now=5, topics=None).member_epoch == -2
    assert hb(g, instance="i-a", now=6).error == 0  # a new incarnation takes over
    back = g.members[g.static_members["i-a"]]
    assert back.assigned == set(a.assignment)
    other = hb(g, instance="i-a", now=7)  # a second live process with the same instance id
    assert other.error == errors.UnreleasedInstanceId.code


def test_regex_subscription_follows_matching_topics():
    topics = {"orders-eu": 2, "orders-us": 1, "payments": 3, "__consumer_offsets": 50}
    g = ConsumerGroup("g", session_timeout_ms=10000, heartbeat_interval_ms=500, assignors=("range",),
                      partitions_of=topics.get, list_topics=lambda: list(topics))
    r = g.heartbeat(member_id="", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=5000,
                    subscribed_topic_names=None, subscribed_topic_regex="orders-.*", server_assignor=None,
                    owned=None, client_id="c", client_host="/h", now_ms=0)
    assert r.assignment == [TP("orders-eu", 0), TP("orders-eu", 1), TP("orders-us", 0)]
    topics["orders-asia"] = 1  # a new matching topic is picked up on the next heartbeat
    r2 = g.heartbeat(member_id=r.member_id, member_epoch=r.member_epoch, instance_id=None, rack_id=None,
                     rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                     server_assignor=None, owned=r.assignment, client_id="c", client_host="/h", now_ms=10)
    assert TP("orders-asia", 0) in r2.assignment and r2.member_epoch == r.member_epoch + 1
