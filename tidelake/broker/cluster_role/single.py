"""A broker alone: it leads every partition, has no controller to obey, and answers the controller's admin
requests as Kafka's single broker would."""
from __future__ import annotations

from tidelake import errors
from tidelake.broker.cluster_role.protocol import CoordinatorAnswer, ElectionResults, PartitionKey, PartitionState
from tidelake.broker.metadata import MetadataStore
from tidelake.cluster.member import LiveBroker
from tidelake.coordinator.transactions import TransactionCoordinator
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


class SingleBrokerView:
    def __init__(self, node_id: int, logs: LogManager):
        self._node_id, self._logs = node_id, logs

    async def wait_for_first_metadata(self) -> None:
        return None

    def live_brokers(self, listener: str) -> list[LiveBroker]:
        return []

    def controller_id(self) -> int:
        return self._node_id

    def partition_states(self, topic: str, start: int, end: int) -> list[PartitionState]:
        nid = self._node_id
        return [PartitionState(p, errors.NONE, nid, 0, [nid], [nid], []) for p in range(start, end)]

    def knows_partition(self, topic: str, partition: int) -> bool:
        return self._logs.get(topic, partition) is not None


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
                                      group_id: str) -> None:
        self._transactions.check_txn_offset_commit(transactional_id, producer_id, producer_epoch, group_id)
