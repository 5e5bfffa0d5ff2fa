"""Transactions v2 (KIP-890 part 2) in a 3-broker cluster: a v2 producer (raw requests) whose Produce reaches
partition leaders other than its coordinator (they add the partition with AddPartitionsToTxn v5), whose
TxnOffsetCommit v5 reaches another broker's group coordinator, whose EndTxn v5 bumps the epoch the
markers carry to the other brokers; the previous epoch is fenced there."""
from __future__ import annotations

from contextlib import ExitStack

from confluent_kafka import Consumer, TopicPartition

from cluster_fixtures import create_topic, find_coordinator, metadata
from txn_helpers import read_all
from txn_v2_producer import RawTxnProducerV2
from tidelake.protocol.wire_client import WireClient

INVALID_PRODUCER_EPOCH = 47


def test_v2_transactions_across_brokers(txn_cluster):
    c = txn_cluster
    create_topic(c, "v2c", 3, 3)
    (t,) = metadata(next(iter(c.brokers.values())), ["v2c"]).topics
    leaders = {p.partition_index: p.leader_id for p in t.partitions}
    coordinator = find_coordinator(c, 1, "v2-cluster")
    group = next(g for g in (f"v2-group-{i}" for i in range(100)) if find_coordinator(c, 0, g) != coordinator)
    group_coordinator = find_coordinator(c, 0, group)
    with ExitStack() as stack:
        clients = {bid: stack.enter_context(WireClient("127.0.0.1", b.port)) for bid, b in c.brokers.items()}
        p = RawTxnProducerV2(clients[coordinator], "v2-cluster")
        p.init()
        pid, epoch = p.producer_id, p.producer_epoch
        for part in range(3):  # no AddPartitionsToTxn: each leader adds its partition
            assert p.produce("v2c", part, [f"c{part}"], via=clients[leaders[part]]) == 0
        assert p.commit_offset(group, "v2c", 0, 7, via=clients[group_coordinator]) == 0
        assert p.end(commit=True) == 0
        assert (p.producer_id, p.producer_epoch) == (pid, epoch + 1)

        for part in range(3):
            assert p.produce("v2c", part, [f"a{part}"], via=clients[leaders[part]]) == 0
        assert p.end(commit=False) == 0
        assert p.producer_epoch == epoch + 2

        remote = next(part for part in range(3) if leaders[part] != coordinator)
        zombie = RawTxnProducerV2(clients[coordinator], "v2-cluster", producer_id=pid, producer_epoch=epoch)
        assert zombie.produce("v2c", remote, ["zombie"], via=clients[leaders[remote]]) == INVALID_PRODUCER_EPOCH

        assert p.produce("v2c", remote, ["c3"], via=clients[leaders[remote]]) == 0
        assert p.end(commit=True) == 0
    assert read_all(c.bootstrap_servers, "v2c", 3, "read_committed", timeout=60) == ["c0", "c1", "c2", "c3"]
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": group})
    try:
        assert consumer.committed([TopicPartition("v2c", 0)], timeout=20)[0].offset == 7
    finally:
        consumer.close()
