"""Replication between real broker processes: acks=all records on every replica, byte for byte, with
the leader's offsets and leader epochs; the followers' producer state lets a new leader deduplicate."""
from __future__ import annotations

from cluster_fixtures import consume_all, create_topic, produce
from tidelake.log import LogConfig, PartitionLog


def replica_batches(cluster, broker_id: int, topic: str, partition: int) -> list[tuple[int, int, int, bytes]]:
    """(base offset, last offset, partition leader epoch, batch bytes) of one replica's log, read from
    its data directory once the broker is stopped."""
    plog = PartitionLog.open(cluster.brokers[broker_id].data_dir / f"{topic}-{partition}", LogConfig())
    try:
        return [(h.base_offset, h.last_offset, h.partition_leader_epoch, bytes(data))
                for h, data in plog.iter_batches(0)]
    finally:
        plog.close()


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
