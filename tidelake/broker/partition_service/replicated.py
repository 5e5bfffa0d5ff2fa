"""``ReplicatedPartitions``: the partition service of one broker of a ZooKeeper cluster. Only the
leader appends and serves (at the epoch clients name, KIP-320), followers' fetches feed the ISR and
the high watermark, and acks=all waits for the in-sync replicas."""
from __future__ import annotations

import asyncio
from typing import Iterable, Sequence

from tidelake import errors
from tidelake.broker.partition_service.local import LocalPartitions
from tidelake.broker.partition_service.outcomes import DeleteOutcome, PendingAcks
from tidelake.broker.partition_service.protocol import FetchPosition
from tidelake.broker.partitions import Partitions
from tidelake.broker.schema_validation import SchemaValidator
from tidelake.broker.topics import TopicManager
from tidelake.cluster.member import ClusterMember
from tidelake.cluster.txn_verification import COORDINATOR_ANSWER_TIMEOUT_MS
from tidelake.coordinator.transactions import TransactionCoordinator
from tidelake.coordinator.txn_log import TRANSACTION_STATE_TOPIC
from tidelake.log import LogManager, PartitionLog
from tidelake.observability.broker_state import ReplicationState


class ReplicatedPartitions(LocalPartitions):
    def __init__(self, logs: LogManager, partitions: Partitions, topics: TopicManager,
                 transactions: TransactionCoordinator, schemas: SchemaValidator | None, cluster: ClusterMember):
        super().__init__(logs, partitions, topics, transactions, schemas)
        self.cluster = cluster

    def leader_epoch(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        return self.cluster.check_leader(topic, partition, current_leader_epoch)

    def missing_log_code(self, topic: str | None, partition: int) -> int:
        # one hosted by other brokers is NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata), as Kafka answers
        if topic is not None and self.cluster.partition(topic, partition) is not None:
            return errors.NotLeaderOrFollower.code
        return errors.UnknownTopicOrPartition.code

    def _isr_shortfall(self, topic: str, partition: int) -> str | None:
        isr = self.cluster.isr_size(topic, partition)
        if isr < self.topics.min_insync_replicas(topic):
            return f"the in-sync replicas ({isr}) are fewer than min.insync.replicas"
        return None

    async def _verify_transaction(self, transactional_id: str, topic: str, partition: int, producer_id: int,
                                  producer_epoch: int, plog: PartitionLog, add: bool) -> None:
        # the coordinator may be another broker, asked (AddPartitionsToTxn: v4 verify_only, v5 adding for a v2
        # producer) only for the batch that starts the transaction here, as Kafka's leader does
        state_partition = self.transactions.partition_for(transactional_id)
        coordinated_here = state_partition in self.transactions.partition_epochs
        if coordinated_here and not add:
            self.transactions.verify_produce(transactional_id, producer_id, producer_epoch, (topic, partition))
            return
        entry = plog.producer_state.producers.get(producer_id)
        if entry is not None and entry.epoch == producer_epoch and entry.current_txn_first_offset is not None:
            return  # this transaction already began here, verified (or added) then
        if coordinated_here:
            self.transactions.add_produce_partition(transactional_id, producer_id, producer_epoch, (topic, partition))
            # the coordinator's write is acknowledged (acks=all) before the batch it admits
            code = await self.log_end_replicated(TRANSACTION_STATE_TOPIC, state_partition,
                                                 COORDINATOR_ANSWER_TIMEOUT_MS)
            if code:
                raise errors.NotEnoughReplicas(f"{TRANSACTION_STATE_TOPIC}-{state_partition}: the addition of "
                                               f"{topic}-{partition} to {transactional_id} not replicated (error {code})")
        else:
            await self.cluster.txn_verifier.verify(TRANSACTION_STATE_TOPIC, state_partition, transactional_id,
                                                   producer_id, producer_epoch, topic, partition, add=add)
        self.cluster.check_leader(topic, partition)  # still the leader after the wait

    def _appended(self, topic: str, partition: int, plog: PartitionLog) -> None:
        self.cluster.leader_appended(topic, partition, plog)

    async def wait_for_acks(self, pending: Sequence[PendingAcks], timeout_ms: int) -> list[int]:
        # answered once the in-sync replicas have the records (the high watermark passed them)
        return list(await asyncio.gather(*(self.cluster.wait_for_acks(p.topic, p.partition, p.last_offset, timeout_ms)
                                           for p in pending)))

    async def log_end_replicated(self, topic: str, partition: int, timeout_ms: int) -> int:
        plog = self.logs.get(topic, partition)
        if plog is None:
            return errors.NotLeaderOrFollower.code
        return await self.cluster.wait_for_acks(topic, partition, plog.log_end_offset - 1, timeout_ms)

    def reads_as_follower(self, replica_id: int | None) -> bool:
        return replica_id is not None and replica_id >= 0

    async def _low_watermark_reached(self, topic: str, partition: int, offset: int, plog: PartitionLog,
                                     timeout_ms: int) -> DeleteOutcome:
        # the followers take the new log start from their next Fetch's answer and name it in the one after
        code, low = await self.cluster.wait_for_low_watermark(topic, partition, offset, timeout_ms)
        return DeleteOutcome(code, low)

    def fetch_leadership(self, requested: Iterable[FetchPosition], epochs: dict[tuple[str | None, int], int],
                         replica_id: int | None, log_starts: dict[tuple[str | None, int], int] | None = None
                         ) -> dict[tuple[str, int], int]:
        # KIP-320: a fetch names the leader epoch its sender knows (v9+; -1 before): an older one is fenced
        # (a follower must not rejoin the ISR, a consumer must refresh its metadata), a newer one is not known yet
        follower = self.reads_as_follower(replica_id)
        not_led: dict[tuple[str, int], int] = {}
        for (name, _tid, partition, offset, _pmax) in requested:
            plog = self.logs.get(name, partition) if name is not None else None
            if plog is None:
                continue
            try:
                self.cluster.check_leader(name, partition, epochs.get((name, partition), -1))
            except errors.KafkaApiError as e:
                not_led[(name, partition)] = e.code
                continue
            if follower:  # a follower's fetch offset is its log end (the ISR/HW input), its log start the low watermark's
                self.cluster.follower_fetched(name, partition, plog, replica_id, offset,
                                              log_starts.get((name, partition), -1) if log_starts else -1)
        return not_led

    def replication_state(self) -> ReplicationState | None:
        replicas = self.cluster.replicas
        return ReplicationState(replicas.under_replicated(), replicas.isr_shrinks, replicas.isr_expands,
                                replicas.leader_elections)
