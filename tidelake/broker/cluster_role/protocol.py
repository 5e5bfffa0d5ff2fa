"""``ControllerRequests`` and ``ClusterView``: see the package."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tidelake.cluster.member import LiveBroker

PartitionKey = tuple[str, int]
ElectionResults = dict[PartitionKey, tuple[int, str | None]]  # (error code, message) per partition


@dataclass(frozen=True)
class CoordinatorAnswer:
    """FindCoordinator's answer for one key."""
    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None = None  # why there is none (e.g. too few brokers for the internal topic)


@dataclass(frozen=True)
class CreatedTopic:
    """What CreateTopics reports of a topic created (or, validate-only, that would be)."""
    topic_id: object
    partitions: int
    replication_factor: int
    configs: dict[str, str]


@dataclass(frozen=True)
class PartitionState:
    """A partition as Metadata and DescribeTopicPartitions describe it."""
    partition: int
    error_code: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


@dataclass(frozen=True)
class MetadataQuorum:
    """What DescribeQuorum answers of the metadata quorum (``handlers/quorum.py``): its one voter, which leads it,
    at a leader epoch and high watermark, and the other brokers as observers (their offsets unknown)."""
    leader_id: int
    leader_epoch: int
    high_watermark: int  # -1: unknown
    observers: tuple[int, ...]


class ControllerRequests(Protocol):
    """The controller's requests to this broker, and the admin requests only a controller answers. A
    ``ClusterMember`` is the cluster's implementation."""

    async def handle_leader_and_isr(self, request, version: int):
        """LeaderAndIsr's response; a broker not in a cluster raises StaleControllerEpoch."""

    async def handle_update_metadata(self, request, version: int):
        """UpdateMetadata's response; a broker not in a cluster raises StaleControllerEpoch."""

    async def handle_stop_replica(self, request, version: int):
        """StopReplica's response; a broker not in a cluster raises StaleControllerEpoch."""

    async def handle_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[PartitionKey]:
        """The partitions the stopping broker still leads; NotController where no controller runs."""

    async def elect_leaders(self, partitions: list[PartitionKey] | None, unclean: bool) -> ElectionResults:
        """ElectLeaders' answer per partition (None: every partition)."""

    async def alter_partition_reassignments(self, wanted: dict[PartitionKey, list[int] | None],
                                            allow_rf_change: bool) -> ElectionResults:
        """AlterPartitionReassignments' answer per partition (a None target cancels)."""

    def list_partition_reassignments(self, partitions: list[PartitionKey] | None) -> dict:
        """The ongoing reassignments (with ``replicas``, ``adding``, ``removing``) by partition."""


class ClusterView(Protocol):
    """The cluster as this broker's metadata answers describe it."""

    async def wait_for_first_metadata(self) -> None:
        """Until the controller has told this broker the cluster (at once on a broker alone)."""

    def live_brokers(self, listener: str) -> list[LiveBroker]:
        """The brokers clients may dial on ``listener`` (empty: none known beyond this one)."""

    def controller_id(self) -> int:
        """The controller's broker id (a broker alone names itself)."""

    def metadata_quorum(self) -> MetadataQuorum:
        """The metadata quorum DescribeQuorum describes (a broker alone: itself)."""

    def partition_states(self, topic: str, start: int, end: int) -> list[PartitionState]:
        """Partitions ``start``..``end - 1`` of a topic (LEADER_NOT_AVAILABLE while one has no leader)."""

    def knows_partition(self, topic: str, partition: int) -> bool:
        """Whether the partition exists (anywhere in the cluster)."""

    async def high_watermarks(self, partitions: list[PartitionKey]) -> dict[PartitionKey, int]:
        """Each partition's high watermark as its leader has it (another broker's asked with ListOffsets, as Kafka's
        group coordinator does for a share group's lag); a partition whose leader does not answer is left out."""


class Coordination(Protocol):
    """Which broker coordinates a group or a transactional id, and the producer ids handed out."""

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before (in a cluster: unique across brokers)."""

    def check_group_coordinator(self, group_id: str) -> None:
        """NotCoordinator unless this broker coordinates the group."""

    def check_transaction_coordinator(self, transactional_id: str) -> None:
        """NotCoordinator unless this broker coordinates the transactional id (and has loaded it)."""

    async def find_coordinator(self, key_type: int, key: str, here: LiveBroker, listener: str) -> CoordinatorAnswer:
        """The coordinator of a group (key type 0) or transactional id (1) on ``listener`` (``here``: this
        broker's address on it)."""

    async def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                      group_id: str, add: bool) -> bool:
        """TxnOffsetCommit's checks: this broker coordinates the group, and the group's offsets partition is in
        the producer's open transaction (asking its coordinator, KIP-890, when that is another broker), or with
        ``add`` (a v2 producer, KIP-890 part 2) joins it. True if this broker's transaction coordinator wrote
        the addition (the caller waits for its replication; another broker's answers once it is replicated)."""


class TopicAdmin(Protocol):
    """Creating, deleting, growing and configuring topics: on a broker alone its own metadata (saved before
    answering); in a cluster ZooKeeper's, which the controller and every broker follow."""

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                           assignment: dict[int, list[int]] | None, *, validate_only: bool,
                           timeout_ms: int) -> CreatedTopic:
        """CreateTopics for one topic (``assignment``: replicas by partition, instead of the two counts)."""

    async def auto_create_topic(self, name: str) -> tuple[object, int]:
        """Metadata's auto-creation: (the topic's ``TopicInfo`` when it can be described now, else None; the error
        code to answer otherwise: LEADER_NOT_AVAILABLE while a cluster creates it)."""

    async def delete_topic(self, name: str) -> None:
        """DeleteTopics for one topic."""

    async def add_partitions(self, name: str, count: int, assignment: list[list[int]] | None, *,
                             validate_only: bool, timeout_ms: int) -> None:
        """CreatePartitions for one topic."""

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool) -> None:
        """Replace a topic's config overrides (validated)."""


class GroupConfigAdmin(Protocol):
    """Setting a group's configs (its GROUP resource's ``share.*`` ones): on a broker alone its own metadata; in a
    cluster ZooKeeper's (beside the topics' configs), which every broker follows, so that each partition's leader
    starts and serves the group's share-partitions alike."""

    async def alter_group_configs(self, group_id: str, configs: dict[str, str], *, validate_only: bool) -> None:
        """Replace a group's configs (validated: InvalidConfig names the first bad one)."""
