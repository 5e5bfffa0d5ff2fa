"""``BrokerStateSnapshot``: what one scrape of the broker's metrics reads of its state, typed. The broker
builds it (``Broker.state_snapshot``, on its event loop, so it is one consistent moment); the collector only
reads it, so nothing here knows the broker's objects."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class PartitionLogState:
    topic: str
    partition: int
    size_bytes: int
    segments: int
    log_start_offset: int
    high_watermark: int  # the end consumers see


@dataclass(frozen=True)
class GroupLag:
    """A group's committed offset on a partition and the records after it (log end minus committed, as Kafka's
    exporters compute it)."""
    group: str
    topic: str
    partition: int
    committed_offset: int
    lag: int


@dataclass(frozen=True)
class TransactionCounts:
    """Transactions since the broker started (``begun``, ``committed``, ``aborted``, ``timed_out``) and open now."""
    begun: int = 0
    committed: int = 0
    aborted: int = 0  # timed-out ones included
    timed_out: int = 0
    ongoing: int = 0


@dataclass(frozen=True)
class ReplicationState:
    """A cluster broker's replication: partitions it leads whose ISR lacks replicas, ISR changes it wrote,
    leaderships it took."""
    under_replicated: int
    isr_shrinks: int
    isr_expands: int
    leader_elections: int


@dataclass(frozen=True)
class BrokerStateSnapshot:
    connections: int
    logs: tuple[PartitionLogState, ...] = ()  # by topic, partition
    group_lag: tuple[GroupLag, ...] = ()  # by group, topic, partition
    group_members: Mapping[str, int] = field(default_factory=dict)
    rebalances: Mapping[str, int] = field(default_factory=dict)  # by group, since the broker started
    transactions: TransactionCounts = TransactionCounts()
    replication: ReplicationState | None = None  # None: a broker not in a cluster

    def partitions_per_topic(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for log in self.logs:
            counts[log.topic] = counts.get(log.topic, 0) + 1
        return counts
