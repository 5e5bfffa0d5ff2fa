"""Kafka's simple share-group assignor: balance (partitions over members, members over partitions), then
stickiness, homogeneous and heterogeneous subscriptions."""
import uuid
from collections import Counter

from tidelake.coordinator.share_assignor import assign

T, U = uuid.UUID(int=1), uuid.UUID(int=2)


def parts(n):
    return tuple(range(n))


def counts(target):
    return {m: sum(len(ps) for ps in a.values()) for m, a in target.items()}


def readers(target):
    return Counter((t, p) for a in target.values() for t, ps in a.items() for p in ps)


def test_fewer_members_than_partitions_split_them():
    target = assign({"a": frozenset({T}), "b": frozenset({T})}, {T: parts(4)}, {})
    assert counts(target) == {"a": 2, "b": 2}
    assert set(readers(target).values()) == {1} and len(readers(target)) == 4


def test_more_members_than_partitions_share_them_evenly():
    members = {m: frozenset({T}) for m in "abc"}
    target = assign(members, {T: parts(2)}, {})
    assert readers(target) == {(T, 0): 2, (T, 1): 2}  # ceil(3 / 2) readers each
    assert sorted(counts(target).values()) == [1, 1, 2]
    assert assign({m: frozenset({T}) for m in "abcde"}, {T: parts(1)}, {}) == {m: {T: (0,)} for m in "abcde"}


def test_a_joining_member_moves_as_little_as_balance_needs():
    before = {"a": {T: (0, 1, 2)}, "b": {T: (3, 4, 5)}}
    target = assign({m: frozenset({T}) for m in "abc"}, {T: parts(6)}, before)
    assert counts(target) == {"a": 2, "b": 2, "c": 2}
    assert set(target["a"][T]) <= {0, 1, 2} and set(target["b"][T]) <= {3, 4, 5}
    assert assign({m: frozenset({T}) for m in "abc"}, {T: parts(6)}, target) == target  # a balanced assignment stays


def test_a_balanced_assignment_survives_a_member_leaving_and_a_topic_growing():
    target = assign({"a": frozenset({T}), "b": frozenset({T})}, {T: parts(2)}, {"a": {T: (1,)}, "b": {T: (0,)}})
    assert target == {"a": {T: (1,)}, "b": {T: (0,)}}
    assert assign({"a": frozenset({T})}, {T: parts(2)}, target) == {"a": {T: (0, 1)}}
    grown = assign({"a": frozenset({T}), "b": frozenset({T})}, {T: parts(4)}, target)
    assert counts(grown) == {"a": 2, "b": 2} and 1 in grown["a"][T] and 0 in grown["b"][T]


def test_same_subscriptions_are_balanced_across_topics_different_ones_per_topic():
    same = assign({"a": frozenset({T, U}), "b": frozenset({T, U})}, {T: parts(1), U: parts(1)}, {})
    assert counts(same) == {"a": 1, "b": 1} and len(readers(same)) == 2
    mixed = assign({"a": frozenset({T}), "b": frozenset({T, U})}, {T: parts(2), U: parts(1)}, {})
    assert mixed["b"][U] == (0,) and "a" in mixed and U not in mixed["a"]
    assert readers(mixed) == {(T, 0): 1, (T, 1): 1, (U, 0): 1}
    assert assign({"a": frozenset({T})}, {}, {}) == {"a": {}}  # the topic does not exist (yet)


def test_only_assignable_partitions_are_assigned():
    """Kafka assigns a share group only the partitions whose share state is initialized."""
    assert assign({"a": frozenset({T}), "b": frozenset({T})}, {T: (2,)}, {"a": {T: (0, 1, 2)}}) == {
        "a": {T: (2,)}, "b": {T: (2,)}}
