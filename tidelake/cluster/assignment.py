"""Replica assignment of a new topic's partitions: Kafka's rack-unaware round robin
(``AdminUtils.assignReplicasToBrokers``).

The first replica of partition p is broker ``(p + start) % n`` of the sorted broker list; the others
follow it at a shift that grows by one every ``n`` partitions, so that leaders and followers both
spread evenly over the brokers.
"""
from __future__ import annotations

import random
from typing import Sequence

from tidelake.errors import InvalidPartitions, InvalidReplicationFactor


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(partitions: int, replication_factor: int, broker_ids: Sequence[int], *,
                    start_index: int = -1, start_partition: int = 0, rng: random.Random | None = None
                    ) -> dict[int, list[int]]:
    """Partition -> replica list. ``start_index`` -1 picks a random start (Kafka's default); a fixed one
    makes the assignment deterministic (tests). Raises InvalidReplicationFactor / InvalidPartitions."""
    if partitions <= 0:
        raise InvalidPartitions(f"Number of partitions must be larger than 0, got {partitions}")
    if replication_factor <= 0:
        raise InvalidReplicationFactor(f"Replication factor must be larger than 0, got {replication_factor}")
    brokers = sorted(broker_ids)
    n = len(brokers)
    if replication_factor > n:
        raise InvalidReplicationFactor(f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    rng = rng or random.Random()
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    out: dict[int, list[int]] = {}
    p = max(0, start_partition)
    for _ in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        out[p] = [brokers[first]] + [brokers[_replica_index(first, shift, j, n)]
                                     for j in range(replication_factor - 1)]
        p += 1
    return out
