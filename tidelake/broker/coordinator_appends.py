"""``CoordinatorAppends``: how the group and transaction coordinators write their records (offsets, group and
transaction state) to their internal topics' partitions. Chosen once at start-up: on one broker every partition
is this one's (``LocalAppends``); in a cluster only the partition's leader appends, at its leader epoch, and its
high watermark follows (``LeaderAppends``)."""
from __future__ import annotations

from typing import Protocol

from tidelake.broker.partitions import Partitions
from tidelake.cluster.member import ClusterMember
from tidelake.errors import UnknownTopicOrPartition
from tidelake.log import AppendResult


class CoordinatorAppends(Protocol):
    def append(self, topic: str, partition: int, data: bytes | bytearray | memoryview, *, now_ms: int) -> AppendResult:
        """Append record batches, fetchers woken. Raises UnknownTopicOrPartition, NotLeaderOrFollower (in a
        cluster, a partition this broker does not lead) or the log's errors."""


class LocalAppends:
    def __init__(self, partitions: Partitions):
        self._partitions = partitions

    def append(self, topic: str, partition: int, data: bytes | bytearray | memoryview, *, now_ms: int) -> AppendResult:
        return self._partitions.append(topic, partition, data, now_ms=now_ms)


class LeaderAppends:
    def __init__(self, partitions: Partitions, cluster: ClusterMember):
        self._partitions = partitions
        self._cluster = cluster

    def append(self, topic: str, partition: int, data: bytes | bytearray | memoryview, *, now_ms: int) -> AppendResult:
        plog = self._partitions.logs.get(topic, partition)
        if plog is None:
            raise UnknownTopicOrPartition(f"{topic}-{partition}")
        epoch = self._cluster.check_leader(topic, partition)
        result = self._partitions.append(topic, partition, data, now_ms=now_ms, leader_epoch=epoch)
        self._cluster.leader_appended(topic, partition, plog)
        return result
