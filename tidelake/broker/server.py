"""The broker process: an asyncio (uvloop) TCP server speaking the Kafka protocol.

``Broker`` builds the ``BrokerContext`` (every component handlers use) in one place, loads state at
``start()`` (partition logs, then the group and transaction coordinators from their internal
topics), serves one ``KafkaTransport`` per client socket, and runs the periodic work: log
maintenance (roll, flush, retention, compaction) and idle-connection closing, the group
coordinator's clock (session and rebalance timeouts) and the transaction coordinator's (timeouts,
expiry). ``stop()`` stops all of it and flushes and closes every log.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import time
from pathlib import Path
from typing import Mapping

from tidelake.broker.cluster_role import (ClusterView, ControllerRequests, Coordination, GroupConfigAdmin,
                                         SingleBrokerController, SingleBrokerCoordination, SingleBrokerGroupConfigs,
                                         SingleBrokerTopics, SingleBrokerView, TopicAdmin, ZooKeeperCoordination,
                                         ZooKeeperGroupConfigs, ZooKeeperTopics, ZooKeeperView)
from tidelake.broker.cluster_topics import MetadataTopicTable
from tidelake.broker.config import BrokerConfig
from tidelake.broker.config_definitions import ConfigError
from tidelake.broker.context import BrokerContext, Endpoint
from tidelake.broker.coordinator_appends import LeaderAppends, LocalAppends
from tidelake.broker.coordinators import (build_group_coordinator, cluster_transaction_coordinator, coordinator_leadership,
                                          load_groups, load_transactions, single_broker_transaction_coordinator)
from tidelake.broker.dispatch import Dispatcher
from tidelake.broker.share_groups import (build_share_coordinator, build_share_state_coordinator, load_share_groups,
                                          load_share_state, share_leadership, share_topic_deletion)
from tidelake.broker.share_persister import LocalSharePersister, ReplicatedSharePersister, SharePersister
from tidelake.broker.embedded_registry import BrokerSchemaRegistry
from tidelake.broker.registry import REGISTRY
from tidelake.broker.state_snapshot import broker_state_snapshot
from tidelake.broker.remote_storage import remote_log_manager
from tidelake.broker.fetch_session import FetchSessionCache
from tidelake.broker.metadata import MetadataStore, TopicInfo
from tidelake.broker.partition_service import LocalPartitions, PartitionService, ReplicatedPartitions
from tidelake.broker.partitions import Partitions
from tidelake.broker.topics import TopicManager
from tidelake.broker.transport import KafkaTransport
from tidelake.clock import wall_ms
from tidelake.cluster.member import FIRST_METADATA_WAIT_S, ClusterMember
from tidelake.cluster.settings import ClusterSettings
from tidelake.cluster.znodes import BrokerEndpoint
from tidelake.coordinator.group import ClassicGroup
from tidelake.coordinator.group_resource_configs import validate_group_configs
from tidelake.coordinator.transactions import TxnStatus
from tidelake.log import LogManager
from tidelake.log.dir_lock import DataDirLock
from tidelake.observability.broker_observer import BrokerObserver
from tidelake.observability.broker_state import BrokerStateSnapshot
from tidelake.observability.broker_stats import BrokerStats
from tidelake.observability.server import parse_listen
from tidelake.security.config import BrokerSecurity, SecurityConfigError
from tidelake.security.session import Session
from tidelake.security.requested_auth import TlsServerProtocol
from tidelake.tasks import cancel_and_wait

log = logging.getLogger("tidelake.broker.server")

GROUP_TICK_S = 0.1  # the group coordinator's clock resolution (session / rebalance timeouts)
MAX_FETCH_SESSIONS = 1000
TLS_HANDSHAKE_TIMEOUT_S = 10  # a TLS client that has not finished its handshake by then is dropped


class Broker:
    """A single-node Kafka-compatible broker. Use ``await start()`` / ``await stop()`` in a loop."""

    def __init__(self, data_dir: str | Path, config: BrokerConfig | Mapping[str, str] | None = None, *,
                 host: str | None = None, port: int | None = None,
                 advertised_host: str | None = None, advertised_port: int | None = None):
        """``host``/``port`` default to the config's ``listeners``, the advertised address to its
        ``advertised.listeners``, else to the bound address."""
        data_dir = Path(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        config = config if isinstance(config, BrokerConfig) else BrokerConfig(config or {})
        served = config.served_listeners()
        advertised = config.advertised_listeners()
        # host/port (and the advertised pair) stand for the first listener: --listen, EmbeddedBroker
        first = served[0][0]
        if host is None or port is None:
            host = first.host or "0.0.0.0" if host is None else host
            port = first.port if port is None else port
        if advertised_host is None and advertised_port is None and first.name in advertised:
            advertised_host, advertised_port = advertised[first.name].host or None, advertised[first.name].port
        self.host, self.port = host, port
        self._advertised_port = advertised_port
        if advertised_host is None:  # a wildcard is not an address clients can dial
            advertised_host = socket.gethostname() if host in ("", "0.0.0.0", "::") else host
        # (name, bind host, bind port, advertised host or None, advertised port or None) per listener
        self._binds = [(first.name, host, port, advertised_host, advertised_port)]
        for listener, _protocol in served[1:]:
            adv = advertised.get(listener.name)
            bind_host = listener.host or "0.0.0.0"
            adv_host = adv.host if adv is not None and adv.host else (
                socket.gethostname() if bind_host in ("0.0.0.0", "::") else bind_host)
            self._binds.append((listener.name, bind_host, listener.port, adv_host, adv.port if adv else None))
        try:
            security = BrokerSecurity(config, {listener.name: protocol for listener, protocol in served}, data_dir)
        except SecurityConfigError as e:
            raise ConfigError(str(e)) from None
        endpoints = {name: Endpoint(adv_host, adv_port or bind_port)
                     for name, _h, bind_port, adv_host, adv_port in self._binds}
        metadata = MetadataStore(data_dir, cluster_id=None)
        config.dynamic.update(metadata.dynamic_broker_configs)
        config.dynamic_default.update(metadata.dynamic_default_broker_configs)
        config.finalized_features.update(metadata.finalized_features)
        metrics_listen = config.get("metrics.listen") or None
        try:
            self._metrics_address = parse_listen(metrics_listen, "metrics.listen") if metrics_listen else None
        except ValueError as e:
            raise ConfigError(str(e)) from None
        # the broker's own: handlers reach the logs only through the partition service (no BrokerContext.logs)
        logs = self._logs = LogManager(data_dir, remote=remote_log_manager(config))
        partitions = Partitions(logs, wall_ms)
        topics = TopicManager(config, metadata, logs, partitions)
        node_id = config.node_id()
        cluster = self._cluster_member(config, node_id, logs, metadata, topics, partitions, served)
        self._cluster = cluster  # started, joined and stopped with the broker; handlers see only the roles below
        self.schema_registry = BrokerSchemaRegistry(config, next(
            (listener.name for listener, protocol in served if protocol == "PLAINTEXT"), None))
        schemas = self.schema_registry.validator
        # The one place where a broker alone and one of a cluster differ: each role's implementation is chosen
        # here, and nothing downstream asks which it has.
        if cluster is None:
            appends = LocalAppends(partitions)
            groups = build_group_coordinator(config, topics, appends, wall_ms)
            transactions = single_broker_transaction_coordinator(config, topics, partitions, appends, groups,
                                                                 metadata.allocate_producer_id)
            service: PartitionService = LocalPartitions(logs, partitions, topics, transactions, schemas)
            controller: ControllerRequests = SingleBrokerController(node_id, logs, metadata)
            cluster_view: ClusterView = SingleBrokerView(node_id, logs, metadata)
            coordination: Coordination = SingleBrokerCoordination(metadata, transactions)
            topic_admin: TopicAdmin = SingleBrokerTopics(node_id, topics, metadata)
            share_groups = build_share_coordinator(config, topics, partitions, appends, groups.partition_for)
            share_persister: SharePersister = LocalSharePersister()
            group_config_admin: GroupConfigAdmin = SingleBrokerGroupConfigs(share_groups, groups)
            for group_id, group_configs in metadata.group_configs.items():
                groups.set_group_configs(group_id, group_configs)
        else:
            appends = LeaderAppends(partitions, cluster)  # only a partition's leader appends
            groups = build_group_coordinator(config, topics, appends, wall_ms)
            transactions = cluster_transaction_coordinator(config, partitions, appends, groups, cluster)
            service = ReplicatedPartitions(logs, partitions, topics, transactions, schemas, cluster)
            controller, cluster_view = cluster, ZooKeeperView(cluster)
            coordination = ZooKeeperCoordination(cluster, config, groups, transactions, node_id)
            topic_admin = ZooKeeperTopics(cluster, tiered_storage=topics.tiered_storage,
                                          schema_registry=topics.schema_registry)
            share_groups = build_share_coordinator(config, topics, partitions, appends, groups.partition_for,
                                                   leads=cluster.leads)
            share_persister = ReplicatedSharePersister(cluster, config, topics, node_id)
            group_config_admin = ZooKeeperGroupConfigs(cluster, groups.config)

            def group_configs_changed(group_id: str, group_configs: dict[str, str]) -> None:
                validate_group_configs(group_configs, groups.config)  # written by another tool, maybe
                share_groups.set_group_configs(group_id, group_configs)
                groups.set_group_configs(group_id, group_configs)
            cluster.on_group_config_change(group_configs_changed)
        share_state = build_share_state_coordinator(config, appends, wall_ms)  # only a cluster's is ever loaded
        if cluster is not None:
            coordinators_move = coordinator_leadership(groups, transactions, logs, cluster, wall_ms)
            share_moves = share_leadership(share_groups, share_state, topics, logs, groups.partition_for, wall_ms)

            def leadership_changed(topic: str, partition: int, leader: bool) -> None:
                coordinators_move(topic, partition, leader)
                share_moves(topic, partition, leader)
            cluster.on_leadership_change(leadership_changed)
            cluster.on_topic_deleted(share_topic_deletion(share_state, topics))
        self.context = BrokerContext(
            node_id=node_id, config=config, data_dir=data_dir,
            endpoint=endpoints[first.name], endpoints=endpoints, security=security, metadata=metadata,
            topics=topics, partitions=partitions, partition_service=service, controller=controller,
            cluster_view=cluster_view, coordination=coordination, topic_admin=topic_admin,
            group_config_admin=group_config_admin,
            fetch_sessions=FetchSessionCache(max_sessions=MAX_FETCH_SESSIONS), groups=groups, transactions=transactions,
            share_groups=share_groups, share_state=share_state, share_persister=share_persister,
            clock_ms=wall_ms, metrics=BrokerStats() if self._metrics_address else None, schema_validation=schemas)
        self.dispatcher = Dispatcher(self.context)
        self.observer: BrokerObserver | None = None  # the metrics listener, from start() to stop()
        self.connections: set[KafkaTransport] = set()
        self.ports: dict[str, int] = {}  # bound port by listener name (final after start)
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: list[asyncio.Task] = []
        self._dir_lock = DataDirLock(data_dir)
        self._cluster_joining = False  # the cluster member was started (and must be stopped)

    @staticmethod
    def _cluster_member(config: BrokerConfig, node_id: int, logs: LogManager, metadata: MetadataStore,
                        topics: TopicManager, partitions: Partitions, served) -> ClusterMember | None:
        """With zookeeper.connect this broker is one of a cluster (ZooKeeper mode), else a single node."""
        connect = config.get("zookeeper.connect")
        if not connect:
            return None
        inter = config.get("inter.broker.listener.name") or served[0][0].name
        protocol = dict((listener.name, proto) for listener, proto in served).get(inter)
        if protocol != "PLAINTEXT":
            raise ConfigError(f"inter.broker.listener.name={inter}: a cluster's brokers talk over a PLAINTEXT "
                              f"listener (this one is {protocol})")
        settings = ClusterSettings(
            broker_id=node_id, zookeeper_connect=connect,
            session_timeout_ms=config.get_int("zookeeper.session.timeout.ms"),
            connection_timeout_ms=config.get_int("zookeeper.connection.timeout.ms"),
            rack=config.get("broker.rack"),
            replica_fetch_wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
            replica_fetch_max_bytes=config.get_int("replica.fetch.max.bytes"),
            hw_checkpoint_interval_ms=config.get_int("replica.high.watermark.checkpoint.interval.ms"),
            num_partitions=lambda: config.get_int("num.partitions"),
            default_replication_factor=lambda: config.get_int("default.replication.factor"),
            lag_time_max_ms=lambda: config.get_int("replica.lag.time.max.ms"),
            unclean_default=lambda: config.get_bool("unclean.leader.election.enable"),
            min_insync_default=lambda: config.get_int("min.insync.replicas"),
            auto_leader_rebalance=lambda: config.get_bool("auto.leader.rebalance.enable"),
            leader_imbalance_check_interval_s=config.get_int("leader.imbalance.check.interval.seconds"),
            leader_imbalance_per_broker_percentage=config.get_int("leader.imbalance.per.broker.percentage"),
            controlled_shutdown=config.get_bool("controlled.shutdown.enable"),
            controlled_shutdown_retries=config.get_int("controlled.shutdown.max.retries"),
            controlled_shutdown_backoff_ms=config.get_int("controlled.shutdown.retry.backoff.ms"))
        return ClusterMember(settings, logs, MetadataTopicTable(metadata, logs, topics.log_config), clock_ms=wall_ms,
                             log_config=topics.log_config, notify=partitions.notify)

    # -- what embedders and tools use --------------------------------------------------------------
    @property
    def logs(self) -> LogManager:
        return self._logs

    def create_topic(self, name: str, partitions: int | None = None, configs: Mapping[str, str] | None = None,
                     internal: bool = False) -> TopicInfo:
        """Create a topic (on the broker's loop thread; see ``TopicManager.create``)."""
        return self.context.topics.create(name, partitions, configs, internal)

    async def handle_frame(self, frame, session: Session | None = None) -> bytes | list | None:
        """Answer one request frame without a socket (benchmarks, tools): see ``Dispatcher``; the
        default session is an anonymous PLAINTEXT one."""
        return await self.dispatcher.handle_frame(frame, session or Session.plaintext())

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        ctx = self.context
        # A second broker on the same directory would acknowledge writes into the same segments and
        # lose records: refuse before touching any file.
        self._dir_lock.acquire()
        loop = asyncio.get_running_loop()
        try:
            if self._metrics_address is not None:  # first: /health/live answers while logs recover
                self.observer = BrokerObserver(*self._metrics_address, stats=ctx.metrics,
                                               read_state=lambda: self._on_loop(loop, self.state_snapshot),
                                               ping=lambda: self._on_loop(loop, lambda: None),
                                               api_names={k: spec.name.removesuffix("Request")
                                                          for k, spec in REGISTRY.items()}).start()
            self._logs.load()
            if self.observer is not None:
                self.observer.logs_loaded.set()
            if self._cluster is None:  # in a cluster the controller says which topics exist
                ctx.topics.recover()
            max_request = ctx.config.get_int("socket.request.max.bytes")
            # Bind first (the port is known, e.g. for FindCoordinator), accept only once the coordinators
            # have loaded their state.
            max_unauth = ctx.config.get_int("sasl.server.max.receive.size")
            failed_auth_delay_s = ctx.config.get_int("connection.failed.authentication.delay.ms") / 1000
            for name, bind_host, bind_port, _adv_host, _adv_port in self._binds:
                listener = ctx.security.listeners[name]

                def transport(listener=listener) -> KafkaTransport:
                    return KafkaTransport(self.dispatcher, self.connections, max_request, listener, max_unauth,
                                          failed_auth_delay_s)

                if listener.requested_auth is not None:  # TLS in pyOpenSSL, below the connection's protocol
                    def protocol(listener=listener, transport=transport) -> TlsServerProtocol:
                        return TlsServerProtocol(listener.requested_auth, transport(), TLS_HANDSHAKE_TIMEOUT_S)
                else:
                    protocol = transport
                server = await loop.create_server(
                    protocol, bind_host, bind_port, ssl=listener.ssl_context, reuse_address=True, backlog=1024,
                    start_serving=False, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if listener.ssl_context
                    else None)
                self._servers.append(server)
                self.ports[name] = server.sockets[0].getsockname()[1]
        except BaseException:
            for server in self._servers:
                server.close()
            self._servers = []
            if self.observer is not None:
                self.observer.stop()
                self.observer = None
            self._dir_lock.release()
            raise
        self.port = self.ports[self._binds[0][0]]
        for name, _h, _p, _adv_host, adv_port in self._binds:
            ctx.endpoints[name].bound_to(adv_port or self.ports[name])
        if self._cluster is not None:
            try:
                await self._join_cluster(self._cluster)
            except BaseException:
                await self.stop()
                raise
        else:  # in a cluster the groups (and share state) load as this broker becomes leader of their partitions
            load_groups(ctx.groups, ctx.topics, self._logs, ctx.clock_ms())
            load_transactions(ctx.transactions, self._logs)
            load_share_state(ctx.share_groups, ctx.topics, self._logs)
            load_share_groups(ctx.share_groups, ctx.topics, self._logs, ctx.clock_ms())
        if self.observer is not None:
            self.observer.coordinators_loaded.set()
        # roll, flush, retention and compaction run on the log layer's own thread, off this loop
        self._logs.start_maintenance(ctx.config.get_int("broker.maintenance.interval.ms"),
                                   compaction=ctx.config.get_bool("log.cleaner.enable"),
                                   leads=self._cluster.leads if self._cluster is not None else None,
                                   topic_ids=ctx.topics.topic_id)
        for server in self._servers:
            await server.start_serving()
        self._tasks = [loop.create_task(self._idle_connections_loop()), loop.create_task(self._group_clock()),
                       loop.create_task(self._transaction_clock())]
        for name, bind_host, _p, _a, _ap in self._binds:
            ep = ctx.endpoints[name]
            log.info("broker %d listening on %s:%d (%s, %s; advertised %s:%d), data in %s", ctx.node_id, bind_host,
                     self.ports[name], name, ctx.security.listeners[name].protocol, ep.host, ep.port, ctx.data_dir)
        if self.observer is not None:
            self.observer.serving.set()
            log.info("broker %d metrics and health on %s (/metrics, /health/live, /health/ready)", ctx.node_id,
                     self.observer.url)
        if self.schema_registry.wanted:
            try:
                await self.schema_registry.start(self._registry_bootstrap())
            except BaseException:
                await self.stop()
                raise

    def _registry_bootstrap(self) -> str:
        """Where the embedded registry reaches this broker: its first PLAINTEXT listener, on a local address."""
        name = self.schema_registry.listener
        bind_host = next(h for n, h, *_ in self._binds if n == name)
        host = "127.0.0.1" if bind_host in ("", "0.0.0.0", "::") else bind_host
        return f"[{host}]:{self.ports[name]}" if ":" in host else f"{host}:{self.ports[name]}"

    @property
    def metrics_url(self) -> str | None:
        """``http://HOST:PORT`` of the metrics listener (None unless ``metrics.listen`` is set)."""
        return self.observer.url if self.observer is not None else None

    def state_snapshot(self) -> BrokerStateSnapshot:
        """What a metrics scrape reports of the broker's state (call on the broker's loop)."""
        return broker_state_snapshot(self.context, self._logs, len(self.connections))

    @staticmethod
    def _on_loop(loop: asyncio.AbstractEventLoop, fn, timeout: float = 5.0):
        """``fn()`` run on the broker's loop, from another thread (the metrics listener's): the broker's
        state is read between two events, never mid-change. TimeoutError when the loop does not answer."""
        done: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as e:  # reported to the scrape, not to the loop
                done.set_exception(e)
        loop.call_soon_threadsafe(run)
        return done.result(timeout)

    async def _join_cluster(self, cluster: ClusterMember) -> None:
        ctx = self.context
        inter = ctx.config.get("inter.broker.listener.name") or self._binds[0][0]
        endpoints = [BrokerEndpoint(name, ctx.endpoints[name].host, ctx.endpoints[name].port,
                                    ctx.security.listeners[name].protocol) for name, *_ in self._binds]
        self._cluster_joining = True
        ctx.metadata.adopt_cluster_id(await cluster.start(endpoints, inter, ctx.metadata.cluster_id))
        # the controller sends LeaderAndIsr/UpdateMetadata to our listener: serve before it is elected
        for server in self._servers:
            await server.start_serving()
        if not await cluster.wait_for_first_metadata():
            log.warning("broker %d: no metadata from a controller after %g s; serving anyway", ctx.node_id,
                        FIRST_METADATA_WAIT_S)

    async def stop(self) -> None:
        """Stop accepting, close connections, stop the periodic work, flush and close every log."""
        await self.schema_registry.stop()   # first: it is a client of this broker
        if self._cluster_joining:
            self._cluster_joining = False
            if self._cluster.settings.controlled_shutdown:  # leaderships move before we go
                await self._cluster.controlled_shutdown()
            await self._cluster.stop()
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        await cancel_and_wait(self._tasks)
        self._tasks = []
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):
                pass
        self._servers = []
        self.context.partitions.cancel_waiters()
        self.context.share_persister.close()
        if self.observer is not None:
            self.observer.stop()
            self.observer = None
        self._logs.close()
        self._dir_lock.release()
        log.info("broker %d stopped", self.context.node_id)

    # -- periodic work ----------------------------------------------------------------------------
    async def _idle_connections_loop(self) -> None:
        interval = max(0.01, self.context.config.get_int("broker.maintenance.interval.ms") / 1000)
        while True:
            await asyncio.sleep(interval)
            self._close_idle_connections()

    def _close_idle_connections(self) -> None:
        """Kafka's connections.max.idle.ms: drop connections with no request for that long."""
        limit = self.context.config.get_int("connections.max.idle.ms") / 1000
        now = time.monotonic()
        for conn in list(self.connections):
            if conn.idle_since is not None and now - conn.idle_since > limit:
                log.info("closing idle connection from %s", conn.peer)
                conn.close()

    async def _group_clock(self) -> None:
        ctx = self.context
        while True:
            await asyncio.sleep(GROUP_TICK_S)
            members = _classic_members(ctx.groups.groups)
            try:
                ctx.groups.tick(ctx.clock_ms())
            except Exception:
                log.exception("group coordinator tick failed")
            try:
                for group_id, member_id in ctx.share_groups.tick(ctx.clock_ms()):
                    log.info("share group %s: session expired for %s; its records released", group_id, member_id)
                await ctx.share_persister.flush(ctx.share_groups)
                await ctx.share_persister.initialize_pending(ctx.share_groups)
            except Exception:
                log.exception("share group coordinator tick failed")
            after = _classic_members(ctx.groups.groups)
            for group_id, ids in members.items():
                gone = ids - after.get(group_id, frozenset())
                if gone:
                    log.info("group %s: session expired for %s; rebalancing", group_id, ", ".join(sorted(gone)))

    async def _transaction_clock(self) -> None:
        ctx = self.context
        interval = ctx.config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            ongoing = {tid: (meta.producer_id, meta.producer_epoch, meta.timeout_ms)
                       for tid, meta in ctx.transactions.transactions.items() if meta.state == TxnStatus.ONGOING}
            try:
                ctx.transactions.tick()
            except Exception:  # keep checking; a failed marker write is retried next round
                log.exception("transaction timeout check failed")
            for tid, (pid, epoch, timeout_ms) in ongoing.items():
                meta = ctx.transactions.transactions.get(tid)
                if meta is not None and meta.state in (TxnStatus.PREPARE_ABORT, TxnStatus.COMPLETE_ABORT):
                    log.info("transaction %s (producer id %d, epoch %d) timed out after %d ms: aborted, producer "
                             "fenced with epoch %d", tid, pid, epoch, timeout_ms, meta.producer_epoch)


def _classic_members(groups: Mapping[str, object]) -> dict[str, frozenset[str]]:
    """Member ids of each classic group with members (to report the ones a tick expired)."""
    return {gid: frozenset(g.members) for gid, g in groups.items() if isinstance(g, ClassicGroup) and g.members}
