"""Replication between real broker processes: acks=all records on every replica, byte for byte, with
the leader's offsets and leader epochs; the followers' producer state lets a new leader deduplicate."""
from __future__ import annotations

import signal

from confluent_kafka import Consumer, Producer, TopicPartition

from cluster_fixtures import (consume_all, create_topic, metadata, produce, replica_batches, start_cluster,
                              wait_until)
from tidelake.log import LogConfig, PartitionLog


def test_acks_all_records_are_on_every_replica_byte_for_byte(cluster):
    create_topic(cluster, "rep", 3, 3, **{"min.insync.replicas": "2"})
    acked = produce(cluster, "rep", 3000)
    assert len(acked) == 3000
    got = consume_all(cluster, "rep", 3, 3000)
    assert sorted((p, o) for p, o, _v in got) == sorted(acked)
    assert all(acked[(p, o)] == v for p, o, v in got)
    cluster.stop()
    for p in range(3):
        copies = [replica_batches(cluster, b, "rep", p) for b in (1, 2, 3)]
        assert copies[0] and copies[0] == copies[1] == copies[2]
        assert copies[0][-1][1] == max(o for (pp, o) in acked if pp == p)  # every acknowledged record
        assert {epoch for _b, _l, epoch, _d in copies[0]} == {0}  # stamped with the leader's epoch


def test_replication_factor_one_topics_and_non_idempotent_producers_work_too(cluster):
    create_topic(cluster, "plain", 2, 1)
    acked = produce(cluster, "plain", 500, idempotent=False)
    got = consume_all(cluster, "plain", 2, 500)
    assert sorted((p, o) for p, o, _v in got) == sorted(acked)


def test_consumers_never_read_past_the_high_watermark(tmp_path):
    """With both followers stopped (and a lag time longer than the test), acks=1 records are in the
    leader's log but not below its high watermark: invisible to ListOffsets and Fetch until the
    followers have them."""
    c = start_cluster(tmp_path / "c", 3, **{"replica.lag.time.max.ms": "120000",
                                            "zookeeper.session.timeout.ms": "120000"})
    try:
        create_topic(c, "hw", 1, 3, **{"min.insync.replicas": "1"})
        produce(c, "hw", 10, prefix=b"seen")
        md = metadata(c.brokers[1], ["hw"]).topics[0].partitions[0]
        followers = [b for b in md.replica_nodes if b != md.leader_id]
        for b in followers:
            c.signal_broker(b, signal.SIGSTOP)
        try:
            p = Producer({"bootstrap.servers": c.brokers[md.leader_id].bootstrap, "acks": 1,
                          "enable.idempotence": False})
            for i in range(5):
                p.produce("hw", partition=0, value=b"pending-%d" % i)
            assert p.flush(30) == 0
            cons = Consumer({"bootstrap.servers": c.brokers[md.leader_id].bootstrap, "group.id": "hw",
                             "enable.auto.commit": False})
            try:
                low, high = cons.get_watermark_offsets(TopicPartition("hw", 0), timeout=10)
                assert (low, high) == (0, 10)
                cons.assign([TopicPartition("hw", 0, 0)])
                seen = []
                wait_until("the 10 committed records", lambda: seen.extend(
                    m.value() for m in cons.consume(100, 0.5) if m.error() is None) or len(seen) >= 10)
                seen += [m.value() for m in cons.consume(100, 2) if m.error() is None]  # nothing more comes
                assert len(seen) == 10 and all(v.startswith(b"seen") for v in seen)
            finally:
                cons.close()
        finally:
            for b in followers:
                c.signal_broker(b, signal.SIGCONT)
        got = consume_all(c, "hw", 1, 15)
        assert [v for _p, _o, v in got][10:] == [b"pending-%d" % i for i in range(5)]
    finally:
        c.stop()


def test_delete_records_on_the_leader_moves_every_replicas_log_start(cluster):
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import AdminClient
    create_topic(cluster, "trim", 1, 3)
    produce(cluster, "trim", 200)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.delete_records([TP("trim", 0, 150)], request_timeout=20)[TP("trim", 0, 150)].result(30)
    produce(cluster, "trim", 10, prefix=b"later")  # a fetch round after the trim reaches every follower
    assert len(consume_all(cluster, "trim", 1, 60)) == 60
    cluster.stop()
    for b in (1, 2, 3):
        assert replica_batches(cluster, b, "trim", 0)[-1][1] == 209
        plog = PartitionLog.open(cluster.brokers[b].data_dir / "trim-0", LogConfig())
        try:
            assert plog.log_start_offset == 150, f"broker {b}"
        finally:
            plog.close()
