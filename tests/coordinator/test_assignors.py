"""Assignors against seed 004's worked examples, plus property tests (SPEC B8, issue 4 item 4)."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from tidelake.coordinator.assignors import (
    ASSIGNORS, Subscription, TopicPartition as TP, partitions_moved, range_assign, roundrobin_assign,
    sticky_assign,
)


def subs(**topics_by_member):
    return {m: Subscription(tuple(ts)) for m, ts in topics_by_member.items()}


def names(assignment):
    return {m: [str(tp) for tp in tps] for m, tps in assignment.items()}


def test_range_7_partitions_3_consumers():
    a = range_assign(subs(C0=["T"], C1=["T"], C2=["T"]), {"T": 7})
    assert names(a) == {"C0": ["TP0", "TP1", "TP2"], "C1": ["TP3", "TP4"], "C2": ["TP5", "TP6"]}


def test_roundrobin_7_partitions_3_consumers():
    a = roundrobin_assign(subs(C0=["T"], C1=["T"], C2=["T"]), {"T": 7})
    assert names(a) == {"C0": ["TP0", "TP3", "TP6"], "C1": ["TP1", "TP4"], "C2": ["TP2", "TP5"]}


def test_range_two_topics_four_partitions_three_consumers_seed_004():
    a = range_assign(subs(C0=["T0", "T1"], C1=["T0", "T1"], C2=["T0", "T1"]), {"T0": 4, "T1": 4})
    assert names(a) == {"C0": ["T0P0", "T0P1", "T1P0", "T1P1"], "C1": ["T0P2", "T1P2"], "C2": ["T0P3", "T1P3"]}


def test_roundrobin_two_topics_is_balanced_within_one():
    a = roundrobin_assign(subs(C0=["T0", "T1"], C1=["T0", "T1"], C2=["T0", "T1"]), {"T0": 4, "T1": 4})
    assert sorted(len(v) for v in a.values()) == [2, 3, 3]


ASYM = subs(C0=["T0"], C1=["T0", "T1"], C2=["T0", "T1", "T2"])
ASYM_PARTS = {"T0": 1, "T1": 2, "T2": 3}


def test_roundrobin_asymmetric_seed_004_c2_carries_four():
    a = roundrobin_assign(ASYM, ASYM_PARTS)
    assert names(a) == {"C0": ["T0P0"], "C1": ["T1P0"], "C2": ["T1P1", "T2P0", "T2P1", "T2P2"]}


def test_sticky_asymmetric_gives_t1p1_to_c1():
    a = sticky_assign(ASYM, ASYM_PARTS)
    assert names(a) == {"C0": ["T0P0"], "C1": ["T1P0", "T1P1"], "C2": ["T2P0", "T2P1", "T2P2"]}


def test_sticky_seed_004_four_topics_two_partitions_then_c1_leaves():
    parts = {f"T{i}": 2 for i in range(4)}
    topics = list(parts)
    first = sticky_assign(subs(C0=topics, C1=topics, C2=topics), parts)
    assert names(first) == {"C0": ["T0P0", "T1P1", "T3P0"], "C1": ["T0P1", "T2P0", "T3P1"], "C2": ["T1P0", "T2P1"]}
    # C1 leaves: sticky keeps C0's and C2's partitions and moves only C1's three.
    second = sticky_assign({m: Subscription(topics, tuple(first[m])) for m in ("C0", "C2")}, parts)
    assert names(second) == {"C0": ["T0P0", "T1P1", "T2P0", "T3P0"], "C2": ["T0P1", "T1P0", "T2P1", "T3P1"]}
    assert set(first["C0"]) <= set(second["C0"]) and set(first["C2"]) <= set(second["C2"])
    # roundrobin reshuffles: C0 loses T1P1 to C2 in the same situation
    rr = roundrobin_assign(subs(C0=topics, C2=topics), parts)
    assert partitions_moved(first, rr) > partitions_moved(first, second) == 3


def test_uniform_is_sticky():
    assert ASSIGNORS["uniform"] is ASSIGNORS["sticky"]


# ---- properties -------------------------------------------------------------------------------

topic_names = st.sampled_from(["a", "b", "c", "d"])
partitions = st.dictionaries(topic_names, st.integers(1, 6), min_size=1)


@st.composite
def group(draw, identical=False):
    parts = draw(partitions)
    n = draw(st.integers(1, 6))
    members = [f"m{i}" for i in range(n)]
    if identical:
        topics = draw(st.lists(st.sampled_from(sorted(parts)), min_size=1, unique=True))
        return {m: Subscription(tuple(topics)) for m in members}, parts
    return {m: Subscription(tuple(draw(st.lists(topic_names, min_size=1, unique=True)))) for m in members}, parts


def check_exactly_one_owner(subscriptions, parts, assignment):
    assert set(assignment) == set(subscriptions)
    owners: dict[TP, list[str]] = {}
    for m, tps in assignment.items():
        for tp in tps:
            assert tp.topic in subscriptions[m].topics  # only subscribed topics
            owners.setdefault(tp, []).append(m)
    wanted = {TP(t, p) for m in subscriptions for t in subscriptions[m].topics if t in parts for p in range(parts[t])}
    assert set(owners) == wanted
    assert all(len(v) == 1 for v in owners.values())


@settings(max_examples=150, deadline=None)
@given(group(), st.sampled_from(["range", "roundrobin", "sticky"]))
def test_every_subscribed_partition_has_exactly_one_owner(g, name):
    subscriptions, parts = g
    check_exactly_one_owner(subscriptions, parts, ASSIGNORS[name](subscriptions, parts))


@settings(max_examples=150, deadline=None)
@given(group(identical=True), st.sampled_from(["roundrobin", "sticky"]))
def test_identical_subscriptions_balanced_within_one(g, name):
    subscriptions, parts = g
    counts = [len(v) for v in ASSIGNORS[name](subscriptions, parts).values()]
    assert max(counts) - min(counts) <= 1


def minimum_moves(previous, members, total):
    """Lower bound on moves for a balanced assignment: the `extra` larger quotas go to the members
    keeping most, everyone keeps at most its quota of what it owned."""
    base, extra = divmod(total, len(members))
    kept_counts = sorted((len(previous.get(m, [])) for m in members), reverse=True)
    can_keep = sum(min(c, base + (1 if i < extra else 0)) for i, c in enumerate(kept_counts))
    still_owned = sum(len(previous.get(m, [])) for m in members)
    return still_owned - can_keep


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 24), st.integers(1, 8), st.data())
def test_sticky_moves_the_minimum_on_membership_change(n_parts, n_members, data):
    parts = {"t": n_parts}
    members = [f"m{i}" for i in range(n_members)]
    before = sticky_assign({m: Subscription(("t",)) for m in members}, parts)
    # some members leave, some new ones join
    stay = data.draw(st.lists(st.sampled_from(members), unique=True))
    joined = [f"n{i}" for i in range(data.draw(st.integers(0 if stay else 1, 4)))]
    after_members = stay + joined
    after = sticky_assign({m: Subscription(("t",), tuple(before.get(m, ()))) for m in after_members}, parts)
    check_exactly_one_owner({m: Subscription(("t",)) for m in after_members}, parts, after)
    counts = [len(v) for v in after.values()]
    assert max(counts) - min(counts) <= 1
    # partitions of members that left are not "moves"; among survivors' partitions, the minimum moves
    survivors_before = {m: before[m] for m in stay}
    assert partitions_moved(survivors_before, after) == minimum_moves(survivors_before, after_members, n_parts)
