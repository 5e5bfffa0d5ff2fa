"""Cluster fixtures: a ZooKeeper, a client of it, and a three-broker cluster (see ``cluster_fixtures``)."""
from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from cluster_fixtures import TXN_STATE_PARTITIONS, require_zookeeper, start_cluster
from tidelake.cluster.zookeeper_server import ZooKeeperServer


@pytest.fixture
def zookeeper(tmp_path):
    require_zookeeper()
    with ZooKeeperServer(tmp_path / "zk") as zk:
        yield zk


@pytest.fixture
def zk_client(zookeeper):
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10)
    client.start(10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def cluster(tmp_path):
    """Three brokers (ids 1-3) and their ZooKeeper; replica.lag.time.max.ms=2000."""
    c = start_cluster(tmp_path / "cluster", 3)
    yield c
    c.stop()


@pytest.fixture
def txn_cluster(tmp_path):
    """Three brokers whose ``__transaction_state`` has TXN_STATE_PARTITIONS partitions; min.insync.replicas=2,
    so a transaction's decision and its markers are on two replicas before they count."""
    c = start_cluster(tmp_path / "c", 3, **{"transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
                                            "min.insync.replicas": "2"})
    yield c
    c.stop()
