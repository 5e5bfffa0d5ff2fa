"""Transactions v2 across the kill -9 of the transaction coordinator's broker: the committed v2 transaction
stays committed, the next coordinator serves the bumped epoch (a retried EndTxn v5 is recognised by it), the
producer goes on without InitProducerId, the previous epoch stays fenced at the partitions' leaders, and a
read_committed consumer sees exactly the committed records. Slow (the dead broker's session must expire):
marker slow_faults."""
from __future__ import annotations

import time

import pytest

from cluster_fixtures import create_topic, find_coordinator, metadata, start_cluster
from txn_helpers import read_all
from txn_v2_producer import RawTxnProducerV2
from tidelake.protocol.wire_client import WireClient

pytestmark = pytest.mark.slow_faults

TXN_ID = "v2-failover"
INVALID_PRODUCER_EPOCH = 47
# answers that mean "ask again, maybe elsewhere": the leader or coordinator moved, or is loading
RETRIABLE = {6, 7, 14, 15, 16, 19, 20, 51}  # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, COORDINATOR_*, NOT_ENOUGH_*
ATTEMPTS = 300
BACKOFF_S = 0.2


class Brokers:
    """Connections to the live brokers of the cluster, reopened as leadership moves."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.clients: dict[int, WireClient] = {}

    def client(self, broker_id: int) -> WireClient:
        if broker_id not in self.clients:
            self.clients[broker_id] = WireClient("127.0.0.1", self.cluster.brokers[broker_id].port)
        return self.clients[broker_id]

    def drop(self, broker_id: int) -> None:
        c = self.clients.pop(broker_id, None)
        if c is not None:
            c.close()

    def leader(self, topic: str, partition: int) -> int:
        live = next(b for b in self.cluster.brokers.values() if b.alive())
        (t,) = metadata(live, [topic]).topics
        return next(p.leader_id for p in t.partitions if p.partition_index == partition)

    def close(self) -> None:
        for broker_id in list(self.clients):
            self.drop(broker_id)


def _until_answered(what: str, send) -> int:
    """``send()``'s error code once it is not a retriable one (a broken connection is retried too)."""
    for _ in range(ATTEMPTS):
        try:
            code = send()
        except (OSError, ConnectionError):
            code = None
        if code is not None and code not in RETRIABLE:
            return code
        time.sleep(BACKOFF_S)
    raise AssertionError(f"{what}: still retriable after {ATTEMPTS} attempts")


@pytest.fixture
def cluster(tmp_path):
    c = start_cluster(tmp_path / "c", 3, **{"transaction.state.log.num.partitions": "1", "min.insync.replicas": "2"})
    yield c
    c.stop()


def test_v2_transactions_survive_the_kill_of_their_coordinator(cluster):
    c = cluster
    create_topic(c, "v2f", 3, 3)
    brokers = Brokers(c)
    try:
        coordinator = find_coordinator(c, 1, TXN_ID)
        p = RawTxnProducerV2(brokers.client(coordinator), TXN_ID)
        p.init()
        pid, epoch = p.producer_id, p.producer_epoch

        def produce(producer: RawTxnProducerV2, partition: int, value: str) -> int:
            def send():
                leader = brokers.leader("v2f", partition)
                try:
                    return producer.produce("v2f", partition, [value], via=brokers.client(leader))
                except (OSError, ConnectionError):
                    brokers.drop(leader)
                    raise
            return _until_answered(f"produce {value}", send)

        def end(commit: bool) -> int:
            def send():
                p.client = brokers.client(find_coordinator(c, 1, TXN_ID))
                return p.end(commit)
            return _until_answered("EndTxn", send)

        for part in range(3):
            assert produce(p, part, f"c{part}") == 0
        assert end(commit=True) == 0 and p.producer_epoch == epoch + 1

        c.kill_broker(coordinator)
        brokers.drop(coordinator)
        for part in range(3):  # the next transaction, at the epoch the dead coordinator handed out
            assert produce(p, part, f"d{part}") == 0
        assert end(commit=True) == 0 and (p.producer_id, p.producer_epoch) == (pid, epoch + 2)
        assert find_coordinator(c, 1, TXN_ID) != coordinator

        zombie = RawTxnProducerV2(p.client, TXN_ID, producer_id=pid, producer_epoch=epoch)
        assert produce(zombie, 0, "zombie") == INVALID_PRODUCER_EPOCH
    finally:
        brokers.close()
    assert read_all(c.bootstrap_servers, "v2f", 3, "read_committed", timeout=60) == ["c0", "c1", "c2",
                                                                                      "d0", "d1", "d2"]
