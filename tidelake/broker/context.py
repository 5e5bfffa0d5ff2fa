"""What request handlers work with: ``BrokerContext`` (the broker's components, typed, built once by
``Broker``) and ``RequestContext`` (what a handler knows about one request besides its body).

Handlers are ``async def handler(broker: BrokerContext, ctx: RequestContext, request) -> response``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tidelake.broker.config import BrokerConfig
from tidelake.broker.fetch_session import FetchSessionCache
from tidelake.broker.metadata import MetadataStore
from tidelake.broker.partitions import Partitions
from tidelake.broker.topics import TopicManager
from tidelake.clock import wall_ms
from tidelake.coordinator.group import GroupCoordinator
from tidelake.coordinator.transactions import TransactionCoordinator
from tidelake.log import LogManager
from tidelake.observability.broker_stats import BrokerStats
from tidelake.protocol.framing import RequestHeader
from tidelake.security.config import BrokerSecurity
from tidelake.security.session import Session


@dataclass
class Endpoint:
    """The address clients are told to dial (Metadata, FindCoordinator, DescribeCluster)."""
    host: str
    port: int


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
    logs: LogManager
    topics: TopicManager  # topic create/delete/alter over metadata + logs
    partitions: Partitions  # appends that wake Fetch long-polls
    fetch_sessions: FetchSessionCache
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    clock_ms: Callable[[], int] = field(default=wall_ms)
    metrics: BrokerStats | None = None  # request-path counters, only when metrics.listen is set

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    def endpoint_for(self, ctx: RequestContext) -> Endpoint:
        """The address of the listener the client is connected to (Kafka advertises that one)."""
        return self.endpoints.get(ctx.session.listener, self.endpoint)


@dataclass(slots=True)
class RequestContext:
    """One request's header, the client's address and its connection's session (listener, principal)."""
    header: RequestHeader
    client_host: str
    session: Session

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def principal(self) -> str:
        return self.session.principal
