"""``ClusterStore`` against a real ZooKeeper: version-checked partition states, controller-epoch
fencing, ephemeral registrations, unique producer-id blocks."""
from __future__ import annotations

import uuid

import pytest

from tidelake.cluster.znodes import BrokerEndpoint, BrokerRegistration, PartitionState, TopicAssignment
from tidelake.cluster.zk_store import ClusterStore, StaleWrite, ZooKeeperUnavailable
from tidelake.cluster.zookeeper_server import free_port
from tidelake.errors import TopicAlreadyExists


@pytest.fixture
def store(zookeeper):
    s = ClusterStore(zookeeper.connect_string, session_timeout_ms=4000)
    s.start()
    yield s
    s.stop()


def test_registration_is_ephemeral_and_one_per_id(zookeeper, store):
    reg = BrokerRegistration(1, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1234, "PLAINTEXT"),))
    epoch = store.register_broker(reg, wait_s=0)
    assert epoch == store.zk.exists("/brokers/ids/1").czxid  # KIP-380's broker epoch
    assert store.live_broker_ids() == [1] and store.broker(1) == BrokerRegistration(1, reg.endpoints, epoch=epoch)
    other = ClusterStore(zookeeper.connect_string, session_timeout_ms=4000)
    other.start()
    try:
        with pytest.raises(Exception, match="broker.id 1 is already registered"):
            other.register_broker(reg, wait_s=0.3)
    finally:
        other.stop()
    store.stop()
    again = ClusterStore(zookeeper.connect_string, session_timeout_ms=4000)
    again.start()
    try:
        assert again.live_broker_ids() == []  # the session ended: the registration went with it
    finally:
        again.stop()
    store.start()  # the fixture stops it


def test_only_one_controller_and_epochs_increase(zookeeper, store):
    other = ClusterStore(zookeeper.connect_string, session_timeout_ms=4000)
    other.start()
    try:
        assert store.try_elect(1) and not other.try_elect(2)
        assert other.controller_id() == 1
        e1, _ = store.increment_controller_epoch()
        e2, _ = other.increment_controller_epoch()
        assert e2 == e1 + 1 == store.controller_epoch()
    finally:
        other.stop()


def test_partition_state_writes_are_version_checked_and_fenced_by_controller_epoch(store):
    store.create_topic(TopicAssignment("t", uuid.uuid4(), {0: [1, 2]}), {"min.insync.replicas": "2"})
    with pytest.raises(TopicAlreadyExists):
        store.create_topic(TopicAssignment("t", uuid.uuid4(), {0: [1]}), {})
    assert store.topic_config("t") == {"min.insync.replicas": "2"}
    epoch, epoch_version = store.increment_controller_epoch()
    st = store.create_partition_state("t", 0, PartitionState(1, 0, [1, 2], epoch), epoch_version)
    # a leader's ISR change at the version it knows
    shrunk = store.update_partition_state("t", 0, PartitionState(1, 0, [1], epoch), st.zk_version)
    assert store.partition_state("t", 0).isr == [1]
    with pytest.raises(StaleWrite):  # an older version loses
        store.update_partition_state("t", 0, PartitionState(1, 0, [1, 2], epoch), st.zk_version)
    # a newer controller bumps the epoch: the old one's writes are refused even at the right version
    store.increment_controller_epoch()
    with pytest.raises(StaleWrite):
        store.update_partition_state("t", 0, PartitionState(2, 1, [2], epoch), shrunk.zk_version, epoch_version)
    assert store.partition_state("t", 0).leader == 1


def test_producer_id_blocks_never_overlap(zookeeper, store):
    other = ClusterStore(zookeeper.connect_string, session_timeout_ms=4000)
    other.start()
    try:
        blocks = [store.allocate_producer_id_block(1, 10), other.allocate_producer_id_block(2, 10),
                  store.allocate_producer_id_block(1, 10)]
    finally:
        other.stop()
    ids = [i for b in blocks for i in range(b.block_start, b.block_end + 1)]
    assert len(ids) == len(set(ids)) == 30


def test_unreachable_zookeeper_is_one_clear_error():
    s = ClusterStore(f"127.0.0.1:{free_port()}", connection_timeout_ms=500)
    with pytest.raises(ZooKeeperUnavailable, match=r"cannot connect to ZooKeeper at 127\.0\.0\.1:\d+"):
        s.start()


def test_group_configs_are_kept_beside_topic_configs_and_every_change_is_notified(store):
    before = set(store.zk.get_children("/config/changes"))
    store.change_group_config("team/a", {"share.auto.offset.reset": "earliest"})
    assert store.zk.exists("/config/groups/team%2Fa") is not None  # any group id makes one znode name
    assert store.group_configs()["team/a"] == {"share.auto.offset.reset": "earliest"}
    store.change_group_config("team/a", {})  # none left: the znode goes
    assert store.group_config("team/a") == {} and "team/a" not in store.group_configs()
    notified = sorted(set(store.zk.get_children("/config/changes")) - before)
    assert [store.config_change_entity(c) for c in notified] == ["groups/team%2Fa"] * 2
