"""Replication metrics on a real three-broker cluster, scraped as Prometheus would: under-replicated
partitions, ISR shrinks and expansions, leader elections move with a follower stopped (SIGSTOP) and resumed."""
from __future__ import annotations

import json
import signal

from kazoo.client import KazooClient

from cluster_fixtures import create_topic, produce, start_cluster, wait_until
from metrics_scrape import scrape, value


def test_replication_metrics_follow_a_stopped_follower(tmp_path):
    cluster = start_cluster(tmp_path, metrics=True)
    zk = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    try:
        zk.start(10)
        create_topic(cluster, "watched", 1, 3, **{"min.insync.replicas": "2"})

        def state() -> dict:
            return json.loads(zk.get("/brokers/topics/watched/partitions/0/state")[0])
        leader = wait_until("a leader in the full ISR", lambda: len(state()["isr"]) == 3 and state()["leader"])
        url = cluster.brokers[leader].metrics_url
        before = scrape(url)
        assert value(before, "tidelake_under_replicated_partitions") == 0
        assert value(before, "tidelake_leader_elections_total") >= 1
        shrinks = value(before, "tidelake_isr_shrinks_total")
        follower = next(b for b in state()["isr"] if b != leader)
        cluster.signal_broker(follower, signal.SIGSTOP)
        try:
            produce(cluster, "watched", 20)
            wait_until("the stopped follower to leave the ISR", lambda: follower not in state()["isr"], 30)
            during = wait_until("the leader to count it", lambda: (
                s := scrape(url), value(s, "tidelake_isr_shrinks_total") > shrinks and s)[1])
            assert value(during, "tidelake_under_replicated_partitions") == 1
        finally:
            cluster.signal_broker(follower, signal.SIGCONT)
        wait_until("the follower back in the ISR", lambda: sorted(state()["isr"]) == [1, 2, 3], 60)
        after = wait_until("the leader to count the expansion", lambda: (
            s := scrape(url), value(s, "tidelake_isr_expands_total") >= 1 and s)[1])
        assert value(after, "tidelake_under_replicated_partitions") == 0
    finally:
        zk.stop()
        zk.close()
        cluster.stop()
