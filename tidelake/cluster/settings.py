"""What the cluster code needs from the broker, without importing it: its settings (``ClusterSettings``,
built by the broker from its Kafka configs; callables where a dynamic config may change) and its
topic table (``TopicTable``, which the cluster keeps equal to what the controller says)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, Protocol


@dataclass(frozen=True)
class ClusterSettings:
    """Each field is the broker config its comment names; their defaults have one home, the broker's config
    definitions, so none is repeated here."""
    broker_id: int  # node.id / broker.id
    zookeeper_connect: str  # zookeeper.connect
    session_timeout_ms: int  # zookeeper.session.timeout.ms
    connection_timeout_ms: int  # zookeeper.connection.timeout.ms
    rack: str | None  # broker.rack
    replica_fetch_wait_max_ms: int  # replica.fetch.wait.max.ms
    replica_fetch_max_bytes: int  # replica.fetch.max.bytes
    hw_checkpoint_interval_ms: int  # replica.high.watermark.checkpoint.interval.ms
    num_partitions: Callable[[], int]  # num.partitions
    default_replication_factor: Callable[[], int]  # default.replication.factor
    lag_time_max_ms: Callable[[], int]  # replica.lag.time.max.ms
    unclean_default: Callable[[], bool]  # unclean.leader.election.enable
    min_insync_default: Callable[[], int]  # min.insync.replicas
    auto_leader_rebalance: Callable[[], bool]  # auto.leader.rebalance.enable
    leader_imbalance_check_interval_s: float  # leader.imbalance.check.interval.seconds
    leader_imbalance_per_broker_percentage: int  # leader.imbalance.per.broker.percentage
    controlled_shutdown: bool  # controlled.shutdown.enable
    controlled_shutdown_retries: int  # controlled.shutdown.max.retries
    controlled_shutdown_backoff_ms: int  # controlled.shutdown.retry.backoff.ms


@dataclass
class ClusterTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # overrides only
    replication_factor: int = 1


class TopicTable(Protocol):
    """The broker's topics, as the cluster code updates them."""

    def names(self) -> list[str]: ...

    def configs(self, name: str) -> dict[str, str] | None:
        """The topic's config overrides, None if the topic is unknown."""

    def put(self, topic: ClusterTopic) -> None: ...

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's config overrides (its logs take them at once)."""

    def resize(self, name: str, partitions: int) -> None: ...

    def remove(self, name: str) -> None: ...
