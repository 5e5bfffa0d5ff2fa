"""``MetadataCache``: what this broker knows of the cluster from the controller's UpdateMetadata
requests (Kafka's ``ZkMetadataCache``): the live brokers and their endpoints, and every partition's
leader, leader epoch, replicas and ISR. Metadata, DescribeCluster and FindCoordinator answers are
read from it, on every broker alike."""
from __future__ import annotations

from dataclasses import dataclass, field

from tidelake.cluster.znodes import LEADER_DURING_DELETE


@dataclass
class PartitionMetadata:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


class MetadataCache:
    def __init__(self) -> None:
        self.controller_id = -1
        self.controller_epoch = 0
        self.brokers: dict[int, dict[str, Endpoint]] = {}  # id -> listener name -> endpoint
        self.racks: dict[int, str | None] = {}
        self.partitions: dict[str, dict[int, PartitionMetadata]] = {}

    def apply(self, controller_id: int, controller_epoch: int, brokers, topics) -> tuple[set[str], set[str]]:
        """Apply an UpdateMetadata request (``requests.update_metadata_brokers`` / ``_topics``); returns
        (topics new to this cache, topics deleted)."""
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.brokers = {bid: {listener: Endpoint(host, port) for listener, host, port in eps}
                        for bid, eps, _rack in brokers}
        self.racks = {bid: rack for bid, _eps, rack in brokers}
        new, deleted = set(), set()
        for name, states in topics:
            for ps in states:
                if ps.leader == LEADER_DURING_DELETE:
                    if self.partitions.pop(name, None) is not None:
                        deleted.add(name)
                    break
                if name not in self.partitions:
                    self.partitions[name] = {}
                    new.add(name)
                offline = list(ps.offline_replicas) if ps.offline_replicas else []
                self.partitions[name][ps.partition_index] = PartitionMetadata(
                    ps.leader, ps.leader_epoch, list(ps.replicas), list(ps.isr), offline)
        return new, deleted

    def remove_missing(self, topics: set[str]) -> set[str]:
        """A full UpdateMetadata lists every topic: those it does not name are gone."""
        gone = set(self.partitions) - topics
        for name in gone:
            del self.partitions[name]
        return gone

    def endpoint(self, broker_id: int, listener: str) -> Endpoint | None:
        eps = self.brokers.get(broker_id)
        if not eps:
            return None
        return eps.get(listener) or next(iter(eps.values()))

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        parts = self.partitions.get(topic)
        return parts.get(partition) if parts is not None else None
