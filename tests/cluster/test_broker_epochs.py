"""KIP-380's broker epoch: a broker that restarts between the controller's /brokers/ids watch and its re-read
of the children (same ids, a new znode) is still seen as restarted and given its partitions again."""
from __future__ import annotations

import signal

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_fixtures import metadata, start_cluster, wait_until, zookeeper_client

SESSION_TIMEOUT_MS = 20000
PARTITIONS = 3


def _acked_write_on_every_partition(cluster, topic: str) -> bool:
    acked: set[int] = set()
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "message.timeout.ms": 3000,
                  "enable.idempotence": True})
    for partition in range(PARTITIONS):
        p.produce(topic, value=b"after the bounce", partition=partition,
                  on_delivery=lambda err, m: acked.add(m.partition()) if err is None else None)
    p.flush(10)
    return len(acked) == PARTITIONS


def test_a_leader_restarted_inside_the_controllers_watch_window_leads_or_follows_again(tmp_path):
    # a clean stop (no controlled shutdown: the controller is paused) closes the broker's session, so its znode
    # goes at once and the restarted process registers without waiting out the old session
    cluster = start_cluster(tmp_path / "c", 3, **{"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                                  "controlled.shutdown.enable": "false"})
    try:
        controller = metadata(cluster.brokers[1]).controller_id
        leader = min(b for b in cluster.brokers if b != controller)
        others = [b for b in cluster.brokers if b != leader]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic("bounced", num_partitions=PARTITIONS, replica_assignment=[[leader, *others]] * PARTITIONS)
        admin.create_topics([topic], request_timeout=20)["bounced"].result(30)
        wait_until("an acknowledged write on every partition before the bounce",
                   lambda: _acked_write_on_every_partition(cluster, "bounced"), 60)
        before = {p.partition_index: p.leader_epoch for p in metadata(cluster.brokers[controller], ["bounced"])
                  .topics[0].partitions}
        with zookeeper_client(cluster) as zk:
            path = f"/brokers/ids/{leader}"
            old_epoch = zk.exists(path).czxid
            # the window, made deterministic: the controller sees the deletion and the new registration only once
            # both have happened, and reads the same ids as before
            cluster.signal_broker(controller, signal.SIGSTOP)
            try:
                cluster.stop_broker(leader)
                cluster.start_broker(leader, wait=False)
                wait_until("the restarted leader's new registration",
                           lambda: (stat := zk.exists(path)) is not None and stat.czxid != old_epoch, 60, 0.02)
            finally:
                cluster.signal_broker(controller, signal.SIGCONT)
        cluster.wait_listening(leader, 60)
        wait_until("an acknowledged write on every partition", lambda: _acked_write_on_every_partition(
            cluster, "bounced"), SESSION_TIMEOUT_MS / 1000)

        def back_in_sync() -> bool:
            parts = metadata(cluster.brokers[controller], ["bounced"]).topics[0].partitions
            return all(leader in p.isr_nodes and p.leader_epoch > before[p.partition_index] for p in parts)
        wait_until(f"broker {leader} leading or in sync again in a newer leader epoch", back_in_sync,
                   SESSION_TIMEOUT_MS / 1000)
    finally:
        cluster.stop()
