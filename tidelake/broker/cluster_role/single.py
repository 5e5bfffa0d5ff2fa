"""A broker alone: it leads every partition, has no controller to obey, and answers the controller's admin
requests as Kafka's single broker would."""
from __future__ import annotations

from tidelake import errors
from tidelake.broker.cluster_role.protocol import (CoordinatorAnswer, CreatedTopic, ElectionResults, MetadataQuorum,
                                                  PartitionKey, PartitionState)
from tidelake.broker.metadata import MetadataStore, TopicInfo
from tidelake.broker.topics import TopicManager
from tidelake.cluster.member import LiveBroker
from tidelake.coordinator.group_coordinator import GroupCoordinator
from tidelake.coordinator.group_resource_configs import validate_group_configs
from tidelake.coordinator.share_group import ShareGroupCoordinator
from tidelake.coordinator.transactions import TransactionCoordinator
from tidelake.coordinator.txn_metadata import TRANSACTION_VERSION_2
from tidelake.log import LogManager


def _not_in_a_cluster() -> errors.KafkaApiError:
    return errors.StaleControllerEpoch("this broker is not in a cluster (no zookeeper.connect)")


class SingleBrokerController:
    def __init__(self, node_id: int, logs: LogManager, metadata: MetadataStore):
        self._node_id, self._logs, self._metadata = node_id, logs, metadata

    async def handle_leader_and_isr(self, request, version: int):
        raise _not_in_a_cluster()

    async def handle_update_metadata(self, request, version: int):
        raise _not_in_a_cluster()

    async def handle_stop_replica(self, request, version: int):
        raise _not_in_a_cluster()

    async def handle_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[PartitionKey]:
        raise errors.NotController("this broker is not in a cluster (no zookeeper.connect)")

    async def elect_leaders(self, partitions: list[PartitionKey] | None, unclean: bool) -> ElectionResults:
        # every partition already has its only possible leader
        wanted = partitions if partitions is not None else [
            (name, p) for name, info in self._metadata.topics.items() for p in range(info.partitions)]
        return {key: ((errors.ElectionNotNeeded.code, "a single broker leads every partition")
                      if self._logs.get(*key) is not None
                      else (errors.UnknownTopicOrPartition.code, f"{key[0]}-{key[1]} does not exist"))
                for key in wanted}

    async def alter_partition_reassignments(self, wanted: dict[PartitionKey, list[int] | None],
                                            allow_rf_change: bool) -> ElectionResults:
        results: ElectionResults = {}
        for (topic, p), target in wanted.items():  # nowhere to move a replica to
            if self._logs.get(topic, p) is None:
                results[(topic, p)] = (errors.UnknownTopicOrPartition.code, f"{topic}-{p} does not exist")
            elif target is None:
                results[(topic, p)] = (errors.NoReassignmentInProgress.code,
                                       f"no reassignment of {topic}-{p} is in progress")
            elif target != [self._node_id]:
                results[(topic, p)] = (errors.InvalidReplicaAssignment.code,
                                       f"Unknown broker ids in partition reassignment replica list: "
                                       f"{[r for r in target if r != self._node_id] or target}")
            else:
                results[(topic, p)] = (errors.NONE, None)
        return results

    def list_partition_reassignments(self, partitions: list[PartitionKey] | None) -> dict:
        return {}


# A broker alone is its metadata quorum's one voter, elected once: Kafka's first leader epoch of a new quorum.
SINGLE_QUORUM_EPOCH = 1


class SingleBrokerView:
    def __init__(self, node_id: int, logs: LogManager, metadata: MetadataStore):
        self._node_id, self._logs, self._metadata = node_id, logs, metadata

    async def wait_for_first_metadata(self) -> None:
        return None

    def live_brokers(self, listener: str) -> list[LiveBroker]:
        return []

    def controller_id(self) -> int:
        return self._node_id

    def metadata_quorum(self) -> MetadataQuorum:
        # its metadata "log" is the metadata file: the high watermark counts the states written to it
        return MetadataQuorum(self._node_id, SINGLE_QUORUM_EPOCH, self._metadata.metadata_offset, ())

    def partition_states(self, topic: str, start: int, end: int) -> list[PartitionState]:
        nid = self._node_id
        return [PartitionState(p, errors.NONE, nid, 0, [nid], [nid], []) for p in range(start, end)]

    def knows_partition(self, topic: str, partition: int) -> bool:
        return self._logs.get(topic, partition) is not None

    async def high_watermarks(self, partitions: list[PartitionKey]) -> dict[PartitionKey, int]:
        return {(t, p): plog.high_watermark for t, p in partitions if (plog := self._logs.get(t, p)) is not None}


class SingleBrokerCoordination:
    """This broker coordinates every group and transactional id; producer ids are its own sequence."""

    def __init__(self, metadata: MetadataStore, transactions: TransactionCoordinator):
        self._metadata, self._transactions = metadata, transactions

    def allocate_producer_id(self) -> int:
        return self._metadata.allocate_producer_id()

    def check_group_coordinator(self, group_id: str) -> None:
        return None

    def check_transaction_coordinator(self, transactional_id: str) -> None:
        return None

    async def find_coordinator(self, key_type: int, key: str, here: LiveBroker, listener: str) -> CoordinatorAnswer:
        return CoordinatorAnswer(key, here.broker_id, here.host, here.port, errors.NONE)

    async def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                      group_id: str, add: bool) -> bool:
        if add:
            self._transactions.add_offsets(transactional_id, producer_id, producer_epoch, group_id,
                                           TRANSACTION_VERSION_2)
            return True
        self._transactions.check_txn_offset_commit(transactional_id, producer_id, producer_epoch, group_id)
        return False


class SingleBrokerTopics:
    """Topics in this broker's metadata and logs; the metadata file is saved (off the loop) before answering."""

    def __init__(self, node_id: int, topics: TopicManager, metadata: MetadataStore):
        self._node_id, self._topics, self._metadata = node_id, topics, metadata

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                           assignment: dict[int, list[int]] | None, *, validate_only: bool,
                           timeout_ms: int) -> CreatedTopic:
        if assignment is not None:
            if any(replicas != [self._node_id] for replicas in assignment.values()) or \
                    sorted(assignment) != list(range(len(assignment))):
                raise errors.InvalidReplicaAssignment(f"Invalid replica assignment; the only broker is {self._node_id}")
            partitions, replication_factor = len(assignment), 1
        info = self._topics.create(name, partitions, configs, replication_factor=replication_factor,
                                   validate_only=validate_only, persist=False)
        if not validate_only:
            await self._metadata.save_async()  # durable before acknowledged, without blocking the loop
        return CreatedTopic(info.topic_id, info.partitions, 1, info.configs)

    async def auto_create_topic(self, name: str) -> tuple[TopicInfo | None, int]:
        try:
            info = self._topics.create(name, None, persist=False)
        except errors.KafkaApiError as e:
            info = self._topics.get(name)  # created meanwhile
            return info, e.code
        await self._metadata.save_async()  # durable before the client hears of it, loop not blocked
        return info, errors.NONE

    async def delete_topic(self, name: str) -> None:
        self._topics.delete(name)

    async def add_partitions(self, name: str, count: int, assignment: list[list[int]] | None, *,
                             validate_only: bool, timeout_ms: int) -> None:
        if assignment is not None and any(replicas != [self._node_id] for replicas in assignment):
            raise errors.InvalidReplicaAssignment(f"Invalid replica assignment; the only broker is {self._node_id}")
        self._topics.add_partitions(name, count, validate_only=validate_only)

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool) -> None:
        self._topics.alter_configs(name, configs, validate_only=validate_only)


class SingleBrokerGroupConfigs:
    """A group's configs in this broker's group coordinators (the share-group one saves them with its metadata)."""

    def __init__(self, share: ShareGroupCoordinator, groups: GroupCoordinator):
        self._share, self._groups = share, groups

    async def alter_group_configs(self, group_id: str, configs: dict[str, str], *, validate_only: bool) -> None:
        validate_group_configs(configs, self._groups.config)
        if not validate_only:
            self._share.set_group_configs(group_id, configs)
            self._groups.set_group_configs(group_id, configs)
