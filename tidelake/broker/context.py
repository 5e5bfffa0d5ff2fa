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
from tidelake.protocol.framing import RequestHeader


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
    endpoint: Endpoint  # the port is final once the listener is bound
    metadata: MetadataStore  # topics, configs, producer ids (persisted)
    logs: LogManager
    topics: TopicManager  # topic create/delete/alter over metadata + logs
    partitions: Partitions  # appends that wake Fetch long-polls
    fetch_sessions: FetchSessionCache
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    clock_ms: Callable[[], int] = field(default=wall_ms)

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id


@dataclass(slots=True)
class RequestContext:
    """One request's header and the client's address."""
    header: RequestHeader
    client_host: str

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
