"""Partition reassignment (KIP-455) as Kafka's ZooKeeper-mode controller runs it: ``PartitionReassigner``, which
the controller owns and calls for AlterPartitionReassignments / ListPartitionReassignments, for
``/admin/reassign_partitions`` and on ISR changes; ``ReplicaAssignment``, one partition's replicas while it moves.

A partition moving from its original replicas (ORS) to a target set (TRS) goes through Kafka's steps:

1. ``/brokers/topics/<t>`` records RS = TRS + ORS (distinct, target first), ``adding_replicas`` = TRS - ORS and
   ``removing_replicas`` = ORS - TRS; the leader epoch is bumped and every replica of RS gets LeaderAndIsr, so the
   new replicas start following the leader and the leader tracks them;
2. they catch up and the leader adds them to the ISR (its ISR change notification wakes the controller);
3. once all of TRS is in the ISR: a new leader from TRS if the current one is not in it (else the same leader in
   a new epoch), the ISR without the removed replicas, LeaderAndIsr to TRS, StopReplica with delete to ORS - TRS,
   and the topic znode says RS = TRS with nothing adding or removing.

A new target for a partition already moving is measured against the same original replicas; replicas an earlier
target added that the new one does not want are stopped and deleted at once. Cancelling (a null target) is a
reassignment back to the original replicas. Every step is idempotent: a controller elected mid-way reads the
znode and completes (or keeps waiting for) what it finds, as Kafka's does.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable

from tidelake import errors
from tidelake.cluster import election
from tidelake.cluster.controller_context import ControllerContext
from tidelake.cluster.controller_requests import ControllerRequests
from tidelake.cluster.partition_states import PartitionStates
from tidelake.cluster.znodes import TopicAssignment
from tidelake.cluster.zk_store import ClusterStore, StaleWrite

log = logging.getLogger("tidelake.cluster.controller")

MAX_STATE_WRITE_ATTEMPTS = 10


@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's replicas, and while it is being reassigned the replicas being added and removed
    (Kafka's ``ReplicaAssignment``)."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def original(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: list[int]) -> "ReplicaAssignment":
        original = self.original
        full = list(dict.fromkeys(list(target) + original))
        return ReplicaAssignment(tuple(full), tuple(r for r in target if r not in original),
                                 tuple(r for r in original if r not in target))

    @classmethod
    def of(cls, assignment: TopicAssignment, partition: int) -> "ReplicaAssignment":
        return cls(tuple(assignment.partitions[partition]), tuple(assignment.adding.get(partition, ())),
                   tuple(assignment.removing.get(partition, ())))


def invalid_target(target: list[int], current: ReplicaAssignment, live: set[int]) -> str | None:
    """Why ``target`` cannot be a partition's replicas (Kafka's ``validateReplicas``: the replicas it would add
    must be alive; the ones it keeps need not be), or None."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {target}"
    if any(r < 0 for r in target):
        return f"Invalid broker id in replica list: {target}"
    adding = list(current.reassign_to(target).adding)
    if not set(adding) <= live:
        return (f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
                f"live broker list: {sorted(live)}")
    return None


class PartitionReassigner:
    """The controller's reassignment steps, run on its event queue: they read and update the controller's
    context, write topic assignments through ``store`` and partition states through ``partition_states`` (both
    checking the controller epoch), and tell the brokers through ``requests``; ``still_controller`` says (after
    a write lost a race) whether the controller still is one."""

    def __init__(self, context: ControllerContext, store: ClusterStore, partition_states: PartitionStates,
                 requests: ControllerRequests, still_controller: Callable[[], Awaitable[bool]]):
        self.context = context
        self.store = store
        self.partition_states = partition_states
        self.requests = requests
        self._still_controller = still_controller

    async def alter(self, wanted: dict[tuple[str, int], list[int] | None], allow_rf_change: bool
                    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """AlterPartitionReassignments: start (a list of replicas) or cancel (None) each partition's move; (error
        code, message) per partition. The latest request wins: the partitions it moves leave
        /admin/reassign_partitions."""
        results = await self._start_reassignments(wanted, allow_rf_change)
        started = {k for k, (code, _m) in results.items() if code == errors.NONE}
        if started and self.context.active:
            await self._remove_from_zk_reassignment(lambda key, _replicas: key in started)
        return results

    async def on_zk_reassignment(self, watch: Callable) -> None:
        """``/admin/reassign_partitions`` appeared or changed (a tool wrote to ZooKeeper, as kafka-reassign-partitions
        --zookeeper did): start what it lists; partitions that cannot move leave it at once, the others when
        their move completes, and the znode goes when it is empty (Kafka's processZkPartitionReassignment).
        ``watch`` fires on the next change."""
        wanted = await asyncio.to_thread(self.store.zk_reassignment, watch)
        if wanted is None:
            return
        results = await self._start_reassignments(dict(wanted), True)
        failed = {k: m for k, (code, m) in results.items() if code != errors.NONE}
        for (topic, p), message in sorted(failed.items()):
            log.warning("controller: %s of %s-%d: %s", "/admin/reassign_partitions", topic, p, message)
        if self.context.active:
            await self._remove_from_zk_reassignment(lambda key, replicas: key in failed or self._moved(key, replicas))

    def _moved(self, key: tuple[str, int], replicas: list[int]) -> bool:
        a = self.context.assignments.get(key[0])
        return a is not None and not a.reassigning(key[1]) and a.partitions.get(key[1]) == list(replicas)

    async def _remove_from_zk_reassignment(self, drop) -> None:
        """Rewrite /admin/reassign_partitions without the entries ``drop(partition, replicas)`` names."""
        current = await asyncio.to_thread(self.store.zk_reassignment)
        if current is None:
            return
        remaining = {k: r for k, r in current.items() if not drop(k, r)}
        if remaining == current and current:
            return
        try:
            await asyncio.to_thread(self.store.set_zk_reassignment, remaining, self.context.epoch_version)
        except StaleWrite:
            await self._still_controller()

    async def _start_reassignments(self, wanted: dict[tuple[str, int], list[int] | None], allow_rf_change: bool
                                   ) -> dict[tuple[str, int], tuple[int, str | None]]:
        results: dict[tuple[str, int], tuple[int, str | None]] = {}
        for key, target in wanted.items():
            if not self.context.active:
                results[key] = (errors.NotController.code, "no longer the controller")
                continue
            topic, p = key
            a = self.context.assignments.get(topic)
            if a is None or p not in a.partitions or topic in self.context.deleting or key not in self.context.states:
                results[key] = (errors.UnknownTopicOrPartition.code, f"{topic}-{p} does not exist")
                continue
            current = ReplicaAssignment.of(a, p)
            if target is None:
                if not current.is_being_reassigned:
                    results[key] = (errors.NoReassignmentInProgress.code,
                                    f"no reassignment of {topic}-{p} is in progress")
                    continue
                target = current.original
            else:
                problem = invalid_target(list(target), current, set(self.context.live))
                if problem is None and not allow_rf_change and len(target) != len(current.original):
                    results[key] = (errors.InvalidReplicationFactor.code,
                                    f"the replication factor of {topic}-{p} would change from "
                                    f"{len(current.original)} to {len(target)}")
                    continue
                if problem is not None:
                    results[key] = (errors.InvalidReplicaAssignment.code, problem)
                    continue
            try:
                await self._reassign(key, current, list(target))
                results[key] = (errors.NONE, None)
            except StaleWrite:
                results[key] = (errors.NotController.code if not await self._still_controller()
                                else errors.RequestTimedOut.code, "the partition changed meanwhile; retry")
        return results

    def ongoing(self, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], ReplicaAssignment]:
        """ListPartitionReassignments: the partitions (None: all) being reassigned, from the controller's view."""
        out = {}
        keys = sorted((t, p) for t, a in self.context.assignments.items() for p in a.partitions) if partitions is None \
            else partitions
        for topic, p in keys:
            a = self.context.assignments.get(topic)
            if a is not None and p in a.partitions and a.reassigning(p):
                out[(topic, p)] = ReplicaAssignment.of(a, p)
        return out

    async def _reassign(self, key: tuple[str, int], current: ReplicaAssignment, target: list[int]) -> None:
        topic, p = key
        if current.is_being_reassigned and current.target == list(target):
            # already moving there (the same request again, or /admin/reassign_partitions rewritten)
            if await self._reassignment_complete(key, current):
                await self._complete_reassignment(key, current)
            return
        new = current.reassign_to(target)
        unneeded = [r for r in current.replicas if r not in new.replicas]  # added by an earlier target only
        log.info("controller: reassigning %s-%d from %s to %s (adding %s, removing %s)", topic, p, new.original,
                 target, list(new.adding), list(new.removing))
        await self._write_assignment(key, new)
        if await self._reassignment_complete(key, new):
            await self._complete_reassignment(key, new, also_removed=unneeded)
            return
        # RS = ORS + TRS: the new replicas learn they are followers, the leader learns of them (a new epoch)
        await self._write_replica_state(key, list(new.replicas), removed=unneeded)
        self.requests.leader_and_isr([key])
        self._stop_removed(key, unneeded)
        self.requests.update_metadata()

    async def resume(self, keys: list[tuple[str, int]] | None = None) -> None:
        """Complete the reassignments (of ``keys``, None: all) whose target replicas are all in the ISR now."""
        for key in (sorted(self.context.states) if keys is None else keys):
            a = self.context.assignments.get(key[0])
            if a is None or key[1] not in a.partitions or not a.reassigning(key[1]) or key[0] in self.context.deleting:
                continue
            ra = ReplicaAssignment.of(a, key[1])
            try:
                if await self._reassignment_complete(key, ra):
                    await self._complete_reassignment(key, ra)
            except StaleWrite:
                if not await self._still_controller():
                    return
                log.info("controller: completing the reassignment of %s-%d lost a race; retried on the next "
                         "ISR change", *key)

    async def _reassignment_complete(self, key: tuple[str, int], ra: ReplicaAssignment) -> bool:
        await self.partition_states.refresh(key)
        st = self.context.states[key]
        # (a target replica left alive to lead it: one that died while still in the ISR cannot take over)
        return all(r in st.isr for r in ra.target) and any(
            r in self.context.live and r not in self.context.shutting_down for r in ra.target)

    async def _complete_reassignment(self, key: tuple[str, int], ra: ReplicaAssignment,
                                     also_removed: list[int] = ()) -> None:
        topic, p = key
        target = ra.target
        removed = [r for r in ra.replicas if r not in target] + [r for r in also_removed if r not in ra.replicas]
        done = ReplicaAssignment(tuple(target))
        await self._write_replica_state(key, target, removed=removed, leader_from=target)
        self.context.assignments[topic].partitions[p] = list(target)
        self.context.assignments[topic].adding.pop(p, None)
        self.context.assignments[topic].removing.pop(p, None)
        self.requests.leader_and_isr([key])
        self._stop_removed(key, removed)
        await self._write_assignment(key, done)
        self.requests.update_metadata()
        await self._remove_from_zk_reassignment(lambda k, replicas: k == key and list(replicas) == list(target))
        log.info("controller: reassignment of %s-%d done: replicas %s, leader %d", topic, p, target,
                 self.context.states[key].leader)

    async def _write_assignment(self, key: tuple[str, int], ra: ReplicaAssignment) -> None:
        topic, p = key
        current = self.context.assignments[topic]
        updated = TopicAssignment(topic, current.topic_id, dict(current.partitions), dict(current.adding),
                                  dict(current.removing))
        updated.partitions[p] = list(ra.replicas)
        updated.adding[p] = list(ra.adding)
        updated.removing[p] = list(ra.removing)
        if not ra.adding:
            updated.adding.pop(p)
        if not ra.removing:
            updated.removing.pop(p)
        await asyncio.to_thread(self.store.set_topic_assignment, updated)
        self.context.assignments[topic] = updated

    async def _write_replica_state(self, key: tuple[str, int], replicas: list[int], *, removed: list[int],
                                   leader_from: list[int] | None = None) -> None:
        """A new leader epoch for the partition: the ISR without ``removed``; the leader kept if it is still a
        live replica (in ``leader_from``, default ``replicas``), else the first of those alive and in the ISR."""
        ctx = self.context
        for _attempt in range(MAX_STATE_WRITE_ATTEMPTS):
            st = ctx.states[key]
            choice = election.reassignment_election(replicas, replicas if leader_from is None else leader_from,
                                                    removed, st, ctx.live, ctx.shutting_down)
            try:
                new = await self.partition_states.write(key, st, choice)
                log.info("controller: %s-%d leader %d epoch %d isr %s (reassignment)", *key, new.leader,
                         new.leader_epoch, new.isr)
                return
            except StaleWrite:
                if not await self._still_controller() or await self.partition_states.refresh(key) is None:
                    raise
        raise StaleWrite(f"{key[0]}-{key[1]}: the partition state kept changing")

    def _stop_removed(self, key: tuple[str, int], removed: list[int]) -> None:
        """StopReplica with delete to replicas that are no longer the partition's (a dead one learns at its
        next LeaderAndIsr that it is not a replica; its files stay, as in Kafka until it comes back)."""
        for bid in removed:
            if bid in self.context.live:
                self.requests.stop_replica(bid, key[0], [key[1]], delete=True)
