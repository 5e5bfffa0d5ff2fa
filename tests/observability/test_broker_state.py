"""The broker's metrics read a typed ``BrokerStateSnapshot``: the broker builds it (``Broker.state_snapshot``)
from its real state, and the collector reports exactly what a snapshot says."""
from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tidelake.broker import EmbeddedBroker
from tidelake.observability.broker_collector import BrokerCollector
from tidelake.observability.broker_state import (BrokerStateSnapshot, GroupLag, PartitionLogState,
                                                 ReplicationState, TransactionCounts)
from tidelake.observability.broker_stats import BrokerStats


def test_the_broker_builds_a_snapshot_of_its_state(tmp_path):
    with EmbeddedBroker(tmp_path, config={"num.partitions": "2"}) as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(5):
            p.produce("snap", value=b"v%d" % i, partition=0)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g", "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("snap", 0, 3)], asynchronous=False)
        c.close()
        snapshot = b.run(b.broker.state_snapshot)
    assert isinstance(snapshot, BrokerStateSnapshot)
    assert [(log.topic, log.partition, log.log_start_offset, log.high_watermark) for log in snapshot.logs
            if log.topic == "snap"] == [("snap", 0, 0, 5), ("snap", 1, 0, 0)]
    assert snapshot.partitions_per_topic()["snap"] == 2
    assert GroupLag("g", "snap", 0, committed_offset=3, lag=2) in snapshot.group_lag
    assert snapshot.transactions == TransactionCounts()
    assert snapshot.replication is None  # one broker replicates nothing


def _scraped(snapshot: BrokerStateSnapshot) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry()
    registry.register(BrokerCollector(BrokerStats(), lambda: snapshot, {}))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_collector_reports_what_the_snapshot_says():
    snapshot = BrokerStateSnapshot(
        connections=3, logs=(PartitionLogState("t", 0, 1024, 2, 10, 40),),
        group_lag=(GroupLag("g", "t", 0, 35, 5),), group_members={"g": 2}, rebalances={"g": 4},
        transactions=TransactionCounts(begun=7, committed=5, aborted=1, timed_out=1, ongoing=1),
        replication=ReplicationState(under_replicated=1, isr_shrinks=2, isr_expands=3, leader_elections=4))
    got = _scraped(snapshot)
    tp = (("partition", "0"), ("topic", "t"))
    gtp = (("group", "g"), ("partition", "0"), ("topic", "t"))
    assert got[("tidelake_connections_active", ())] == 3
    assert got[("tidelake_topic_partitions", (("topic", "t"),))] == 1
    assert [got[(n, tp)] for n in ("tidelake_log_size_bytes", "tidelake_log_segments", "tidelake_log_start_offset",
                                   "tidelake_log_end_offset")] == [1024, 2, 10, 40]
    assert (got[("tidelake_group_committed_offset", gtp)], got[("tidelake_group_lag", gtp)]) == (35, 5)
    assert got[("tidelake_group_members", (("group", "g"),))] == 2
    assert got[("tidelake_group_rebalances_total", (("group", "g"),))] == 4
    assert [got[(f"tidelake_transactions_{w}_total", ())] for w in ("begun", "committed", "aborted", "timed_out")] \
        == [7, 5, 1, 1]
    assert got[("tidelake_transactions_ongoing", ())] == 1
    assert [got[(n, ())] for n in ("tidelake_under_replicated_partitions", "tidelake_isr_shrinks_total",
                                   "tidelake_isr_expands_total", "tidelake_leader_elections_total")] == [1, 2, 3, 4]


def test_a_single_broker_snapshot_reports_no_replication():
    got = _scraped(BrokerStateSnapshot(connections=0))
    assert not any(name == "tidelake_under_replicated_partitions" for name, _ in got)
