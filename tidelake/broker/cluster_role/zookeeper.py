"""One broker of a ZooKeeper cluster: the cluster as the controller last told it (its ``ClusterMember``, which
also answers the controller's requests itself)."""
from __future__ import annotations

import asyncio

from kafka.protocol.consumer import ListOffsetsRequest

from tidelake import errors
from tidelake.broker.cluster_role.protocol import (CoordinatorAnswer, CreatedTopic, MetadataQuorum, PartitionKey,
                                                  PartitionState)
from tidelake.broker.config_validation import validate_topic_configs
from tidelake.broker.config import BrokerConfig
from tidelake.broker.coordinators import INTERNAL_TOPIC_CONFIGS, transaction_state_configs
from tidelake.broker.topics import validate_topic_name
from tidelake.cluster.channel import BrokerChannel, ChannelError
from tidelake.cluster.member import ClusterMember, LiveBroker
from tidelake.coordinator.group_coordinator import GroupCoordinator
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.group_resource_configs import validate_group_configs
from tidelake.coordinator.transactions import TransactionCoordinator
from tidelake.coordinator.txn_metadata import TRANSACTION_VERSION_2
from tidelake.coordinator.txn_log import TRANSACTION_STATE_TOPIC

GROUP_KEY = 0  # FindCoordinator's key type of a group (1: a transactional id)
LIST_OFFSETS_VERSION, LATEST_TIMESTAMP = 7, -1
# a leader asked for its high watermarks (a share group's lag): a dead one refuses at once, a hung one is not waited
# for past an admin request's patience
END_OFFSETS_TIMEOUT_S = 5.0


class ZooKeeperView:
    def __init__(self, member: ClusterMember):
        self._member = member

    async def wait_for_first_metadata(self) -> None:
        # a broker that has not heard from the controller yet would answer "no controller, no other brokers",
        # and librdkafka's admin client then waits out its whole timeout instead of asking again
        await self._member.wait_for_first_metadata()

    def live_brokers(self, listener: str) -> list[LiveBroker]:
        return self._member.live_brokers(listener)

    def controller_id(self) -> int:
        return self._member.controller_id

    def metadata_quorum(self) -> MetadataQuorum:
        # ZooKeeper mode has no Raft quorum: the controller ZooKeeper elected is its one voter and leader, at the
        # controller epoch, the other live brokers its observers; there is no metadata log, so no offsets (-1)
        cache = self._member.cache
        return MetadataQuorum(cache.controller_id, cache.controller_epoch, -1,
                              tuple(b for b in sorted(cache.brokers) if b != cache.controller_id))

    def partition_states(self, topic: str, start: int, end: int) -> list[PartitionState]:
        out = []
        for p in range(start, end):
            pm = self._member.partition(topic, p)
            if pm is None:
                out.append(PartitionState(p, errors.LeaderNotAvailable.code, -1, -1, [], [], []))
            else:
                code = errors.NONE if pm.leader >= 0 else errors.LeaderNotAvailable.code
                out.append(PartitionState(p, code, pm.leader, pm.leader_epoch, pm.replicas, pm.isr, pm.offline))
        return out

    def knows_partition(self, topic: str, partition: int) -> bool:
        return self._member.partition(topic, partition) is not None

    async def high_watermarks(self, partitions: list[PartitionKey]) -> dict[PartitionKey, int]:
        member = self._member
        out: dict[PartitionKey, int] = {}
        by_leader: dict[int, list[PartitionKey]] = {}
        for t, p in partitions:
            pm = member.partition(t, p)
            if pm is None or pm.leader < 0:
                continue
            plog = member.logs.get(t, p)
            if pm.leader == member.broker_id and plog is not None:
                out[(t, p)] = plog.high_watermark
            else:
                by_leader.setdefault(pm.leader, []).append((t, p))
        answers = await asyncio.gather(*(self._list_latest(leader, keys) for leader, keys in by_leader.items()))
        for answer in answers:
            out.update(answer)
        return out

    async def _list_latest(self, leader: int, keys: list[PartitionKey]) -> dict[PartitionKey, int]:
        """ListOffsets (latest, read_uncommitted: the high watermark) at one leader; {} if it does not answer."""
        endpoint = self._member.cache.endpoint(leader, self._member.inter_broker_listener)
        if endpoint is None:
            return {}
        R = ListOffsetsRequest.ListOffsetsTopic
        topics: dict[str, list[int]] = {}
        for t, p in keys:
            topics.setdefault(t, []).append(p)
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[R(name=t, partitions=[
            R.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=LATEST_TIMESTAMP)
            for p in ps]) for t, ps in topics.items()])
        channel = BrokerChannel(leader, endpoint.host, endpoint.port, client_id=f"broker-{self._member.broker_id}",
                                timeout_s=END_OFFSETS_TIMEOUT_S)
        try:
            response = await channel.request(request, LIST_OFFSETS_VERSION)
        except ChannelError:
            return {}
        finally:
            channel.close()
        return {(t.name, p.partition_index): p.offset for t in response.topics for p in t.partitions
                if p.error_code == errors.NONE}


class ZooKeeperCoordination:
    """A group's coordinator is the leader of its ``__consumer_offsets`` partition, a transactional id's the leader
    of its ``__transaction_state`` partition (each created on first use); producer ids come in blocks claimed in
    ZooKeeper."""

    def __init__(self, member: ClusterMember, config: BrokerConfig, groups: GroupCoordinator,
                 transactions: TransactionCoordinator, node_id: int):
        self._member, self._config = member, config
        self._groups, self._transactions, self._node_id = groups, transactions, node_id

    def allocate_producer_id(self) -> int:
        return self._member.allocate_producer_id()

    def check_group_coordinator(self, group_id: str) -> None:
        partition = self._groups.partition_for(group_id)
        try:
            self._member.check_leader(OFFSETS_TOPIC, partition)
        except errors.KafkaApiError:
            raise errors.NotCoordinator(f"broker {self._node_id} is not the coordinator of group {group_id} "
                                        f"({OFFSETS_TOPIC}-{partition})") from None

    def check_transaction_coordinator(self, transactional_id: str) -> None:
        partition = self._transactions.partition_for(transactional_id)
        if partition not in self._transactions.partition_epochs:
            raise errors.NotCoordinator(f"broker {self._node_id} is not the coordinator of transactional id "
                                        f"{transactional_id} ({TRANSACTION_STATE_TOPIC}-{partition})")

    async def find_coordinator(self, key_type: int, key: str, here: LiveBroker, listener: str) -> CoordinatorAnswer:
        # the internal topic: offsets.topic.replication.factor replicas, or transaction.state.log.replication.factor
        # with min.insync.replicas from transaction.state.log.min.isr
        if key_type == GROUP_KEY:
            topic, partitions, configs = OFFSETS_TOPIC, self._groups.config.offsets_partitions, INTERNAL_TOPIC_CONFIGS
            rf = self._config.get_int("offsets.topic.replication.factor")
            partition = self._groups.partition_for(key)
        else:
            topic, partitions = TRANSACTION_STATE_TOPIC, self._transactions.num_partitions
            configs = transaction_state_configs(self._config)
            rf = self._config.get_int("transaction.state.log.replication.factor")
            partition = self._transactions.partition_for(key)
        try:
            leader = await self._member.internal_topic_leader(topic, partitions, rf, configs, partition, listener)
        except errors.KafkaApiError as e:
            return CoordinatorAnswer(key, -1, "", -1, e.code, str(e))
        return CoordinatorAnswer(key, leader.broker_id, leader.host, leader.port, errors.NONE)

    async def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                      group_id: str, add: bool) -> bool:
        self.check_group_coordinator(group_id)
        transactions = self._transactions
        state_partition = transactions.partition_for(transactional_id)
        if state_partition in transactions.partition_epochs:  # this broker coordinates the transaction too
            if add:
                transactions.add_offsets(transactional_id, producer_id, producer_epoch, group_id,
                                         TRANSACTION_VERSION_2)
                return True
            transactions.check_txn_offset_commit(transactional_id, producer_id, producer_epoch, group_id)
            return False
        # another broker coordinates it: asked as a partition leader asks about a transactional Produce (KIP-890)
        try:
            await self._member.txn_verifier.verify(
                TRANSACTION_STATE_TOPIC, state_partition, transactional_id, producer_id, producer_epoch,
                OFFSETS_TOPIC, self._groups.partition_for(group_id), add=add)
        except errors.NotEnoughReplicas as e:  # the transaction's coordinator is moving: the client retries
            raise errors.CoordinatorNotAvailable(str(e)) from None
        self.check_group_coordinator(group_id)  # still, after the wait
        return False


class ZooKeeperTopics:
    """Topics go to ZooKeeper; the controller creates their partitions and every broker follows."""

    def __init__(self, member: ClusterMember, *, tiered_storage: bool, schema_registry: bool):
        self._member = member
        self._tiered_storage = tiered_storage  # whether a topic may set remote.storage.enable
        self._schema_registry = schema_registry  # whether a topic may set confluent.*.schema.validation

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                           assignment: dict[int, list[int]] | None, *, validate_only: bool,
                           timeout_ms: int) -> CreatedTopic:
        if assignment is not None and (sorted(assignment) != list(range(len(assignment)))
                                       or len({len(r) for r in assignment.values()}) != 1):
            raise errors.InvalidReplicaAssignment("partitions must be 0..n-1, each with as many replicas")
        validate_topic_name(name)
        overrides = validate_topic_configs(configs, tiered_storage=self._tiered_storage,
                                           schema_registry=self._schema_registry)
        topic = await self._member.create_topic(name, partitions, replication_factor, overrides,
                                                assignment=assignment, validate_only=validate_only,
                                                wait_s=max(0.0, timeout_ms / 1000))
        return CreatedTopic(topic.topic_id, topic.partitions, topic.replication_factor, topic.configs)

    async def auto_create_topic(self, name: str) -> tuple[None, int]:
        # Kafka's answer: the topic is being created, its leaders are not known yet
        try:
            validate_topic_name(name)
            await self._member.create_topic(name, -1, -1, {}, wait_s=0)
        except errors.TopicAlreadyExists:
            pass
        except errors.KafkaApiError as e:
            return None, e.code
        return None, errors.LeaderNotAvailable.code

    async def delete_topic(self, name: str) -> None:
        await self._member.delete_topic(name)

    async def add_partitions(self, name: str, count: int, assignment: list[list[int]] | None, *,
                             validate_only: bool, timeout_ms: int) -> None:
        await self._member.add_partitions(name, count, assignment, validate_only=validate_only,
                                          wait_s=max(0.0, timeout_ms / 1000))

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool) -> None:
        normalised = validate_topic_configs(configs, tiered_storage=self._tiered_storage,
                                            schema_registry=self._schema_registry,
                                            previous=self._member.topics.configs(name) or {})
        if not validate_only:
            await self._member.alter_topic_config(name, normalised)


class ZooKeeperGroupConfigs:
    """A group's configs in ZooKeeper (``/config/groups``), which every broker's ``ClusterMember`` applies to its
    group coordinators, share-group and KIP-848 (at once here, on the change notification elsewhere, all of them as
    a broker joins). ``groups``: this broker's group settings, whose ``group.consumer.min/max.*`` bound the values."""

    def __init__(self, member: ClusterMember, groups: GroupConfig):
        self._member, self._groups = member, groups

    async def alter_group_configs(self, group_id: str, configs: dict[str, str], *, validate_only: bool) -> None:
        validate_group_configs(configs, self._groups)
        if not validate_only:
            await self._member.alter_group_config(group_id, configs)
