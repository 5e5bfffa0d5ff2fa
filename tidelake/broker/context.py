"""What request handlers work with: ``BrokerContext`` (the broker's components, typed, built once by
``Broker``) and ``RequestContext`` (what a handler knows about one request besides its body).

Handlers are ``async def handler(broker: BrokerContext, ctx: RequestContext, request) -> response``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tidelake import errors
from tidelake.broker.access import Grants
from tidelake.broker.cluster_role import ClusterView, ControllerRequests, Coordination, GroupConfigAdmin, TopicAdmin
from tidelake.broker.config import BrokerConfig
from tidelake.broker.fetch_session import FetchSessionCache
from tidelake.broker.metadata import MetadataStore
from tidelake.broker.partition_service import PartitionService
from tidelake.broker.partitions import Partitions
from tidelake.broker.schema_validation import SchemaValidator
from tidelake.broker.share_persister import SharePersister
from tidelake.broker.topics import TopicManager
from tidelake.clock import wall_ms
from tidelake.coordinator.group_coordinator import GroupCoordinator
from tidelake.coordinator.share_coordinator import ShareStateCoordinator
from tidelake.coordinator.share_group import ShareGroupCoordinator
from tidelake.coordinator.transactions import TransactionCoordinator
from tidelake.coordinator.txn_log import TRANSACTION_STATE_TOPIC
from tidelake.observability.broker_stats import BrokerStats
from tidelake.protocol.framing import RequestHeader
from tidelake.security.config import BrokerSecurity
from tidelake.security.session import Session


@dataclass
class Endpoint:
    """The address clients are told to dial (Metadata, FindCoordinator, DescribeCluster)."""
    host: str
    port: int

    def bound_to(self, port: int) -> None:
        """The listener is bound: a port 0 (any) becomes the one it got."""
        self.port = port


@dataclass(eq=False)
class BrokerContext:
    """Every component a handler may use. Built in one place (``Broker.__init__``); nothing is
    attached later."""
    node_id: int
    config: BrokerConfig
    data_dir: Path
    endpoint: Endpoint  # the first listener's advertised address; the port is final once it is bound
    endpoints: dict[str, Endpoint]  # every listener's advertised address, by listener name
    security: BrokerSecurity  # listeners' TLS/SASL settings, credentials, ACLs, the authorizer (or None)
    metadata: MetadataStore  # topics, configs, producer ids (persisted)
    topics: TopicManager  # topic create/delete/alter over metadata + logs
    partitions: Partitions  # appends that wake Fetch long-polls
    partition_service: PartitionService  # produce/fetch's append, read, leader checks, acks wait (one node or a cluster)
    controller: ControllerRequests  # the controller's requests and the admin requests it answers (one node or a cluster)
    cluster_view: ClusterView  # the brokers, controller and partition leaders metadata answers name
    coordination: Coordination  # who coordinates groups and transactional ids; producer ids
    topic_admin: TopicAdmin  # topic creation, deletion, growth and configs (own metadata, or ZooKeeper's)
    group_config_admin: GroupConfigAdmin  # a group's share.* configs (own metadata, or ZooKeeper's)
    fetch_sessions: FetchSessionCache
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    share_groups: ShareGroupCoordinator  # KIP-932 share groups and their share-partitions
    share_state: ShareStateCoordinator  # a cluster's share coordinator (share-partition state) for the partitions led
    share_persister: SharePersister  # where share-partitions keep their state (own state topic, or a cluster's)
    clock_ms: Callable[[], int] = field(default=wall_ms)
    metrics: BrokerStats | None = None  # request-path counters, only when metrics.listen is set
    schema_validation: SchemaValidator | None = None  # with a schema registry configured: produce-time id checks

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    def leader_epoch(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        """The leader epoch to serve (and stamp appends with) a partition at: 0 on a single broker;
        in a cluster this broker's, raising NotLeaderOrFollower (clients refresh their metadata and
        go to the leader), FencedLeaderEpoch or UnknownLeaderEpoch."""
        return self.partition_service.leader_epoch(topic, partition, current_leader_epoch)

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before: this broker's own sequence, or in a cluster one unique
        across brokers (blocks claimed in ZooKeeper)."""
        return self.coordination.allocate_producer_id()

    def check_group_coordinator(self, *group_ids: str) -> None:
        """NotCoordinator unless this broker coordinates every one of the groups (in a cluster: it leads the
        group's ``__consumer_offsets`` partition; the client finds the new one)."""
        for group_id in group_ids:
            self.coordination.check_group_coordinator(group_id)

    def check_transaction_coordinator(self, transactional_id: str) -> None:
        """NotCoordinator unless this broker coordinates the transactional id (in a cluster: it leads the id's
        ``__transaction_state`` partition and has loaded it)."""
        self.coordination.check_transaction_coordinator(transactional_id)

    async def transaction_state_replicated(self, transactional_id: str) -> None:
        """In a cluster, wait until the in-sync replicas of the id's ``__transaction_state`` partition have
        everything written to it so far (acks=all for the coordinator's writes). Raises NotCoordinator
        (leadership lost) or CoordinatorNotAvailable (too few replicas, timeout), Kafka's mapping."""
        partition = self.transactions.partition_for(transactional_id)
        code = await self.partition_service.log_end_replicated(TRANSACTION_STATE_TOPIC, partition,
                                                               self.config.get_int("request.timeout.ms"))
        if code == errors.NotLeaderOrFollower.code:
            raise errors.NotCoordinator(f"broker {self.node_id} lost {TRANSACTION_STATE_TOPIC}-{partition}")
        if code:
            raise errors.CoordinatorNotAvailable(f"{TRANSACTION_STATE_TOPIC}-{partition} write not replicated "
                                                 f"(error {code})")

    def missing_log_code(self, topic: str | None, partition: int) -> int:
        """The error for a partition with no log here: in a cluster, one hosted by other brokers is
        NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata), as Kafka answers; else unknown."""
        return self.partition_service.missing_log_code(topic, partition)

    def endpoint_for(self, ctx: RequestContext) -> Endpoint:
        """The address of the listener the client is connected to (Kafka advertises that one)."""
        return self.endpoints.get(ctx.session.listener, self.endpoint)


@dataclass(slots=True)
class RequestContext:
    """One request's header, the client's address, its connection's session (listener, principal) and
    what the API's declared in-handler checks permit it (``tidelake.broker.access``)."""
    header: RequestHeader
    client_host: str
    session: Session
    grants: Grants

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def principal(self) -> str:
        return self.session.principal
