"""``ClusterStore``: the cluster's metadata in ZooKeeper (Kafka's ZooKeeper-mode layout, see
``znodes.py``), through kazoo. Every method is blocking (a round trip to ZooKeeper); the broker calls
them off its event loop (``asyncio.to_thread``). Watches fire on kazoo's thread.

Writes that decide who leads are conditional: a partition state is written only at the znode
version the writer read (``BadVersion`` otherwise), and the controller's writes also check the
``/controller_epoch`` version it set when it was elected, so a deposed controller's writes fail.
"""
from __future__ import annotations

import logging
import time
import uuid
from typing import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError

from tidelake.cluster import znodes
from tidelake.cluster.znodes import (BrokerRegistration, PartitionState, ProducerIdBlock, TopicAssignment)
from tidelake.errors import TopicAlreadyExists, UnknownTopicOrPartition

log = logging.getLogger("tidelake.cluster.zk")


class ZooKeeperUnavailable(Exception):
    """ZooKeeper could not be reached (the message names the address)."""


class StaleWrite(Exception):
    """A conditional write lost: the znode (or /controller_epoch) changed since it was read."""


class ClusterStore:
    def __init__(self, connect: str, *, session_timeout_ms: int = 18000, connection_timeout_ms: int = 18000):
        # zookeeper.connect may carry a chroot ("host:port/kafka"): kazoo takes it as is
        self.connect_string = connect
        self.zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self._connection_timeout_s = connection_timeout_ms / 1000
        self._session_renewed: Callable[[], None] | None = None  # see on_session_renewed
        self._lost = False
        self._closing = False

    # -- session -------------------------------------------------------------------------------------
    def start(self) -> None:
        self._closing = False
        try:
            self.zk.start(timeout=self._connection_timeout_s)
        except KazooTimeoutError:
            self.zk.stop()
            self.zk.close()
            raise ZooKeeperUnavailable(f"cannot connect to ZooKeeper at {self.connect_string} "
                                       f"within {self._connection_timeout_s:g} s (zookeeper.connect)") from None
        self.zk.add_listener(self._on_state)
        for path in znodes.PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    def _on_state(self, state: str) -> None:
        if self._closing:
            return
        if state == KazooState.LOST:
            self._lost = True
            log.warning("ZooKeeper session lost")
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            log.warning("new ZooKeeper session after the last one expired")
            if self._session_renewed is not None:
                self._session_renewed()

    def on_session_renewed(self, callback: Callable[[], None]) -> None:
        """``callback()`` (kazoo's thread) whenever a new session begins after the last one expired: its ephemeral
        znodes and watches are gone. One callback; a later registration replaces it."""
        self._session_renewed = callback

    def stop(self) -> None:
        self._closing = True  # a deliberate close is not a loss
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    # -- cluster id ----------------------------------------------------------------------------------
    def cluster_id(self, proposed: str) -> str:
        """The cluster's id, created with ``proposed`` by the first broker."""
        try:
            self.zk.create(znodes.CLUSTER_ID, znodes.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            return znodes.decode_cluster_id(self.zk.get(znodes.CLUSTER_ID)[0])

    # -- brokers -------------------------------------------------------------------------------------
    def register_broker(self, registration: BrokerRegistration, wait_s: float) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral); returns its czxid, the broker epoch. A node left by this
        broker's previous, not yet expired session is waited out for up to ``wait_s``; another live broker with
        the id is an error."""
        path = znodes.broker_path(registration.broker_id)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                _path, stat = self.zk.create(path, registration.encode(), ephemeral=True, include_data=True)
                return stat.czxid
            except NodeExistsError:
                if time.monotonic() >= deadline:
                    raise NodeExistsError(f"broker.id {registration.broker_id} is already registered in "
                                          f"ZooKeeper ({path}): another broker uses this id") from None
                time.sleep(0.2)

    def live_broker_ids(self, watch: Callable | None = None) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children(znodes.BROKER_IDS, watch=watch))

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        """The registration with its epoch (the znode's czxid), None if the broker is not registered."""
        try:
            data, stat = self.zk.get(znodes.broker_path(broker_id))
        except NoNodeError:
            return None
        return BrokerRegistration.decode(broker_id, data, stat.czxid)

    # -- controller ----------------------------------------------------------------------------------
    def try_elect(self, broker_id: int) -> bool:
        try:
            self.zk.create(znodes.CONTROLLER, znodes.encode_controller(broker_id), ephemeral=True)
            return True
        except NodeExistsError:
            return False

    def controller_id(self, watch: Callable | None = None) -> int:
        """The current controller's id, -1 if none (``watch`` fires on the next change either way)."""
        if watch is not None:
            stat = self.zk.exists(znodes.CONTROLLER, watch=watch)
            if stat is None:
                return -1
        try:
            return znodes.decode_controller(self.zk.get(znodes.CONTROLLER)[0])
        except NoNodeError:
            return -1

    def increment_controller_epoch(self) -> tuple[int, int]:
        """(new epoch, its znode version): a version-checked increment, retried on a race."""
        while True:
            try:
                data, stat = self.zk.get(znodes.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.zk.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(1))
                    return 1, 0
                except NodeExistsError:
                    continue
            epoch = znodes.decode_controller_epoch(data) + 1
            try:
                stat = self.zk.set(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch), version=stat.version)
                return epoch, stat.version
            except BadVersionError:
                continue

    def controller_epoch(self) -> int:
        try:
            return znodes.decode_controller_epoch(self.zk.get(znodes.CONTROLLER_EPOCH)[0])
        except NoNodeError:
            return 0

    # -- topics --------------------------------------------------------------------------------------
    def topic_names(self, watch: Callable | None = None) -> list[str]:
        return sorted(self.zk.get_children(znodes.TOPICS, watch=watch))

    def topic_assignment(self, topic: str, watch: Callable | None = None) -> TopicAssignment | None:
        """``watch`` fires once on the next change of the assignment (partitions added, topic deleted)."""
        try:
            return TopicAssignment.decode(topic, self.zk.get(znodes.topic_path(topic), watch=watch)[0])
        except NoNodeError:
            return None

    def topic_config(self, topic: str) -> dict[str, str]:
        try:
            return znodes.decode_entity_config(self.zk.get(znodes.topic_config_path(topic))[0])
        except NoNodeError:
            return {}

    def set_topic_config(self, topic: str, config: dict[str, str]) -> None:
        path = znodes.topic_config_path(topic)
        try:
            self.zk.set(path, znodes.encode_entity_config(config))
        except NoNodeError:
            try:
                self.zk.create(path, znodes.encode_entity_config(config), makepath=True)
            except NodeExistsError:  # another broker created the same topic at the same moment
                self.zk.set(path, znodes.encode_entity_config(config))

    def change_topic_config(self, topic: str, config: dict[str, str]) -> None:
        """Replace a topic's config and tell every broker (Kafka's config change notification)."""
        if self.zk.exists(znodes.topic_path(topic)) is None:
            raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist")
        self.set_topic_config(topic, config)
        self.zk.create(znodes.CONFIG_CHANGE_PREFIX, znodes.encode_config_change(f"{znodes.TOPIC_CONFIG_ENTITY}{topic}"),
                       sequence=True, makepath=True)

    # -- group configs -------------------------------------------------------------------------------
    def group_config(self, group_id: str) -> dict[str, str]:
        try:
            return znodes.decode_entity_config(self.zk.get(znodes.group_config_path(group_id))[0])
        except NoNodeError:
            return {}

    def group_configs(self) -> dict[str, dict[str, str]]:
        """Every group's configs (groups without any are not listed)."""
        out = {}
        for name in self.zk.get_children(znodes.CONFIG_GROUPS):
            config = self.group_config(znodes.group_id_of(name))
            if config:
                out[znodes.group_id_of(name)] = config
        return out

    def change_group_config(self, group_id: str, config: dict[str, str]) -> None:
        """Replace a group's configs (none: its znode removed) and tell every broker."""
        path = znodes.group_config_path(group_id)
        if config:
            try:
                self.zk.set(path, znodes.encode_entity_config(config))
            except NoNodeError:
                try:
                    self.zk.create(path, znodes.encode_entity_config(config), makepath=True)
                except NodeExistsError:  # another broker created it at the same moment
                    self.zk.set(path, znodes.encode_entity_config(config))
        else:
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass
        self.zk.create(znodes.CONFIG_CHANGE_PREFIX, znodes.encode_config_change(
            znodes.GROUP_CONFIG_ENTITY + znodes.group_config_name(group_id)), sequence=True, makepath=True)

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> None:
        """``callback(children)`` (kazoo's thread) now and at every change of /config/changes."""
        self.zk.ChildrenWatch(znodes.CONFIG_CHANGES, callback)

    def config_change_entity(self, child: str) -> str | None:
        try:
            return znodes.decode_config_change(self.zk.get(f"{znodes.CONFIG_CHANGES}/{child}")[0])
        except (NoNodeError, ValueError, KeyError):
            return None

    def create_topic(self, assignment: TopicAssignment, config: dict[str, str]) -> None:
        """Write the topic's config then its assignment (the controller acts on the latter), as Kafka's
        ``AdminZkClient.createTopicWithAssignment``. Raises TopicAlreadyExists."""
        if self.zk.exists(znodes.topic_path(assignment.topic)) is not None:
            raise TopicAlreadyExists(f"Topic '{assignment.topic}' already exists.")
        self.set_topic_config(assignment.topic, config)
        try:
            self.zk.create(znodes.topic_path(assignment.topic), assignment.encode(), makepath=True)
        except NodeExistsError:
            raise TopicAlreadyExists(f"Topic '{assignment.topic}' already exists.") from None

    def set_topic_assignment(self, assignment: TopicAssignment) -> None:
        self.zk.set(znodes.topic_path(assignment.topic), assignment.encode())

    def request_topic_deletion(self, topic: str) -> None:
        if self.zk.exists(znodes.topic_path(topic)) is None:
            raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist")
        try:
            self.zk.create(znodes.delete_topic_path(topic), b"", makepath=True)
        except NodeExistsError:
            pass

    def topics_to_delete(self, watch: Callable | None = None) -> list[str]:
        return sorted(self.zk.get_children(znodes.DELETE_TOPICS, watch=watch))

    def delete_topic_nodes(self, topic: str) -> None:
        """The controller's last step of a deletion: assignment, states, config, then the request."""
        for path in (znodes.topic_path(topic), znodes.topic_config_path(topic), znodes.delete_topic_path(topic)):
            try:
                self.zk.delete(path, recursive=True)
            except (NoNodeError, NotEmptyError):
                pass

    # -- partition states ----------------------------------------------------------------------------
    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        try:
            data, stat = self.zk.get(znodes.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return PartitionState.decode(data, stat.version)

    def create_partition_state(self, topic: str, partition: int, state: PartitionState,
                               controller_epoch_version: int) -> PartitionState:
        """Create the state znode (and its parents) if /controller_epoch is still at our version."""
        path = znodes.partition_state_path(topic, partition)
        self.zk.ensure_path(path.rsplit("/", 1)[0])
        tx = self.zk.transaction()
        tx.check(znodes.CONTROLLER_EPOCH, controller_epoch_version)
        tx.create(path, state.encode())
        self._commit(tx, path)
        return PartitionState(state.leader, state.leader_epoch, list(state.isr), state.controller_epoch, 0)

    def update_partition_state(self, topic: str, partition: int, state: PartitionState, expected_version: int,
                               controller_epoch_version: int | None = None) -> PartitionState:
        """Write ``state`` if the znode is still at ``expected_version`` (and, for the controller,
        /controller_epoch at ``controller_epoch_version``); returns it with its new version. Raises StaleWrite."""
        path = znodes.partition_state_path(topic, partition)
        if controller_epoch_version is None:
            try:
                stat = self.zk.set(path, state.encode(), version=expected_version)
            except (BadVersionError, NoNodeError):
                raise StaleWrite(f"{path} changed since version {expected_version}") from None
            new_version = stat.version
        else:
            tx = self.zk.transaction()
            tx.check(znodes.CONTROLLER_EPOCH, controller_epoch_version)
            tx.set_data(path, state.encode(), version=expected_version)
            results = self._commit(tx, path)
            new_version = results[1].version
        return PartitionState(state.leader, state.leader_epoch, list(state.isr), state.controller_epoch, new_version)

    @staticmethod
    def _commit(tx, path: str) -> list:
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            raise StaleWrite(f"{path}: conditional write refused ({', '.join(type(r).__name__ for r in results)})")
        return results

    # -- ISR change notifications (leader -> controller) ---------------------------------------------
    def notify_isr_change(self, partitions: list[tuple[str, int]]) -> None:
        self.zk.create(znodes.ISR_CHANGE_PREFIX, znodes.encode_isr_change(partitions), sequence=True)

    def take_isr_changes(self, watch: Callable | None = None) -> list[tuple[str, int]]:
        """Every partition named by a pending notification; the notifications are deleted."""
        out: list[tuple[str, int]] = []
        for child in sorted(self.zk.get_children(znodes.ISR_CHANGES, watch=watch)):
            path = f"{znodes.ISR_CHANGES}/{child}"
            try:
                out.extend(znodes.decode_isr_change(self.zk.get(path)[0]))
                self.zk.delete(path)
            except NoNodeError:
                pass
        return out

    # -- reassignments written to ZooKeeper (/admin/reassign_partitions) ---------------------------------
    def zk_reassignment(self, watch: Callable | None = None) -> dict[tuple[str, int], list[int]] | None:
        """The pending reassignments of ``/admin/reassign_partitions`` (None: no such znode; ``watch`` fires when
        it is created, changed or deleted). A znode that is not valid JSON counts as empty."""
        if self.zk.exists(znodes.REASSIGN_PARTITIONS, watch=watch) is None:
            return None
        try:
            return znodes.decode_reassignment(self.zk.get(znodes.REASSIGN_PARTITIONS)[0])
        except NoNodeError:
            return None
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("%s is not kafka-reassign-partitions JSON: ignored", znodes.REASSIGN_PARTITIONS)
            return {}

    def set_zk_reassignment(self, moves: dict[tuple[str, int], list[int]], controller_epoch_version: int) -> None:
        """Rewrite ``/admin/reassign_partitions`` with ``moves`` (deleted when empty), if /controller_epoch is still
        at the controller's version."""
        tx = self.zk.transaction()
        tx.check(znodes.CONTROLLER_EPOCH, controller_epoch_version)
        if moves:
            tx.set_data(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment(moves))
        else:
            tx.delete(znodes.REASSIGN_PARTITIONS)
        self._commit(tx, znodes.REASSIGN_PARTITIONS)

    # -- producer ids --------------------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        """The next block of producer ids, unique in the cluster (version-checked, retried on a race)."""
        self.zk.ensure_path(znodes.PRODUCER_ID_BLOCK)
        while True:
            data, stat = self.zk.get(znodes.PRODUCER_ID_BLOCK)
            start = ProducerIdBlock.decode(data).block_end + 1 if data else 0
            block = ProducerIdBlock(broker_id, start, start + size - 1)
            try:
                self.zk.set(znodes.PRODUCER_ID_BLOCK, block.encode(), version=stat.version)
                return block
            except BadVersionError:
                continue


def new_topic_id() -> uuid.UUID:
    return uuid.uuid4()
