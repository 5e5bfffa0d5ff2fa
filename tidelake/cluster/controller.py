"""The controller (Kafka's ZooKeeper-mode ``KafkaController``): one broker of the cluster, elected by
creating the ephemeral ``/controller`` znode, that decides partition leadership and tells the brokers.

Every broker runs a ``Controller``; only the elected one acts. Its work is a queue of events
processed one at a time on the broker's event loop (``controller_events.py``): the election itself,
brokers joining or leaving ``/brokers/ids``, topics appearing under ``/brokers/topics``, deletion
requests under ``/admin/delete_topics``, ISR changes that leaders report under
``/isr_change_notification``, and the requests only the controller answers (ElectLeaders,
ControlledShutdown, AlterPartitionReassignments).

On election the controller bumps ``/controller_epoch``; every partition-state write it makes checks
that epoch's znode version in the same ZooKeeper transaction, and every request it sends carries the
epoch, so a controller that lost its session (and was replaced) can neither write nor be obeyed.

Leaders are chosen by ``election.py`` (Kafka's: the first replica in assignment order that is alive and in
the ISR; if none, with ``unclean.leader.election.enable`` the first live replica, else the partition stays
offline until an ISR member returns); the controller writes the choice in a new leader epoch
(``partition_states.py``) and tells the brokers (``controller_requests.py``). New topics and partitions are its
``TopicCreator``'s (``topic_creation.py``), topic deletion its ``TopicDeletionManager``'s (``topic_deletion.py``)
and partition reassignment its ``PartitionReassigner``'s (``reassignment.py``).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from tidelake import errors
from tidelake.cluster import election
from tidelake.cluster.controller_context import ControllerContext
from tidelake.cluster.controller_events import (AlterReassignments, BrokersChanged, ControlledShutdown, ControllerEvent,
                                                ControllerEventQueue, DeletionsRequested, Elect, ElectLeaders,
                                                IsrChanged, PartitionsChanged, RebalanceDue, TopicsChanged,
                                                ZkReassignment)
from tidelake.cluster.controller_requests import ControllerRequests
from tidelake.cluster.election import Refused
from tidelake.cluster.partition_states import PartitionStates
from tidelake.cluster.reassignment import PartitionReassigner, ReplicaAssignment
from tidelake.cluster.topic_creation import TopicCreator
from tidelake.cluster.topic_deletion import TopicDeletionManager
from tidelake.cluster.znodes import BrokerRegistration
from tidelake.cluster.zk_store import ClusterStore, StaleWrite

log = logging.getLogger("tidelake.cluster.controller")

MAX_STATE_WRITE_ATTEMPTS = 10


@dataclass(frozen=True)
class BrokerChanges:
    """/brokers/ids as just read, against the controller's live brokers."""
    registrations: dict[int, BrokerRegistration]  # every registered broker, with its epoch
    joined: set[int]
    left: set[int]
    bounced: set[int]  # registered before and now, under a new broker epoch: restarted in between


class Controller:
    def __init__(self, broker_id: int, store: ClusterStore, *, unclean_default: Callable[[], bool],
                 auto_rebalance: Callable[[], bool] = lambda: False, rebalance_interval_s: float = 300.0,
                 imbalance_percentage: int = 10):
        self.broker_id = broker_id
        self.store = store
        self.listener = ""  # the inter-broker listener, given at start: the brokers' endpoints the channels use
        self._unclean_default = unclean_default
        self._auto_rebalance = auto_rebalance  # auto.leader.rebalance.enable
        self._rebalance_interval_s = rebalance_interval_s  # leader.imbalance.check.interval.seconds
        self._imbalance_percentage = imbalance_percentage  # leader.imbalance.per.broker.percentage
        self.context = ControllerContext(broker_id)
        self.partition_states = PartitionStates(self.context, store)
        self.requests = ControllerRequests(self.context)
        self.reassigner = PartitionReassigner(self.context, store, self.partition_states, self.requests,
                                              self._still_controller)
        self.topic_creator = TopicCreator(self.context, store, self.partition_states, self.requests,
                                          lambda topic: self.events.watch(PartitionsChanged(topic)),
                                          self._still_controller, self._repair)
        self.topic_deletion = TopicDeletionManager(self.context, store, self.requests)
        self.events = ControllerEventQueue(self._process)
        # every event type's handler (events are dispatched by type)
        self.handlers: dict[type[ControllerEvent], Callable[[Any], Awaitable[None]]] = {
            Elect: lambda _: self._elect(),
            BrokersChanged: lambda _: self._on_brokers_changed(),
            TopicsChanged: lambda _: self.topic_creator.on_topics_changed(self.events.watch(TopicsChanged())),
            PartitionsChanged: lambda e: self.topic_creator.on_partitions_added(e.topic),
            DeletionsRequested: lambda _: self.topic_deletion.on_delete_requests(
                self.events.watch(DeletionsRequested())),
            IsrChanged: lambda _: self._on_isr_changes(),
            RebalanceDue: lambda _: self._rebalance_leaders(),
            ZkReassignment: lambda _: self.reassigner.on_zk_reassignment(self.events.watch(ZkReassignment())),
            ElectLeaders: self._elect_leaders,
            ControlledShutdown: self._controlled_shutdown,
            AlterReassignments: self._alter_reassignments,
        }
        self._rebalance_task: asyncio.Task | None = None

    @property
    def active(self) -> bool:
        """Whether this broker is the elected controller."""
        return self.context.active

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self, inter_broker_listener: str) -> None:
        self.listener = inter_broker_listener
        self.events.start()
        self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_clock())
        self.events.put(Elect())

    async def stop(self) -> None:
        await self.events.stop()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            try:
                await self._rebalance_task
            except (asyncio.CancelledError, Exception):
                pass
        channels = self.requests.channels
        self._resign()
        if channels is not None:
            await channels.wait_closed()

    async def _rebalance_clock(self) -> None:
        while True:
            await asyncio.sleep(self._rebalance_interval_s)
            if self.context.active and self._auto_rebalance():
                self.events.put(RebalanceDue())

    def session_renewed(self) -> None:
        """Our ZooKeeper session expired and a new one began: /controller (if it was ours) and every
        watch are gone. Resign and run the election again."""
        if self.context.active:
            log.info("broker %d resigns as controller: its ZooKeeper session expired", self.broker_id)
            self._resign()
        self.events.put(Elect())

    async def _process(self, event: ControllerEvent) -> None:
        if event.active_only and not self.context.active:
            return
        await self.handlers[type(event)](event)

    # -- controller election ---------------------------------------------------------------------------
    async def _elect(self) -> None:
        store = self.store
        current = await asyncio.to_thread(store.controller_id, self.events.watch(Elect()))
        if current == self.broker_id and self.context.active:
            return
        if current != -1:
            if self.context.active:  # someone else holds /controller now: we lost it
                log.info("broker %d is no longer the controller (broker %d is)", self.broker_id, current)
                self._resign()
            return
        if not await asyncio.to_thread(store.try_elect, self.broker_id):
            await asyncio.to_thread(store.controller_id, self.events.watch(Elect()))
            return
        self.context.epoch, self.context.epoch_version = await asyncio.to_thread(store.increment_controller_epoch)
        log.info("broker %d elected controller (epoch %d)", self.broker_id, self.context.epoch)
        self.context.active = True
        self.requests.open(self.listener)
        await self._failover()

    def _resign(self) -> None:
        self.requests.close()
        self.context.resign()

    async def _failover(self) -> None:
        """Read the whole cluster, repair leadership, and tell every broker everything."""
        for registration in (await self._read_brokers()).registrations.values():
            self._add_live(registration)
        names = await asyncio.to_thread(self.store.topic_names, self.events.watch(TopicsChanged()))
        for name in names:
            await self.topic_creator.load(name)
        for (topic, p) in sorted(self.context.states):
            await self._repair(topic, p)
        for topic in names:
            for p in self.context.assignments[topic].partitions:
                if (topic, p) not in self.context.states:
                    await self.topic_creator.init_partition(topic, p)
        self.requests.leader_and_isr(list(self.context.states))
        self.requests.update_metadata()
        await self.topic_deletion.on_delete_requests(self.events.watch(DeletionsRequested()))
        await self._on_isr_changes()
        await self.reassigner.resume()  # a reassignment the previous controller left half-way
        # and any written to /admin/reassign_partitions (watched from now on)
        await self.reassigner.on_zk_reassignment(self.events.watch(ZkReassignment()))

    # -- brokers -------------------------------------------------------------------------------------
    async def _read_brokers(self) -> BrokerChanges:
        """Re-read /brokers/ids (watched again) and every registration in it, epochs included; ``context.live``
        is not changed here."""
        ids = await asyncio.to_thread(self.store.live_broker_ids, self.events.watch(BrokersChanged()))
        now: dict[int, BrokerRegistration] = {}
        for bid in ids:
            reg = await asyncio.to_thread(self.store.broker, bid)
            if reg is not None:
                now[bid] = reg
        before = self.context.live
        # same id, another znode: the broker went and came back between the watch and this read (KIP-380)
        bounced = {bid for bid in set(now) & set(before) if now[bid].epoch != before[bid].epoch}
        return BrokerChanges(now, joined=set(now) - set(before), left=set(before) - set(now), bounced=bounced)

    def _add_live(self, registration: BrokerRegistration) -> None:
        self.context.live[registration.broker_id] = registration
        self.requests.add_broker(registration.broker_id, registration)

    def _remove_live(self, broker_id: int) -> None:
        """Gone (or restarted: what was queued for the old process is dropped with its channel)."""
        self.context.live.pop(broker_id, None)
        self.requests.remove_broker(broker_id)
        self.context.shutting_down.discard(broker_id)

    async def _repair_all(self) -> set[tuple[str, int]]:
        return {key for key in sorted(self.context.states) if await self._repair(*key)}

    async def _on_brokers_changed(self) -> None:
        change = await self._read_brokers()
        if change.left:
            log.info("controller: brokers %s left", sorted(change.left))
        if change.bounced:
            log.info("controller: brokers %s restarted (new broker epoch)", sorted(change.bounced))
        if change.joined:
            log.info("controller: brokers %s joined", sorted(change.joined))
        changed: set[tuple[str, int]] = set()
        # as Kafka's processBrokerChange: a restarted broker first fails (its leaderships move to other ISR
        # members, it leaves the ISRs), then starts up like a new one
        for bid in change.left | change.bounced:
            self._remove_live(bid)
        if change.left or change.bounced:
            changed |= await self._repair_all()
        started = change.joined | change.bounced
        for bid in sorted(started):
            self._add_live(change.registrations[bid])
        if started:  # offline partitions may have a leader again
            changed |= await self._repair_all()
        # the started brokers learn every partition they host; the changed partitions go to their replicas
        self.requests.update_metadata()
        self.requests.leader_and_isr(sorted(changed))
        for bid in sorted(started):
            self.requests.leader_and_isr([k for k in self.context.states if bid in self.context.replicas(k)], only=bid)

    async def _repair(self, topic: str, partition: int) -> bool:
        """Elect a leader for a partition whose leader is gone (or that has none) and drop dead
        replicas from its ISR. Returns whether the state changed."""
        ctx, key = self.context, (topic, partition)
        if topic in ctx.deleting:
            return False
        replicas = ctx.replicas(key)
        for _attempt in range(MAX_STATE_WRITE_ATTEMPTS):
            st = ctx.states[key]
            choice = election.offline_election(replicas, st, ctx.live, ctx.shutting_down)
            if election.unclean_would_elect(choice, replicas, ctx.live) and await self._unclean_allowed(topic):
                choice = election.offline_election(replicas, st, ctx.live, ctx.shutting_down, unclean=True)
                log.warning("controller: unclean election of broker %d for %s-%d (data may be lost)",
                            choice.leader, topic, partition)
            if choice.leader == st.leader and choice.isr == st.isr:
                return False
            try:
                new = await self.partition_states.write(key, st, choice)
                log.info("controller: %s-%d leader %d epoch %d isr %s", topic, partition, new.leader,
                         new.leader_epoch, new.isr)
                return True
            except StaleWrite:
                if not await self._still_controller() or await self.partition_states.refresh(key) is None:
                    return False
        return False

    async def _still_controller(self) -> bool:
        epoch = await asyncio.to_thread(self.store.controller_epoch)
        if epoch != self.context.epoch:
            log.info("controller epoch moved to %d: broker %d resigns", epoch, self.broker_id)
            self._resign()
            self.events.put(Elect())
            return False
        return True

    async def _unclean_allowed(self, topic: str) -> bool:
        value = (await asyncio.to_thread(self.store.topic_config, topic)).get("unclean.leader.election.enable")
        return self._unclean_default() if value is None else value.strip().lower() == "true"

    # -- ISR changes leaders reported ------------------------------------------------------------------
    async def _on_isr_changes(self) -> None:
        changed = await asyncio.to_thread(self.store.take_isr_changes, self.events.watch(IsrChanged()))
        fresh = []
        for key in set(changed):
            if key in self.context.states and await self.partition_states.refresh(key) is not None:
                fresh.append(key)
        if fresh:
            self.requests.update_metadata()
            await self.reassigner.resume(sorted(fresh))  # new replicas may have joined the ISR

    # -- ElectLeaders (KIP-460) ---------------------------------------------------------------------------
    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool
                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Elect the preferred replica (or, ``unclean``, any live replica of a leaderless partition) of
        ``partitions`` (None: all); (error code, message) per partition. Only on the active controller."""
        return await self.events.request(lambda future: ElectLeaders(future, partitions, unclean))

    async def _elect_leaders(self, request: ElectLeaders) -> None:
        partitions, unclean, fut = request.partitions, request.unclean, request.future
        ctx = self.context
        results: dict[tuple[str, int], tuple[int, str | None]] = {}
        changed = []
        for key in (sorted(ctx.states) if partitions is None else partitions):
            if not ctx.active:
                results[key] = (errors.NotController.code, "no longer the controller")
                continue
            if key not in ctx.states or key[0] in ctx.deleting:
                results[key] = (errors.UnknownTopicOrPartition.code, f"{key[0]}-{key[1]} does not exist")
                continue
            await self.partition_states.refresh(key)
            st = ctx.states[key]
            choice = election.unclean_election(ctx.replicas(key), st, ctx.live) if unclean \
                else election.preferred_election(ctx.replicas(key), st, ctx.live, ctx.shutting_down)
            if isinstance(choice, Refused):
                results[key] = (choice.code, choice.message)
                continue
            try:
                new = await self.partition_states.write(key, st, choice)
            except StaleWrite:
                results[key] = (errors.NotController.code if not await self._still_controller()
                                else errors.RequestTimedOut.code, "the partition changed meanwhile; retry")
                continue
            log.info("controller: elected %d for %s-%d (%s), epoch %d", new.leader, key[0], key[1],
                     "unclean" if unclean else "preferred", new.leader_epoch)
            results[key] = (errors.NONE, None)
            changed.append(key)
        if changed:
            self.requests.leader_and_isr(changed)
            self.requests.update_metadata()
        if not fut.done():
            fut.set_result(results)

    # -- Alter/ListPartitionReassignments (KIP-455; the steps are the reassigner's) --------------------------
    async def alter_reassignments(self, wanted: dict[tuple[str, int], list[int] | None], allow_rf_change: bool = True
                                  ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Start (a list of replicas) or cancel (None) the reassignment of each partition; (error code,
        message) per partition once it has started, not finished. Only on the active controller."""
        return await self.events.request(lambda future: AlterReassignments(future, wanted, allow_rf_change))

    async def _alter_reassignments(self, request: AlterReassignments) -> None:
        fut = request.future
        try:
            results = await self.reassigner.alter(request.wanted, request.allow_rf_change)
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
            raise
        if not fut.done():
            fut.set_result(results)

    def ongoing_reassignments(self, partitions: list[tuple[str, int]] | None
                              ) -> dict[tuple[str, int], ReplicaAssignment]:
        """ListPartitionReassignments: the partitions (None: all) being reassigned."""
        return self.reassigner.ongoing(partitions)

    # -- controlled shutdown ------------------------------------------------------------------------------
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """A broker about to stop asks the controller to move its leaderships and take it out of the
        ISRs first (Kafka's ControlledShutdown); returns the partitions it still leads (no other ISR member).
        ``broker_epoch`` older than its registration's: a previous process asking (StaleBrokerEpoch); -1: unknown."""
        return await self.events.request(lambda future: ControlledShutdown(future, broker_id, broker_epoch))

    async def _controlled_shutdown(self, request: ControlledShutdown) -> None:
        broker_id, broker_epoch, fut = request.broker_id, request.broker_epoch, request.future
        if not self.context.active:
            fut.set_exception(errors.NotController(f"broker {self.broker_id} is no longer the controller"))
            return
        if broker_id not in self.context.live:
            fut.set_exception(errors.BrokerNotAvailable(f"broker {broker_id} is not registered"))
            return
        if broker_epoch != -1 and broker_epoch < self.context.live[broker_id].epoch:
            log.info("controller: controlled shutdown of broker %d from an old broker epoch %d (now %d) refused",
                     broker_id, broker_epoch, self.context.live[broker_id].epoch)
            fut.set_exception(errors.StaleBrokerEpoch(f"broker {broker_id}'s epoch is "
                                                      f"{self.context.live[broker_id].epoch}, not {broker_epoch}"))
            return
        ctx = self.context
        ctx.shutting_down.add(broker_id)
        remaining, changed, followed = [], [], []
        for key in sorted(ctx.states):
            if key[0] in ctx.deleting or broker_id not in ctx.replicas(key):
                continue
            await self.partition_states.refresh(key)
            st = ctx.states[key]
            choice = election.controlled_shutdown_election(ctx.replicas(key), st, ctx.live, ctx.shutting_down,
                                                           broker_id)
            if choice is None:  # it leads with no one to take over, or it is in no ISR it can leave
                (remaining if st.leader == broker_id else followed).append(key)
                continue
            try:
                await self.partition_states.write(key, st, choice)
            except StaleWrite:
                if not await self._still_controller():
                    break
                if st.leader == broker_id:
                    remaining.append(key)
                continue
            changed.append(key)
            followed.append(key)
        if changed:
            self.requests.leader_and_isr(changed)
            self.requests.update_metadata()
        # the stopping broker stops fetching (it must not rejoin an ISR on its way out)
        by_topic: dict[str, list[int]] = {}
        for topic, p in followed:
            by_topic.setdefault(topic, []).append(p)
        for topic, parts in by_topic.items():
            self.requests.stop_replica(broker_id, topic, parts, delete=False)
        log.info("controller: controlled shutdown of broker %d moved %d partition(s); %d still led by it",
                 broker_id, len(changed), len(remaining))
        if not fut.done():
            fut.set_result(remaining)

    async def _rebalance_leaders(self) -> None:
        """Kafka's auto leader rebalance: a live broker that does not lead more than
        leader.imbalance.per.broker.percentage % of the partitions it is the preferred replica of gets
        those back where it is in the ISR (partitions being deleted or reassigned stay as they are)."""
        ctx = self.context
        movable = {k: ctx.replicas(k) for k in ctx.states
                   if k[0] not in ctx.deleting and not ctx.assignments[k[0]].reassigning(k[1])}
        wanted = election.imbalanced_partitions(movable, ctx.states, ctx.live, ctx.shutting_down,
                                                self._imbalance_percentage)
        if wanted:
            log.info("controller: leader imbalance; moving %d partition(s) back to their preferred replica",
                     len(wanted))
            await self._elect_leaders(ElectLeaders(asyncio.get_running_loop().create_future(), wanted, False))
