"""``ClusterMember``: a broker's membership of a ZooKeeper-mode cluster, the one object the broker
calls for anything cluster-wide (through ``BrokerContext.cluster``).

At start it connects to ZooKeeper (``zookeeper.connect``), agrees on the cluster id, registers
``/brokers/ids/<broker.id>`` with the advertised endpoints and starts its ``Controller`` (which
acts only if elected). From then on it applies the controller's requests: LeaderAndIsr (the
``ReplicaManager`` makes this broker leader or follower; followers fetch with ``ReplicaFetchers``),
UpdateMetadata (the ``MetadataCache`` every Metadata answer is read from, and the broker's own topic
table) and StopReplica (a deleted topic's logs). Topic creation and deletion are writes to
ZooKeeper that the controller carries out.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Callable

from tidelake import errors
from tidelake.cluster.assignment import assign_replicas
from tidelake.cluster.channel import BrokerChannel, ChannelError
from tidelake.cluster.controller import Controller
from tidelake.cluster.fetcher import ReplicaFetchers
from tidelake.cluster.hw_checkpoint import read_high_watermarks, write_high_watermarks
from tidelake.cluster.metadata_cache import Endpoint, MetadataCache, PartitionMetadata
from tidelake.cluster.replica_manager import ReplicaManager
from tidelake.cluster.requests import (broker_epoch, leader_and_isr_topics, stop_replica_partitions,
                                       update_metadata_brokers, update_metadata_topics)
from tidelake.cluster.settings import ClusterSettings, ClusterTopic, TopicTable
from tidelake.cluster.txn_markers import TxnMarkerSender
from tidelake.cluster.txn_verification import TxnVerifier
from tidelake.cluster import znodes
from tidelake.cluster.znodes import BrokerEndpoint, BrokerRegistration, TopicAssignment
from tidelake.cluster.zk_store import ClusterStore, new_topic_id
from tidelake.log import LogConfig, LogManager, PartitionLog
from tidelake.protocol.messages import (ControlledShutdownRequest, LeaderAndIsrResponse, StopReplicaResponse,
                                        UpdateMetadataResponse)
from tidelake.tasks import cancel_and_wait

log = logging.getLogger("tidelake.cluster")

PRODUCER_ID_BLOCK_SIZE = 1000
CONTROLLED_SHUTDOWN_VERSION = 2
ISR_CHECK_MIN_INTERVAL_S = 0.05
# A broker serves before the controller's first UpdateMetadata reaches it (that request comes in on the same
# listener); start-up, and a client's Metadata in that window, wait this long at most for it.
FIRST_METADATA_WAIT_S = 10.0


@dataclass(frozen=True)
class LiveBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None


class ClusterMember:
    def __init__(self, settings: ClusterSettings, logs: LogManager, topics: TopicTable, *,
                 clock_ms: Callable[[], int], log_config: Callable[[str], LogConfig],
                 notify: Callable[[str, int], None]):
        self.settings = settings
        self.broker_id = broker_id = settings.broker_id
        self.logs = logs
        self.topics = topics
        self.clock_ms = clock_ms
        self._log_config = log_config
        self.cluster_id = ""
        self.cache = MetadataCache()
        self._first_metadata = asyncio.Event()  # set by the controller's first UpdateMetadata
        self.store = ClusterStore(settings.zookeeper_connect, session_timeout_ms=settings.session_timeout_ms,
                                  connection_timeout_ms=settings.connection_timeout_ms)
        self.inter_broker_listener = "PLAINTEXT"
        self.replicas = ReplicaManager(
            broker_id, logs, self.store, clock_ms=clock_ms, lag_time_max_ms=settings.lag_time_max_ms,
            min_insync=self.min_insync_replicas, create_log=self._create_log, notify=notify,
            is_alive=lambda broker: broker in self.cache.brokers)
        self.controller = Controller(broker_id, self.store, unclean_default=settings.unclean_default,
                                     auto_rebalance=settings.auto_leader_rebalance,
                                     rebalance_interval_s=settings.leader_imbalance_check_interval_s,
                                     imbalance_percentage=settings.leader_imbalance_per_broker_percentage)
        self.fetchers: ReplicaFetchers | None = None
        # the transaction coordinator's WriteTxnMarkers to partition leaders
        self.txn_markers = TxnMarkerSender(broker_id, self.cache, lambda: self.inter_broker_listener)
        # a partition leader's KIP-890 check of a transactional Produce, at the transaction's coordinator
        self.txn_verifier = TxnVerifier(broker_id, self.cache, lambda: self.inter_broker_listener)
        # the broker's hook (on_leadership_change): this broker became (True) or stopped being (False) a
        # partition's leader
        self._on_leadership: Callable[[str, int, bool], None] = lambda topic, partition, leader: None
        # the broker's hook (on_group_config_change): a group's configs as ZooKeeper now has them
        self._on_group_config: Callable[[str, dict[str, str]], None] = lambda group_id, config: None
        # the broker's hook (on_topic_deleted): a topic is being deleted (still in the topic table)
        self._on_topic_deleted: Callable[[str], None] = lambda topic: None
        self._tasks: list[asyncio.Task] = []
        # this process's registration's czxid (KIP-380): controller requests carrying an older one were meant for
        # a previous process (or session) of this broker and are refused
        self.broker_epoch = -1
        self._internal_topic_refusals: dict[str, str] = {}  # internal topic -> why it was last not created (logged)
        self._pid_next = 0
        self._pid_end = -1  # inclusive end of the block in hand

    # -- lifecycle -----------------------------------------------------------------------------------
    async def start(self, endpoints: list[BrokerEndpoint], inter_broker_listener: str, proposed_cluster_id: str
                    ) -> str:
        """Join the cluster: ZooKeeper session, cluster id (returned), registration, controller candidacy."""
        self.inter_broker_listener = inter_broker_listener
        await asyncio.to_thread(self.store.start)
        self.cluster_id = await asyncio.to_thread(self.store.cluster_id, proposed_cluster_id)
        # what the controller will tell us is the truth about topics; the local table only mirrors it
        for name in self.topics.names():
            self.topics.remove(name)
        self.replicas.checkpointed_hw = read_high_watermarks(self.logs.data_dir)
        self.fetchers = ReplicaFetchers(
            self.broker_id, endpoint_of=lambda b: self.cache.endpoint(b, self.inter_broker_listener),
            max_wait_ms=self.settings.replica_fetch_wait_max_ms, max_bytes=self.settings.replica_fetch_max_bytes,
            on_replicated=lambda t, p: None)
        self.replicas.set_role_listeners(
            on_role=lambda topic, partition, leader: self._on_leadership(topic, partition, leader),
            on_become_follower=lambda r, plog: self.fetchers.follow(r.topic, r.partition, plog, r.leader,
                                                                    r.leader_epoch),
            on_stop_following=lambda t, p: self.fetchers.stop_following(t, p))
        registration = BrokerRegistration(self.broker_id, tuple(endpoints), self.settings.rack)
        self.broker_epoch = await asyncio.to_thread(self.store.register_broker, registration,
                                                    self.settings.session_timeout_ms / 1000 + 2)
        loop = asyncio.get_running_loop()
        # a process paused past its session (SIGSTOP, a long GC) comes back to a new session: register again
        # and let the controller election look again (Kafka's broker does the same on a new session)
        self.store.on_session_renewed(lambda: self._call_soon(loop, self._on_new_session, registration))
        self.controller.start(inter_broker_listener)
        self._config_changes_seen: set[str] | None = None
        self.store.watch_config_changes(lambda children: self._call_soon(loop, self._on_config_changes, children))
        # read after the watch is set: a change made meanwhile is both read here and notified (applied twice, alike)
        for group_id, config in (await asyncio.to_thread(self.store.group_configs)).items():
            self._group_config_changed(group_id, config)
        self._tasks.append(asyncio.get_running_loop().create_task(self._isr_expiry_loop()))
        self._tasks.append(asyncio.get_running_loop().create_task(self._hw_checkpoint_loop()))
        log.info("broker %d joined the cluster %s through ZooKeeper %s (broker epoch %d)", self.broker_id,
                 self.cluster_id, self.store.connect_string, self.broker_epoch)
        return self.cluster_id

    def on_leadership_change(self, callback: Callable[[str, int, bool], None]) -> None:
        """``callback(topic, partition, leader)`` whenever this broker becomes (True) or stops being (False)
        a partition's leader (the broker moves its group and transaction coordinators with it)."""
        self._on_leadership = callback

    def on_group_config_change(self, callback: Callable[[str, dict[str, str]], None]) -> None:
        """``callback(group_id, configs)`` with every group's configs as this broker joins, and again whenever a
        broker changes them (empty: its configs were all removed)."""
        self._on_group_config = callback

    def on_topic_deleted(self, callback: Callable[[str], None]) -> None:
        """``callback(topic)`` when the controller tells this broker a topic is deleted (every broker hears it, in
        UpdateMetadata; the topic is still in the topic table then, so its id can be read)."""
        self._on_topic_deleted = callback

    def _group_config_changed(self, group_id: str, config: dict[str, str]) -> None:
        try:
            self._on_group_config(group_id, config)
        except errors.KafkaApiError as e:  # written by another tool: this broker keeps what it had
            log.warning("group %s's configs in ZooKeeper (%s) are not applied: %s", group_id,
                        znodes.group_config_path(group_id), e)

    @staticmethod
    def _call_soon(loop: asyncio.AbstractEventLoop, fn, *args) -> None:
        """From kazoo's thread onto the broker's loop (dropped once the loop is closed: shutting down)."""
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass

    def _on_new_session(self, registration: BrokerRegistration) -> None:
        async def rejoin() -> None:
            try:
                self.broker_epoch = await asyncio.to_thread(self.store.register_broker, registration,
                                                            self.settings.session_timeout_ms / 1000 + 2)
                log.info("broker %d registered again in a new ZooKeeper session (broker epoch %d)", self.broker_id,
                         self.broker_epoch)
            except Exception:
                log.exception("broker %d could not register again", self.broker_id)
            self.controller.session_renewed()
        self._tasks.append(asyncio.get_running_loop().create_task(rejoin()))

    def _on_config_changes(self, children: list[str]) -> None:
        """Another broker changed a topic's or a group's config: re-read it (the first call only notes what exists;
        configs are read fresh whenever a topic is first seen)."""
        if self._config_changes_seen is None:
            self._config_changes_seen = set(children)
            return
        new = sorted(set(children) - self._config_changes_seen)
        self._config_changes_seen = set(children)
        if new:
            self._tasks.append(asyncio.get_running_loop().create_task(self._apply_config_changes(new)))

    async def _apply_config_changes(self, children: list[str]) -> None:
        for child in children:
            entity = await asyncio.to_thread(self.store.config_change_entity, child)
            if entity is not None and entity.startswith(znodes.GROUP_CONFIG_ENTITY):
                group_id = znodes.group_id_of(entity.removeprefix(znodes.GROUP_CONFIG_ENTITY))
                self._group_config_changed(group_id, await asyncio.to_thread(self.store.group_config, group_id))
                continue
            if entity is None or not entity.startswith(znodes.TOPIC_CONFIG_ENTITY):
                continue
            topic = entity.removeprefix(znodes.TOPIC_CONFIG_ENTITY)
            if self.topics.configs(topic) is not None:
                self.topics.set_configs(topic, await asyncio.to_thread(self.store.topic_config, topic))

    async def wait_for_first_metadata(self, timeout_s: float = FIRST_METADATA_WAIT_S) -> bool:
        """Until the controller's first UpdateMetadata has come (at most ``timeout_s``; False if it did not):
        before it this broker knows neither the controller nor the other brokers. At once after it, whatever
        the cluster does later."""
        if not self._first_metadata.is_set():
            try:
                async with asyncio.timeout(timeout_s):
                    await self._first_metadata.wait()
            except TimeoutError:
                return False
        return True

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        await self.txn_markers.close()
        self.txn_verifier.close()
        await self.controller.stop()
        if self.fetchers is not None:
            await self.fetchers.close()
            write_high_watermarks(self.logs.data_dir, self.replicas.high_watermarks())
        await self.replicas.close()
        await asyncio.to_thread(self.store.stop)

    async def _hw_checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.hw_checkpoint_interval_ms / 1000)
            try:
                await asyncio.to_thread(write_high_watermarks, self.logs.data_dir, self.replicas.high_watermarks())
            except Exception:
                log.exception("writing the high-watermark checkpoint failed")

    async def _isr_expiry_loop(self) -> None:
        while True:
            interval = max(ISR_CHECK_MIN_INTERVAL_S, self.settings.lag_time_max_ms() / 2000)
            await asyncio.sleep(interval)
            try:
                self.replicas.shrink_isrs()
            except Exception:
                log.exception("ISR expiry check failed")

    # -- configuration ---------------------------------------------------------------------------------
    def min_insync_replicas(self, topic: str) -> int:
        value = (self.topics.configs(topic) or {}).get("min.insync.replicas")
        return int(value) if value is not None else self.settings.min_insync_default()

    def _create_log(self, topic: str, partition: int) -> PartitionLog:
        return self.logs.create(topic, partition, self._log_config(topic))

    # -- controller requests -------------------------------------------------------------------------
    def _check_controller_request(self, request, version: int) -> None:
        """Raises StaleControllerEpoch (from a deposed controller) or StaleBrokerEpoch (meant for an earlier
        registration of this broker: Kafka's check, where -1 is a controller that sends no epoch and a newer epoch
        than ours is one the controller read before our registration returned)."""
        self.replicas.check_controller_epoch(request.controller_epoch)
        epoch = broker_epoch(request, version)
        if epoch != -1 and epoch < self.broker_epoch:
            log.info("broker %d: %s for broker epoch %d refused (ours is %d)", self.broker_id,
                     type(request).__name__, epoch, self.broker_epoch)
            raise errors.StaleBrokerEpoch(f"broker epoch {epoch} < {self.broker_epoch}")

    async def handle_leader_and_isr(self, request, version: int) -> LeaderAndIsrResponse:
        R = LeaderAndIsrResponse.LeaderAndIsrPartitionError
        try:
            self._check_controller_request(request, version)
        except (errors.StaleControllerEpoch, errors.StaleBrokerEpoch) as e:
            return LeaderAndIsrResponse(error_code=e.code, partition_errors=[])
        # leaders named here may be newer than our UpdateMetadata: learn their endpoints first
        for leader in request.live_leaders:
            eps = self.cache.brokers.setdefault(leader.broker_id, {})
            eps.setdefault(self.inter_broker_listener, Endpoint(leader.host_name, leader.port))
        out = []
        for topic, states in leader_and_isr_topics(request, version):
            await self._ensure_topic(topic)
            for ps in states:
                try:
                    code = self.replicas.apply_leader_and_isr(topic, ps)
                except Exception as e:
                    log.exception("LeaderAndIsr for %s-%d failed", topic, ps.partition_index)
                    code = errors.KafkaApiError(str(e)).code
                out.append(R(topic_name=topic, partition_index=ps.partition_index, error_code=code))
        return LeaderAndIsrResponse(error_code=errors.NONE, partition_errors=out)

    async def handle_update_metadata(self, request, version: int) -> UpdateMetadataResponse:
        try:
            self._check_controller_request(request, version)
        except (errors.StaleControllerEpoch, errors.StaleBrokerEpoch) as e:
            return UpdateMetadataResponse(error_code=e.code)
        topics = update_metadata_topics(request, version)
        named = {name for name, _states in topics}
        _new, deleted = self.cache.apply(request.controller_id, request.controller_epoch,
                                         update_metadata_brokers(request, version), topics)
        deleted |= self.cache.remove_missing(named)
        self._first_metadata.set()
        self.replicas.brokers_changed()
        for name in deleted:
            if self.topics.configs(name) is not None:
                self._on_topic_deleted(name)
            self.topics.remove(name)
        for name, parts in list(self.cache.partitions.items()):
            await self._ensure_topic(name, len(parts))
        return UpdateMetadataResponse(error_code=errors.NONE)

    async def handle_stop_replica(self, request, version: int) -> StopReplicaResponse:
        R = StopReplicaResponse.StopReplicaPartitionError
        try:
            self._check_controller_request(request, version)
        except (errors.StaleControllerEpoch, errors.StaleBrokerEpoch) as e:
            return StopReplicaResponse(error_code=e.code, partition_errors=[])
        out = []
        for topic, partitions in stop_replica_partitions(request, version):
            for p in partitions:
                self.replicas.stop_replica(topic, p)
                out.append(R(topic_name=topic, partition_index=p, error_code=errors.NONE))
            if not request.delete_partitions:
                continue
            if topic in self.cache.partitions:  # the topic lives on: a replica reassigned away from here
                for p in partitions:
                    self.logs.delete(topic, p)
                log.info("broker %d: replicas %s of %s moved away: deleted", self.broker_id, partitions, topic)
            else:  # a deleted topic (UpdateMetadata named it as being deleted first)
                self.logs.delete_topic(topic)
                self.topics.remove(topic)
        return StopReplicaResponse(error_code=errors.NONE, partition_errors=out)

    async def _ensure_topic(self, name: str, partitions: int | None = None) -> None:
        """The broker's topic table (topic id, configs, partition count) follows ZooKeeper."""
        if self.topics.configs(name) is not None:
            if partitions is not None:
                self.topics.resize(name, partitions)
            return
        assignment = await asyncio.to_thread(self.store.topic_assignment, name)
        if assignment is None:
            return
        configs = await asyncio.to_thread(self.store.topic_config, name)
        if self.topics.configs(name) is None:  # not added by another request while we read
            self.topics.put(ClusterTopic(name, assignment.topic_id, len(assignment.partitions), configs))

    # -- what handlers ask ---------------------------------------------------------------------------
    def live_brokers(self, listener: str) -> list[LiveBroker]:
        out = []
        for bid in sorted(self.cache.brokers):
            ep = self.cache.endpoint(bid, listener)
            if ep is not None:
                out.append(LiveBroker(bid, ep.host, ep.port, self.cache.racks.get(bid)))
        return out

    @property
    def controller_id(self) -> int:
        return self.cache.controller_id

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        return self.cache.partition(topic, partition)

    def check_leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        """This broker's leader epoch of the partition; raises NotLeaderOrFollower (or a fenced /
        unknown epoch error) otherwise."""
        return self.replicas.check_leader(topic, partition, current_leader_epoch).leader_epoch

    def leads(self, topic: str, partition: int) -> bool:
        """Whether this broker is the partition's leader now (tiered storage: only the leader copies)."""
        return self.replicas.leader_replica(topic, partition) is not None

    def isr_size(self, topic: str, partition: int) -> int:
        r = self.replicas.leader_replica(topic, partition)
        return len(r.isr) if r is not None else 0

    def leader_appended(self, topic: str, partition: int, plog: PartitionLog) -> None:
        self.replicas.leader_appended(topic, partition, plog)

    def follower_fetched(self, topic: str, partition: int, plog: PartitionLog, follower: int, offset: int,
                         log_start_offset: int) -> None:
        r = self.replicas.leader_replica(topic, partition)
        if r is not None:
            self.replicas.follower_fetched(r, plog, follower, offset, log_start_offset)

    async def wait_for_low_watermark(self, topic: str, partition: int, offset: int, timeout_ms: int) -> tuple[int, int]:
        return await self.replicas.wait_for_low_watermark(topic, partition, offset, timeout_ms / 1000)

    async def wait_for_acks(self, topic: str, partition: int, last_offset: int, timeout_ms: int) -> int:
        return await self.replicas.wait_for_hw(topic, partition, last_offset, timeout_ms / 1000)

    # -- topics ----------------------------------------------------------------------------------------
    async def create_topic(self, name: str, partitions: int, replication_factor: int, overrides: dict[str, str],
                           *, assignment: dict[int, list[int]] | None = None, validate_only: bool = False,
                           wait_s: float = 10.0) -> ClusterTopic:
        """Write the topic (``overrides``: validated config overrides) to ZooKeeper, round-robin over the
        live brokers unless ``assignment`` is given, and wait until the controller has told this broker
        its leaders. Raises TopicAlreadyExists, InvalidReplicationFactor, InvalidPartitions,
        InvalidReplicaAssignment."""
        if partitions in (-1, None):
            partitions = self.settings.num_partitions()
        if replication_factor == -1:
            replication_factor = self.settings.default_replication_factor()
        live = await asyncio.to_thread(self.store.live_broker_ids)
        if assignment is None:
            assignment = assign_replicas(partitions, replication_factor, live)
        else:
            for p, replicas in assignment.items():
                if len(set(replicas)) != len(replicas) or not set(replicas) <= set(live):
                    raise errors.InvalidReplicaAssignment(
                        f"partition {p}: replicas {replicas} must be distinct live brokers (live: {live})")
        info = ClusterTopic(name, new_topic_id(), len(assignment), dict(overrides),
                            replication_factor=len(assignment[0]))
        if validate_only:
            return info
        await asyncio.to_thread(self.store.create_topic, TopicAssignment(name, info.topic_id, assignment), overrides)
        log.info("topic %s written to ZooKeeper: %s", name, assignment)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            parts = self.cache.partitions.get(name)
            if parts is not None and len(parts) == len(assignment) and all(p.leader >= 0 for p in parts.values()):
                break
            await asyncio.sleep(0.02)
        return info

    async def alter_topic_config(self, name: str, overrides: dict[str, str]) -> None:
        """Replace a topic's (validated) config overrides in ZooKeeper; every broker applies them."""
        await asyncio.to_thread(self.store.change_topic_config, name, dict(overrides))
        self.topics.set_configs(name, dict(overrides))

    async def alter_group_config(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace a group's (validated) configs in ZooKeeper; this broker applies them now, every other one
        when notified."""
        await asyncio.to_thread(self.store.change_group_config, group_id, dict(configs))
        self._group_config_changed(group_id, dict(configs))

    async def add_partitions(self, name: str, count: int, assignment: list[list[int]] | None = None, *,
                             validate_only: bool = False, wait_s: float = 10.0) -> None:
        """Grow a topic to ``count`` partitions: new replicas round robin (or ``assignment``), written to the
        topic's znode, where the controller picks them up. Raises InvalidPartitions / InvalidReplicaAssignment."""
        current = await asyncio.to_thread(self.store.topic_assignment, name)
        if current is None:
            raise errors.UnknownTopicOrPartition(f"Topic '{name}' does not exist")
        n = len(current.partitions)
        if count < n:
            raise errors.InvalidPartitions(f"Topic currently has {n} partitions, which is higher than the "
                                           f"requested {count}.")
        if count == n:
            raise errors.InvalidPartitions(f"Topic already has {n} partitions.")
        live = await asyncio.to_thread(self.store.live_broker_ids)
        rf = len(current.partitions[0])
        if assignment is None:
            added = assign_replicas(count - n, rf, live, start_partition=n)
        else:
            if len(assignment) != count - n or any(len(set(r)) != len(r) or not set(r) <= set(live)
                                                   for r in assignment):
                raise errors.InvalidReplicaAssignment(f"{count - n} new partitions need distinct live brokers each "
                                                      f"(live: {live})")
            added = {n + i: list(r) for i, r in enumerate(assignment)}
        if validate_only:
            return
        current.partitions.update(added)
        await asyncio.to_thread(self.store.set_topic_assignment, current)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            parts = self.cache.partitions.get(name, {})
            if all(p in parts and parts[p].leader >= 0 for p in added):
                return
            await asyncio.sleep(0.02)

    async def delete_topic(self, name: str, wait_s: float = 10.0) -> None:
        await asyncio.to_thread(self.store.request_topic_deletion, name)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and name in self.cache.partitions:
            await asyncio.sleep(0.02)

    async def internal_topic_leader(self, topic: str, partitions: int, replication_factor: int,
                                    configs: dict[str, str], partition: int, listener: str) -> LiveBroker:
        """The leader of one partition of an internal topic (``__consumer_offsets``: the coordinator
        of the groups hashed to it), creating the topic on first use as Kafka does. Raises
        CoordinatorNotAvailable while it has no leader, or while fewer brokers are up than its replication factor
        (Kafka's rule, KIP-115: it is not created with fewer replicas; said once at WARN, and in the error)."""
        if topic not in self.cache.partitions:
            live = len(await asyncio.to_thread(self.store.live_broker_ids))
            if live < replication_factor:
                reason = f"{topic} needs {replication_factor} brokers, {live} are up"
                if self._internal_topic_refusals.get(topic) != reason:
                    self._internal_topic_refusals[topic] = reason
                    log.warning("cannot create %s: %s (its replication factor is %d); no coordinator for the keys it "
                                "holds until enough brokers are up", topic, reason, replication_factor)
                raise errors.CoordinatorNotAvailable(reason)
            self._internal_topic_refusals.pop(topic, None)
            try:
                await self.create_topic(topic, partitions, replication_factor, configs, wait_s=0)
            except errors.TopicAlreadyExists:
                pass
            except errors.InvalidReplicationFactor as e:  # a broker left since the count above
                raise errors.CoordinatorNotAvailable(f"cannot create {topic}: {e}") from None
            raise errors.CoordinatorNotAvailable(f"{topic} is being created")
        pm = self.cache.partition(topic, partition)
        ep = self.cache.endpoint(pm.leader, listener) if pm is not None and pm.leader >= 0 else None
        if ep is None:
            raise errors.CoordinatorNotAvailable(f"{topic}-{partition} has no leader")
        return LiveBroker(pm.leader, ep.host, ep.port, self.cache.racks.get(pm.leader))

    async def handle_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """ControlledShutdown from a stopping broker: only the controller answers (NotController elsewhere)."""
        if not self.controller.active:
            raise errors.NotController(f"broker {self.broker_id} is not the controller "
                                       f"({self.cache.controller_id} is)")
        return await self.controller.controlled_shutdown(broker_id, broker_epoch)

    async def controlled_shutdown(self) -> bool:
        """Before stopping: ask the controller to move this broker's leaderships away and take it out of
        the ISRs (controlled.shutdown.enable); a failed request is retried controlled.shutdown.max.retries
        times. True if nothing is led here any more."""
        s = self.settings
        for attempt in range(1, s.controlled_shutdown_retries + 1):
            controller = self.cache.controller_id
            ep = self.cache.endpoint(controller, self.inter_broker_listener) if controller >= 0 else None
            if ep is not None:
                channel = BrokerChannel(controller, ep.host, ep.port, client_id=f"broker-{self.broker_id}-shutdown",
                                        timeout_s=30)
                try:
                    r = await channel.request(ControlledShutdownRequest(broker_id=self.broker_id,
                                                                        broker_epoch=self.broker_epoch),
                                              CONTROLLED_SHUTDOWN_VERSION)
                    if r.error_code == errors.NONE:
                        # partitions still led here have no other live ISR member: asking again would not
                        # help (Kafka retries anyway); the controller re-elects them when we are gone
                        log.info("broker %d: controlled shutdown done (controller %d)%s", self.broker_id, controller,
                                 f"; {len(r.remaining_partitions)} partition(s) have no other in-sync replica"
                                 if r.remaining_partitions else "")
                        return not r.remaining_partitions
                    log.info("broker %d: controlled shutdown attempt %d: error %d", self.broker_id, attempt,
                             r.error_code)
                except ChannelError as e:
                    log.info("broker %d: controlled shutdown attempt %d failed: %s", self.broker_id, attempt, e)
                finally:
                    channel.close()
            if attempt < s.controlled_shutdown_retries:
                await asyncio.sleep(s.controlled_shutdown_backoff_ms / 1000)
        log.warning("broker %d: stopping without a complete controlled shutdown", self.broker_id)
        return False

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool
                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """ElectLeaders: only the controller elects (clients send it there); NotController elsewhere."""
        if not self.controller.active:
            raise errors.NotController(f"broker {self.broker_id} is not the controller "
                                       f"({self.cache.controller_id} is)")
        return await self.controller.elect_leaders(partitions, unclean)

    async def alter_partition_reassignments(self, wanted: dict[tuple[str, int], list[int] | None],
                                            allow_rf_change: bool) -> dict[tuple[str, int], tuple[int, str | None]]:
        """AlterPartitionReassignments (KIP-455): only the controller reassigns; NotController elsewhere (Kafka's
        admin client then asks the controller named by its metadata)."""
        self._require_controller()
        return await self.controller.alter_reassignments(wanted, allow_rf_change)

    def list_partition_reassignments(self, partitions: list[tuple[str, int]] | None):
        """ListPartitionReassignments: {partition: ReplicaAssignment} of those being reassigned (controller only)."""
        self._require_controller()
        return self.controller.ongoing_reassignments(partitions)

    def _require_controller(self) -> None:
        if not self.controller.active:
            raise errors.NotController(f"broker {self.broker_id} is not the controller "
                                       f"({self.cache.controller_id} is)")

    # -- producer ids ----------------------------------------------------------------------------------
    def allocate_producer_id(self) -> int:
        """A producer id unique in the cluster: blocks of ids are claimed in /latest_producer_id_block."""
        if self._pid_next > self._pid_end:
            block = self.store.allocate_producer_id_block(self.broker_id, PRODUCER_ID_BLOCK_SIZE)
            self._pid_next, self._pid_end = block.block_start, block.block_end
        pid = self._pid_next
        self._pid_next += 1
        return pid
