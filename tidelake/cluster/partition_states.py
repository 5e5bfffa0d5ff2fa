"""The controller's reads and writes of ``/brokers/topics/<t>/partitions/<p>/state``, mirrored in its context.

A write is an election's outcome in a new leader epoch, made only over the znode version the controller last
read and only while ``/controller_epoch`` is still at the version it set (``StaleWrite`` otherwise, in one
ZooKeeper transaction), so a deposed controller, or one that missed a leader's ISR change, cannot overwrite.
"""
from __future__ import annotations

import asyncio

from tidelake.cluster.controller_context import ControllerContext
from tidelake.cluster.election import Election
from tidelake.cluster.znodes import PartitionState
from tidelake.cluster.zk_store import ClusterStore


class PartitionStates:
    def __init__(self, context: ControllerContext, store: ClusterStore):
        self.context = context
        self.store = store

    async def refresh(self, key: tuple[str, int]) -> PartitionState | None:
        """Read the partition's state again (its leader changes the ISR too); None if it has none."""
        fresh = await asyncio.to_thread(self.store.partition_state, *key)
        if fresh is not None:
            self.context.states[key] = fresh
        return fresh

    async def write(self, key: tuple[str, int], current: PartitionState, choice: Election) -> PartitionState:
        """``choice`` in the leader epoch after ``current``'s, over ``current``'s znode version."""
        new = PartitionState(choice.leader, current.leader_epoch + 1, choice.isr, self.context.epoch)
        self.context.states[key] = written = await asyncio.to_thread(
            self.store.update_partition_state, key[0], key[1], new, current.zk_version, self.context.epoch_version)
        return written

    async def create(self, key: tuple[str, int], choice: Election) -> PartitionState:
        """A new partition's first state (leader epoch 0); StaleWrite if it has one already."""
        new = PartitionState(choice.leader, 0, choice.isr, self.context.epoch)
        self.context.states[key] = written = await asyncio.to_thread(
            self.store.create_partition_state, key[0], key[1], new, self.context.epoch_version)
        return written
