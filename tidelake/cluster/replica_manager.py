"""``ReplicaManager``: this broker's replicas and their roles (Kafka's ``ReplicaManager`` + ``Partition``).

LeaderAndIsr from the controller makes a replica the leader or a follower of a partition (only a
newer leader epoch changes anything). As leader it:

* tracks each follower's log end offset (LEO) from the offsets of its Fetch requests;
* advances the high watermark to the smallest LEO in the ISR (its own included), which is what
  consumers may read and what acks=all producers wait for (``wait_for_hw``); while an ISR change is being
  written, the ISR counted is the written one plus the new one (Kafka's maximal ISR);
* takes each follower's log start offset from its Fetch requests: the partition's low watermark (the
  smallest log start of the replicas on live brokers, its own included) is what DeleteRecords waits for
  (``wait_for_low_watermark``), as Kafka's DelayedDeleteRecords;
* shrinks the ISR when a follower has not caught up for ``replica.lag.time.max.ms``, and expands it
  when a follower reaches the high watermark again, writing each change to the partition's state
  znode at the version it last knew (a controller's newer write wins; the leader then waits for the
  controller's LeaderAndIsr) and notifying the controller under ``/isr_change_notification``.

As follower the partition is handed to the ``ReplicaFetcher`` of its leader.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Callable

from kazoo.exceptions import KazooException

from tidelake import errors
from tidelake.cluster.znodes import NO_LEADER, PartitionState
from tidelake.cluster.zk_store import ClusterStore, StaleWrite
from tidelake.log import LogManager, PartitionLog

log = logging.getLogger("tidelake.cluster.replicas")


@dataclass
class Replica:
    """This broker's view of one partition it hosts."""
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    zk_version: int
    controller_epoch: int
    # leader only: follower id -> LEO (-1 until its first fetch), and when it was last caught up (ms)
    follower_leo: dict[int, int] = field(default_factory=dict)
    # leader only: follower id -> the log start offset its last Fetch named (-1 until then): the low watermark's input
    follower_log_start: dict[int, int] = field(default_factory=dict)
    caught_up_ms: dict[int, int] = field(default_factory=dict)
    # the ISR this broker, as leader, is writing to ZooKeeper (None: no write under way)
    pending_isr: list[int] | None = None
    adding: list[int] = field(default_factory=list)  # replicas a reassignment is adding (KIP-455), not yet counted

    @property
    def maximal_isr(self) -> set[int]:
        """The ISR the high watermark waits for (Kafka's maximal ISR): the written one and, while a change is being
        written, the new one too. A follower joins it before ZooKeeper names it in-sync, so a write acknowledged
        meanwhile is on it when the controller may already elect it; one leaving is waited for until it is gone."""
        return set(self.isr) | set(self.pending_isr or ())


class ReplicaManager:
    def __init__(self, broker_id: int, logs: LogManager, store: ClusterStore, *, clock_ms: Callable[[], int],
                 lag_time_max_ms: Callable[[], int], min_insync: Callable[[str], int],
                 create_log: Callable[[str, int], PartitionLog], notify: Callable[[str, int], None],
                 is_alive: Callable[[int], bool]):
        self.broker_id = broker_id
        self.logs = logs
        self.store = store
        self.clock_ms = clock_ms
        self.lag_time_max_ms = lag_time_max_ms
        self.min_insync = min_insync
        self.create_log = create_log
        self.notify = notify  # wakes Fetch long-polls of the partition (HW moved)
        self.is_alive = is_alive  # a broker is registered (the low watermark counts only live replicas)
        self.replicas: dict[tuple[str, int], Replica] = {}
        self.controller_epoch = 0
        self._hw_waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future]]] = {}
        self._lw_waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future]]] = {}  # DeleteRecords
        self.checkpointed_hw: dict[tuple[str, int], int] = {}  # from replication-offset-checkpoint at start
        # who hears of role changes (set_role_listeners): nobody until the member has its fetchers
        self._on_become_follower: Callable[[Replica, PartitionLog], None] = lambda r, plog: None
        self._on_stop_following: Callable[[str, int], None] = lambda t, p: None
        self._on_role: Callable[[str, int, bool], None] = lambda t, p, leader: None  # leader now, or no longer
        self._background: set[asyncio.Task] = set()
        # since start, for the metrics: ISR changes this broker wrote as leader, leaderships it took
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leader_elections = 0

    def set_role_listeners(self, *, on_role: Callable[[str, int, bool], None],
                           on_become_follower: Callable[[Replica, PartitionLog], None],
                           on_stop_following: Callable[[str, int], None]) -> None:
        """Who is told of this broker's role changes: ``on_role`` when it becomes (True) or stops being
        (False) a partition's leader, ``on_become_follower`` / ``on_stop_following`` to start and stop
        fetching from the leader."""
        self._on_role = on_role
        self._on_become_follower = on_become_follower
        self._on_stop_following = on_stop_following

    # -- LeaderAndIsr --------------------------------------------------------------------------------
    def check_controller_epoch(self, epoch: int) -> None:
        """Kafka's fencing of a deposed controller: a request from an older epoch is refused."""
        if epoch < self.controller_epoch:
            raise errors.StaleControllerEpoch(f"controller epoch {epoch} is older than {self.controller_epoch}")
        self.controller_epoch = epoch

    def apply_leader_and_isr(self, topic: str, ps) -> int:
        """Apply one partition state of a LeaderAndIsr request; returns the partition's error code."""
        key = (topic, ps.partition_index)
        current = self.replicas.get(key)
        if current is not None and ps.leader_epoch < current.leader_epoch:
            return errors.StaleControllerEpoch.code
        if self.broker_id not in ps.replicas:
            return errors.NONE
        plog = self.logs.get(topic, ps.partition_index) or self.create_log(topic, ps.partition_index)
        if not plog.replicated:  # first role since start: the checkpointed high watermark, not the log end
            plog.high_watermark = self.checkpointed_hw.get(key, plog.log_start_offset)
        if current is not None and ps.leader_epoch == current.leader_epoch:
            # the same epoch again (a controller failover re-sends everything): refresh, no role change
            current.isr, current.replicas, current.zk_version = list(ps.isr), list(ps.replicas), ps.zk_version
            current.adding = list(getattr(ps, "adding_replicas", None) or [])  # (LeaderAndIsr v3+)
            return errors.NONE
        replica = Replica(topic, ps.partition_index, ps.leader, ps.leader_epoch, list(ps.replicas), list(ps.isr),
                          ps.zk_version, ps.controller_epoch,
                          adding=list(getattr(ps, "adding_replicas", None) or []))
        self.replicas[key] = replica
        if ps.leader == self.broker_id:
            self._become_leader(replica, plog)
        else:
            self._become_follower(replica, plog)
        return errors.NONE

    def _become_leader(self, replica: Replica, plog: PartitionLog) -> None:
        self.leader_elections += 1
        self._on_stop_following(replica.topic, replica.partition)
        plog.begin_leader_epoch(replica.leader_epoch)
        plog.high_watermark = plog.high_watermark  # from now on the HW is replication's, not the log end
        now = self.clock_ms()
        for r in replica.replicas:
            if r != self.broker_id:
                replica.follower_leo[r] = -1
                replica.follower_log_start[r] = -1
                replica.caught_up_ms[r] = now if r in replica.isr else 0
        log.info("broker %d: leader of %s-%d in epoch %d, isr %s", self.broker_id, replica.topic,
                 replica.partition, replica.leader_epoch, replica.isr)
        self._maybe_advance_hw(replica, plog)
        self._complete_deletions(replica, plog)
        self._on_role(replica.topic, replica.partition, True)

    def _become_follower(self, replica: Replica, plog: PartitionLog) -> None:
        plog.high_watermark = plog.high_watermark
        self._fail_waiters(replica.topic, replica.partition, errors.NotLeaderOrFollower.code)
        self._on_stop_following(replica.topic, replica.partition)
        self._on_role(replica.topic, replica.partition, False)
        if replica.leader != NO_LEADER:
            log.info("broker %d: follower of %s-%d (leader %d, epoch %d)", self.broker_id, replica.topic,
                     replica.partition, replica.leader, replica.leader_epoch)
            self._on_become_follower(replica, plog)

    def under_replicated(self) -> int:
        """Partitions this broker leads whose ISR lacks some of their replicas (Kafka's
        UnderReplicatedPartitions; while a reassignment adds replicas, the original replication factor counts)."""
        return sum(1 for r in self.replicas.values()
                   if r.leader == self.broker_id and len(r.isr) < len(r.replicas) - len(r.adding))

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        """What ``replication-offset-checkpoint`` keeps: each hosted replica's high watermark."""
        out = dict(self.checkpointed_hw)
        for key in self.replicas:
            plog = self.logs.get(*key)
            if plog is not None and plog.replicated:
                out[key] = plog.high_watermark
        return out

    def stop_replica(self, topic: str, partition: int) -> None:
        self.replicas.pop((topic, partition), None)
        self.checkpointed_hw.pop((topic, partition), None)
        self._on_stop_following(topic, partition)
        self._on_role(topic, partition, False)
        self._fail_waiters(topic, partition, errors.NotLeaderOrFollower.code)

    # -- queries -------------------------------------------------------------------------------------
    def leader_replica(self, topic: str, partition: int) -> Replica | None:
        r = self.replicas.get((topic, partition))
        return r if r is not None and r.leader == self.broker_id else None

    def check_leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Replica:
        """The partition's Replica if this broker leads it; else NotLeaderOrFollower (the client
        refreshes its metadata). A client's newer epoch: UnknownLeaderEpoch; older: FencedLeaderEpoch."""
        r = self.replicas.get((topic, partition))
        if r is None or r.leader != self.broker_id:
            raise errors.NotLeaderOrFollower(f"broker {self.broker_id} is not the leader of {topic}-{partition}")
        if current_leader_epoch >= 0:
            if current_leader_epoch > r.leader_epoch:
                raise errors.UnknownLeaderEpoch(f"{topic}-{partition}: epoch {current_leader_epoch} not yet known")
            if current_leader_epoch < r.leader_epoch:
                raise errors.FencedLeaderEpoch(f"{topic}-{partition}: epoch {current_leader_epoch} is fenced")
        return r

    # -- the leader's side of replication ------------------------------------------------------------
    def follower_fetched(self, replica: Replica, plog: PartitionLog, follower: int, fetch_offset: int,
                         log_start_offset: int = -1) -> None:
        """A follower asked for ``fetch_offset``: everything below it is in its log, which starts at
        ``log_start_offset`` (-1: the Fetch version carries none)."""
        if follower not in replica.follower_leo:
            return
        replica.follower_leo[follower] = fetch_offset
        if log_start_offset > replica.follower_log_start.get(follower, -1):
            replica.follower_log_start[follower] = log_start_offset
            self._complete_deletions(replica, plog)
        leo = plog.log_end_offset
        if fetch_offset >= leo:
            replica.caught_up_ms[follower] = self.clock_ms()
        if (follower not in replica.isr and fetch_offset >= plog.high_watermark
                and fetch_offset >= self._epoch_start(plog, replica)):
            self._change_isr(replica, plog, replica.isr + [follower])
        self._maybe_advance_hw(replica, plog)

    @staticmethod
    def _epoch_start(plog: PartitionLog, replica: Replica) -> int:
        """The offset at which the current leader epoch began: a follower joins the ISR only past it."""
        for epoch, start in reversed(plog.leader_epoch_cache.entries):
            if epoch <= replica.leader_epoch:
                return start
        return plog.log_start_offset

    def leader_appended(self, topic: str, partition: int, plog: PartitionLog) -> None:
        replica = self.replicas.get((topic, partition))
        if replica is not None and replica.leader == self.broker_id:
            self._maybe_advance_hw(replica, plog)

    def _maybe_advance_hw(self, replica: Replica, plog: PartitionLog) -> None:
        hw = plog.log_end_offset
        for r in replica.maximal_isr:
            if r != self.broker_id:
                hw = min(hw, replica.follower_leo.get(r, -1))
        if hw > plog.high_watermark:
            plog.high_watermark = hw
            self.notify(replica.topic, replica.partition)
            self._complete_waiters(replica, hw)

    def shrink_isrs(self) -> None:
        """Drop followers that have not caught up for replica.lag.time.max.ms (run periodically)."""
        now, lag = self.clock_ms(), self.lag_time_max_ms()
        for replica in list(self.replicas.values()):
            if replica.leader != self.broker_id or replica.pending_isr is not None:
                continue
            plog = self.logs.get(replica.topic, replica.partition)
            if plog is None:
                continue
            leo = plog.log_end_offset
            out = [r for r in replica.isr if r != self.broker_id and now - replica.caught_up_ms.get(r, 0) > lag
                   and replica.follower_leo.get(r, -1) < leo]
            if out:
                log.info("broker %d: %s-%d followers %s fell behind for %d ms: shrinking the ISR", self.broker_id,
                         replica.topic, replica.partition, out, lag)
                self._change_isr(replica, plog, [r for r in replica.isr if r not in out])

    def _change_isr(self, replica: Replica, plog: PartitionLog, isr: list[int]) -> None:
        if replica.pending_isr is not None:
            return
        replica.pending_isr = list(isr)
        task = asyncio.get_running_loop().create_task(self._write_isr(replica, plog, isr))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _write_isr(self, replica: Replica, plog: PartitionLog, isr: list[int]) -> None:
        state = PartitionState(replica.leader, replica.leader_epoch, isr, replica.controller_epoch)
        try:
            written = await asyncio.to_thread(self.store.update_partition_state, replica.topic, replica.partition,
                                              state, replica.zk_version)
            await asyncio.to_thread(self.store.notify_isr_change, [(replica.topic, replica.partition)])
        except StaleWrite:
            log.info("broker %d: ISR update of %s-%d lost to a newer state; waiting for the controller",
                     self.broker_id, replica.topic, replica.partition)
            return
        except KazooException as e:  # cut off from ZooKeeper: the ISR stays as it is (no acks=all below it)
            log.warning("broker %d: ISR update of %s-%d failed: ZooKeeper %s", self.broker_id, replica.topic,
                        replica.partition, type(e).__name__)
            return
        except Exception:
            log.exception("ISR update of %s-%d failed", replica.topic, replica.partition)
            return
        finally:
            replica.pending_isr = None
        if self.replicas.get((replica.topic, replica.partition)) is not replica:
            return  # superseded by a LeaderAndIsr meanwhile
        log.info("broker %d: %s-%d ISR %s -> %s", self.broker_id, replica.topic, replica.partition, replica.isr, isr)
        if len(isr) < len(replica.isr):
            self.isr_shrinks += 1
        elif len(isr) > len(replica.isr):
            self.isr_expands += 1
        replica.isr, replica.zk_version = list(isr), written.zk_version
        self._maybe_advance_hw(replica, plog)
        # an ISR below min.insync.replicas may leave acks=all waiters whose offset is now committed
        self._complete_waiters(replica, plog.high_watermark)

    # -- acks=all --------------------------------------------------------------------------------------
    async def wait_for_hw(self, topic: str, partition: int, offset: int, timeout_s: float) -> int:
        """Wait until the high watermark passes ``offset`` (the last offset of an append); the error
        code for the produce response: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below
        min.insync.replicas meanwhile), REQUEST_TIMED_OUT or NOT_LEADER_OR_FOLLOWER."""
        replica = self.leader_replica(topic, partition)
        plog = self.logs.get(topic, partition)
        if replica is None or plog is None:
            return errors.NotLeaderOrFollower.code
        if plog.high_watermark > offset:
            return self._acks_result(replica, topic)
        fut = asyncio.get_running_loop().create_future()
        self._hw_waiters.setdefault((topic, partition), []).append((offset, fut))
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            return errors.RequestTimedOut.code

    def _acks_result(self, replica: Replica, topic: str) -> int:
        """Kafka's ``checkEnoughReplicasReachOffset``, asked as the high watermark passes an acks=all append:
        the ISR that holds it (the maximal ISR, as the high watermark counted it) must be at least
        min.insync.replicas, else NOT_ENOUGH_REPLICAS_AFTER_APPEND (the append stays; the producer retries)."""
        if len(replica.maximal_isr) < self.min_insync(topic):
            return errors.NotEnoughReplicasAfterAppend.code
        return errors.NONE

    def _complete_waiters(self, replica: Replica, hw: int) -> None:
        key = (replica.topic, replica.partition)
        if key in self._hw_waiters:
            _settle(self._hw_waiters, key, lambda offset: hw > offset, lambda: self._acks_result(replica, replica.topic))

    def _fail_waiters(self, topic: str, partition: int, code: int) -> None:
        for _offset, fut in self._hw_waiters.pop((topic, partition), []):
            if not fut.done():
                fut.set_result(code)
        for _offset, fut in self._lw_waiters.pop((topic, partition), []):
            if not fut.done():
                fut.set_result((code, -1))

    # -- DeleteRecords -----------------------------------------------------------------------------------
    def low_watermark(self, replica: Replica, plog: PartitionLog) -> int:
        """Kafka's ``lowWatermarkIfLeader``: the smallest log start offset of the replicas on live brokers,
        this leader's included (a follower not heard from since this leadership began counts as -1)."""
        low = plog.log_start_offset
        for r in replica.replicas:
            if r != self.broker_id and self.is_alive(r):
                low = min(low, replica.follower_log_start.get(r, -1))
        return low

    async def wait_for_low_watermark(self, topic: str, partition: int, offset: int, timeout_s: float
                                     ) -> tuple[int, int]:
        """DeleteRecords (Kafka's DelayedDeleteRecords): wait until every live replica's log starts at or past
        ``offset``; (error code, low watermark): NONE, NOT_LEADER_OR_FOLLOWER (leadership lost: -1), or
        REQUEST_TIMED_OUT with the low watermark reached by then."""
        replica = self.leader_replica(topic, partition)
        plog = self.logs.get(topic, partition)
        if replica is None or plog is None:
            return errors.NotLeaderOrFollower.code, -1
        low = self.low_watermark(replica, plog)
        if low >= offset:
            return errors.NONE, low
        fut = asyncio.get_running_loop().create_future()
        self._lw_waiters.setdefault((topic, partition), []).append((offset, fut))
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            replica = self.leader_replica(topic, partition)
            return errors.RequestTimedOut.code, self.low_watermark(replica, plog) if replica is not None else -1

    def _complete_deletions(self, replica: Replica, plog: PartitionLog) -> None:
        key = (replica.topic, replica.partition)
        if key in self._lw_waiters:
            low = self.low_watermark(replica, plog)
            _settle(self._lw_waiters, key, lambda offset: low >= offset, lambda: (errors.NONE, low))

    def brokers_changed(self) -> None:
        """The live brokers changed: a dead replica no longer holds the low watermark back."""
        for key in list(self._lw_waiters):
            replica = self.leader_replica(*key)
            plog = self.logs.get(*key)
            if replica is not None and plog is not None:
                self._complete_deletions(replica, plog)

    async def close(self) -> None:
        for key in {*self._hw_waiters, *self._lw_waiters}:
            self._fail_waiters(*key, errors.NotLeaderOrFollower.code)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)


def _settle(waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future]]], key: tuple[str, int],
            reached: Callable[[int], bool], result: Callable[[], object]) -> None:
    """Answer ``key``'s waiters whose offset is ``reached`` with ``result()``; keep the others waiting."""
    keep = []
    for offset, fut in waiters.get(key, ()):
        if fut.done():   # timed out meanwhile
            continue
        if reached(offset):
            fut.set_result(result())
        else:
            keep.append((offset, fut))
    if keep:
        waiters[key] = keep
    else:
        waiters.pop(key, None)
