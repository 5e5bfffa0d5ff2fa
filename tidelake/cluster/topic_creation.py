"""New topics and new partitions as Kafka's ZooKeeper-mode controller starts them (its ``processTopicChange``,
``processPartitionModifications`` and ``onNewPartitionCreation``): ``TopicCreator``, which the controller owns and
calls when ``/brokers/topics`` changes, when a topic's assignment gains partitions (CreatePartitions), and on
failover for every topic it reads.

A new partition's first state is the new-partition election's, in leader epoch 0, created only if it has none: a
partition an earlier controller started keeps its state and is repaired like any other. Its live replicas then
get LeaderAndIsr marked new, and every broker UpdateMetadata.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from tidelake.cluster import election
from tidelake.cluster.controller_context import ControllerContext
from tidelake.cluster.controller_requests import ControllerRequests
from tidelake.cluster.partition_states import PartitionStates
from tidelake.cluster.zk_store import ClusterStore, StaleWrite

log = logging.getLogger("tidelake.cluster.controller")


class TopicCreator:
    """The controller's topic and partition creation, run on its event queue: it reads assignments through
    ``store`` (each with ``watch_partitions(topic)``, the kazoo watch that enqueues that topic's "partitions"
    event), writes first states through ``partition_states`` and tells the brokers through ``requests``. When a
    partition has a state already, ``still_controller`` says whether the controller still is one and ``repair``
    is the controller's election for a partition whose leader may be gone."""

    def __init__(self, context: ControllerContext, store: ClusterStore, partition_states: PartitionStates,
                 requests: ControllerRequests, watch_partitions: Callable[[str], Callable],
                 still_controller: Callable[[], Awaitable[bool]], repair: Callable[[str, int], Awaitable[bool]]):
        self.context = context
        self.store = store
        self.partition_states = partition_states
        self.requests = requests
        self._watch_partitions = watch_partitions
        self._still_controller = still_controller
        self._repair = repair

    async def load(self, name: str) -> None:
        """Read a topic's assignment and its partitions' states into the context (nothing if it is gone)."""
        assignment = await asyncio.to_thread(self.store.topic_assignment, name, self._watch_partitions(name))
        if assignment is None:
            return
        self.context.assignments[name] = assignment
        for p in assignment.partitions:
            await self.partition_states.refresh((name, p))

    async def init_partition(self, topic: str, partition: int) -> None:
        """Give a partition with no state its first one (or repair the one an earlier controller wrote)."""
        key = (topic, partition)
        try:
            await self.partition_states.create(key, election.new_partition_election(self.context.replicas(key),
                                                                                    self.context.live))
        except StaleWrite:  # it exists already (an earlier controller), or we were deposed
            if await self._still_controller() and await self.partition_states.refresh(key) is not None:
                await self._repair(topic, partition)

    async def on_topics_changed(self, watch: Callable) -> None:
        """``/brokers/topics`` changed: start the topics new to the context, forget the ones gone from it.
        ``watch`` fires on the next change."""
        names = await asyncio.to_thread(self.store.topic_names, watch)
        new = [n for n in names if n not in self.context.assignments]
        created = []
        for name in new:
            await self.load(name)
            if name not in self.context.assignments:
                continue
            for p in sorted(self.context.assignments[name].partitions):
                if (name, p) not in self.context.states:
                    await self.init_partition(name, p)
                if (name, p) in self.context.states:
                    created.append((name, p))
            log.info("controller: new topic %s", name)
        for name in [n for n in self.context.assignments if n not in names]:  # removed behind our back
            self.context.forget_topic(name)
        if created:
            self.requests.leader_and_isr(created, is_new=True)
            self.requests.update_metadata()

    async def on_partitions_added(self, name: str) -> None:
        """A topic's assignment changed (CreatePartitions): start its new partitions."""
        if name not in self.context.assignments or name in self.context.deleting:
            return
        assignment = await asyncio.to_thread(self.store.topic_assignment, name, self._watch_partitions(name))
        if assignment is None:
            return
        added = sorted(set(assignment.partitions) - set(self.context.assignments[name].partitions))
        self.context.assignments[name] = assignment
        for p in added:
            await self.init_partition(name, p)
        started = [(name, p) for p in added if (name, p) in self.context.states]
        if started:
            log.info("controller: topic %s has new partitions %s", name, added)
            self.requests.leader_and_isr(started, is_new=True)
            self.requests.update_metadata()
