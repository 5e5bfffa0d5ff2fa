"""Replica assignment is Kafka's rack-unaware round robin (AdminUtils.assignReplicasToBrokers)."""
from __future__ import annotations

import collections
import random

import pytest

from tidelake.cluster.assignment import assign_replicas
from tidelake.errors import InvalidPartitions, InvalidReplicationFactor


def test_matches_kafkas_reference_assignment_for_five_brokers():
    # Kafka's AdminUtilsTest.testReplicaAssignment: brokers 0-4, 10 partitions, RF 3, fixed start index 0
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign_replicas(10, 3, [4, 2, 0, 3, 1], start_index=0) == expected


def test_leaders_and_replicas_spread_evenly():
    out = assign_replicas(30, 3, [1, 2, 3], rng=random.Random(7))
    leaders = collections.Counter(r[0] for r in out.values())
    replicas = collections.Counter(b for r in out.values() for b in r)
    assert set(leaders.values()) == {10} and set(replicas.values()) == {30}
    assert all(len(set(r)) == 3 for r in out.values())


def test_starting_partition_continues_the_numbering():
    out = assign_replicas(2, 2, [1, 2, 3], start_index=1, start_partition=3)
    assert sorted(out) == [3, 4] and all(len(set(r)) == 2 for r in out.values())


def test_refuses_impossible_requests():
    with pytest.raises(InvalidReplicationFactor, match="larger than available brokers: 2"):
        assign_replicas(1, 3, [1, 2])
    with pytest.raises(InvalidPartitions):
        assign_replicas(0, 1, [1])
    with pytest.raises(InvalidReplicationFactor):
        assign_replicas(1, 0, [1])
