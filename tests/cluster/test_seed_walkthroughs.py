"""The seeds' replication walk-throughs (002 and 004) reproduced on a real cluster, in their own terms.

Already shown in test_faults.py:
- follower failure (dropped from the ISR, catches up from the leader, rejoins once its LEO reaches the HW):
  test_a_stopped_follower_leaves_the_isr_writes_continue_and_it_rejoins, test_a_restarted_broker_catches_up_and_rejoins;
- leader failure (a new leader from the ISR, the others fetch from it):
  test_kill_9_of_a_leader_under_load_keeps_every_acknowledged_record_once_in_order;
- a former leader cutting what the new leader never had (leader epochs, KIP-279):
  test_a_former_leader_truncates_what_the_new_leader_never_had.

Here: acks 0 / 1 / -1 as seed 004 explains them (0: nothing is confirmed, a broker failure loses what it had
not written; 1: the leader's write is confirmed, lost if the leader dies before a follower copies it; -1: confirmed
only once the ISR has it), the duplicate acks=-1 produces when the leader dies after the followers synced but
before it answered (and the idempotent producer storing the retry once), and the acknowledged record that
truncating to the high watermark alone would lose (KIP-101), kept by leader epochs.
Slow (sessions must expire): marker slow_faults.
"""
from __future__ import annotations

import json
import select
import signal

import pytest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kazoo.client import KazooClient

from cluster_fixtures import create_topic, produce, replica_batches, start_cluster, wait_until
from tidelake import errors
from tidelake.cluster.hw_checkpoint import read_high_watermarks
from tidelake.protocol.records import Record, build_batch, decode_records
from tidelake.protocol.wire_client import WireClient

pytestmark = pytest.mark.slow_faults

PRODUCE_VERSION = 9


def produce_request(topic: str, batch: bytes, acks: int, timeout_ms: int = 30000) -> ProduceRequest:
    P = ProduceRequest
    return P(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=batch)])])


def batch_of(*values: bytes, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    return bytes(build_batch([Record(i, 1, None, v) for i, v in enumerate(values)], producer_id=producer_id,
                             producer_epoch=producer_epoch, base_sequence=base_sequence))


def partition_result(response) -> tuple[int, int]:
    r = response.responses[0].partition_responses[0]
    return r.error_code, r.base_offset


class Cluster:
    """A cluster of its own (settings differ per walk-through) with a ZooKeeper client."""

    def __init__(self, root, brokers: int, **configs: str):
        self.c = start_cluster(root, brokers, **configs)
        self.zk = KazooClient(hosts=self.c.zookeeper.connect_string, timeout=10)
        self.zk.start(10)

    def state(self, topic: str) -> dict:
        return json.loads(self.zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])

    def port(self, broker_id: int) -> int:
        return self.c.brokers[broker_id].port

    def values(self, broker_id: int, topic: str) -> list[bytes]:
        """Every value in a stopped broker's replica of ``topic``-0, in offset order."""
        return [r.value for _b, _l, _e, data in replica_batches(self.c, broker_id, topic, 0)
                for r in decode_records(data, 0)]

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()
        self.c.stop()


@pytest.fixture
def make_cluster(tmp_path):
    made = []

    def make(brokers: int, **configs: str) -> Cluster:
        made.append(Cluster(tmp_path / f"c{len(made)}", brokers, **configs))
        return made[-1]
    yield make
    for c in made:
        c.close()


def test_acks_0_is_never_confirmed_and_what_a_dying_leader_had_not_written_is_gone(make_cluster):
    """Seed 004, acks=0: the producer waits for nothing; a record the broker received but had not written
    when it failed is lost, and the producer was never told either way."""
    k = make_cluster(2)
    create_topic(k.c, "acks0", 1, 2, **{"min.insync.replicas": "1"})
    st = k.state("acks0")
    leader, follower = st["leader"], next(b for b in st["isr"] if b != st["leader"])
    follower_log = k.c.brokers[follower].data_dir / "acks0-0" / "00000000000000000000.log"
    with WireClient("127.0.0.1", k.port(leader)) as c:
        assert c.request(produce_request("acks0", batch_of(b"kept"), acks=0), PRODUCE_VERSION) is None
        wait_until("the follower to copy the first record", lambda: follower_log.stat().st_size > 0, 30)
        # the leader is stopped: the next record reaches its socket, never its log
        k.c.signal_broker(leader, signal.SIGSTOP)
        assert c.request(produce_request("acks0", batch_of(b"never-written"), acks=0), PRODUCE_VERSION) is None
        k.c.kill_broker(leader)
    wait_until("the follower to lead acks0-0", lambda: k.state("acks0")["leader"] == follower, 60)
    k.c.stop_broker(follower)
    assert k.values(follower, "acks0") == [b"kept"]


def test_acks_1_loses_a_confirmed_record_when_the_leader_dies_before_a_follower_copied_it(make_cluster):
    """Seed 004, acks=1 vs -1: with the follower stopped (out of the ISR), the leader confirms an acks=1
    record on its own write; it dies, the follower becomes leader (unclean election: the only replica left)
    and the confirmed record is gone. acks=-1 in the same state is refused (min.insync.replicas=2): every
    record confirmed at acks=-1 is still there."""
    k = make_cluster(2, **{"unclean.leader.election.enable": "true"})
    create_topic(k.c, "acks1", 1, 2, **{"min.insync.replicas": "2"})
    confirmed_all = produce(k.c, "acks1", 20, idempotent=False, prefix=b"all")
    st = k.state("acks1")
    leader, follower = st["leader"], next(b for b in st["isr"] if b != st["leader"])
    k.c.signal_broker(follower, signal.SIGSTOP)
    try:
        wait_until("the stopped follower out of the ISR", lambda: k.state("acks1")["isr"] == [leader], 30)
        with WireClient("127.0.0.1", k.port(leader)) as c:
            code_all, _ = partition_result(c.request(produce_request("acks1", batch_of(b"all-refused"), acks=-1),
                                                     PRODUCE_VERSION))
            code_one, offset_one = partition_result(
                c.request(produce_request("acks1", batch_of(b"one-confirmed"), acks=1), PRODUCE_VERSION))
        assert code_all == errors.NotEnoughReplicas.code  # never confirmed
        assert code_one == errors.NONE and offset_one >= 20  # confirmed by the leader alone
        k.c.kill_broker(leader)
    finally:
        k.c.signal_broker(follower, signal.SIGCONT)
    wait_until("the follower elected (unclean)", lambda: k.state("acks1")["leader"] == follower, 60)
    k.c.stop_broker(follower)
    values = k.values(follower, "acks1")
    assert b"one-confirmed" not in values  # acks=1: confirmed, then lost
    assert sorted(confirmed_all.values()) == sorted(v for v in values if v.startswith(b"all-"))


def _duplicate_walkthrough(k: Cluster, topic: str, batch_for) -> list[bytes]:
    """Leader 1, followers 2 and 3, all in the ISR. Follower 3 is stopped (still in the ISR: a long
    replica.lag.time.max.ms): the leader's answer to its pending fetch, carrying the batch, waits unread and no
    next fetch reports it copied, so an acks=-1 batch cannot be answered; once follower 2 holds the batch as the
    leader does (both followers synced, in the seed's words), the leader is killed before answering. Follower 2 (first live ISR member in assignment
    order) becomes leader and the producer sends the batch again there. Returns the new leader's values."""
    create_topic_assigned(k, topic, [1, 2, 3])
    batch = batch_for(k)
    k.c.signal_broker(3, signal.SIGSTOP)
    try:
        with WireClient("127.0.0.1", k.port(1)) as c:
            c.send_raw(c.encode(produce_request(topic, batch, acks=-1), PRODUCE_VERSION))
            leader_log = k.c.brokers[1].data_dir / f"{topic}-0" / "00000000000000000000.log"
            follower_log = k.c.brokers[2].data_dir / f"{topic}-0" / "00000000000000000000.log"
            wait_until("the leader to write the batch", lambda: leader_log.stat().st_size >= len(batch), 30)
            wait_until("follower 2 to hold what the leader holds",
                       lambda: follower_log.stat().st_size == leader_log.stat().st_size, 30)
            # the walk-through needs the leader not to have answered: follower 3 has not reported the batch
            assert not select.select([c.sock], [], [], 0)[0], "the leader answered before it was killed"
            k.c.kill_broker(1)
    finally:
        k.c.signal_broker(3, signal.SIGCONT)
    wait_until(f"follower 2 to lead {topic}-0", lambda: k.state(topic)["leader"] == 2, 60)
    # the producer saw no answer: it retries at the new leader (again while that one has not yet been told
    # it leads: NOT_LEADER_OR_FOLLOWER appends nothing, and a producer retries it)
    with WireClient("127.0.0.1", k.port(2)) as c:
        code = wait_until("the new leader to answer the retried batch", lambda: (
            (code := partition_result(c.request(produce_request(topic, batch, acks=-1), PRODUCE_VERSION))[0])
            != errors.NotLeaderOrFollower.code and [code]), 30)[0]
    assert code == errors.NONE, code
    k.c.stop_broker(2)
    return k.values(2, topic)


def create_topic_assigned(k: Cluster, topic: str, replicas: list[int], min_insync: str = "2") -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": k.c.bootstrap_servers})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config={"min.insync.replicas": min_insync})
    for f in admin.create_topics([new], request_timeout=20).values():
        f.result(30)
    wait_until(f"{topic}-0 led by {replicas[0]} with a full ISR", lambda: (
        (s := k.state(topic))["leader"] == replicas[0] and sorted(s["isr"]) == sorted(replicas)), 30)


# a follower stopped a few seconds stays in the ISR and keeps its ZooKeeper session
DUPLICATE_CONFIGS = {"replica.lag.time.max.ms": "60000", "zookeeper.session.timeout.ms": "6000"}


def test_acks_all_stores_a_batch_twice_when_the_leader_dies_after_the_followers_synced(make_cluster):
    """Seed 004, acks=-1: "if the leader fails after the followers synced but before it answered, the
    data is duplicated" — a producer without idempotence retries the batch at the new leader, which already
    has it."""
    k = make_cluster(3, **DUPLICATE_CONFIGS)
    values = _duplicate_walkthrough(k, "dup", lambda _k: batch_of(b"once", b"twice?"))
    assert values == [b"once", b"twice?", b"once", b"twice?"]


def test_the_idempotent_producer_stores_the_retried_batch_once(make_cluster):
    """The same failure with a producer id and sequence numbers (enable.idempotence): the new leader knows
    the batch's sequence from the replicated producer state and answers the retry without appending it."""
    k = make_cluster(3, **DUPLICATE_CONFIGS)

    def idempotent_batch(k: Cluster) -> bytes:
        with WireClient("127.0.0.1", k.port(1)) as c:
            r = c.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                                producer_epoch=-1), 4)
        assert r.error_code == errors.NONE
        return batch_of(b"once", b"twice?", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
                        base_sequence=0)
    values = _duplicate_walkthrough(k, "nodup", idempotent_batch)
    assert values == [b"once", b"twice?"]


def test_a_restarted_follower_keeps_acknowledged_records_above_its_recorded_high_watermark(make_cluster):
    """KIP-101's first case. The seeds' rule: a recovering follower cuts its log above the high watermark it
    recorded. Its recorded HW lags (the leader's HW reaches a follower only on its next fetch, and the
    checkpoint is written every replica.high.watermark.checkpoint.interval.ms), so that cut can remove
    records the leader already acknowledged; if the leader then dies, the follower becomes leader without
    them. With leader epochs the follower asks the leader where its epoch ended instead, and keeps them.
    The partition lives on the two brokers that are not the controller, so the controller stays up to make
    the restarted broker a follower and, once the leader is gone, its leader."""
    k = make_cluster(3, **{"unclean.leader.election.enable": "true",
                           "replica.high.watermark.checkpoint.interval.ms": "3600000"})
    controller = json.loads(k.zk.get("/controller")[0])["brokerid"]
    leader, follower = sorted(b for b in (1, 2, 3) if b != controller)
    create_topic_assigned(k, "kip101", [leader, follower], min_insync="2")
    acked = produce(k.c, "kip101", 200, idempotent=False)  # acks=all: both replicas have them
    k.c.kill_broker(follower)
    recorded = read_high_watermarks(k.c.brokers[follower].data_dir).get(("kip101", 0), 0)
    assert recorded < len(acked)  # truncating to it would cut acknowledged records
    wait_until("the ISR without the killed follower", lambda: k.state("kip101")["isr"] == [leader], 60)
    # the leader is unreachable while the follower recovers (it cannot catch up again), then dies
    k.c.signal_broker(leader, signal.SIGSTOP)
    try:
        k.c.start_broker(follower)
        log = k.c.brokers[follower].log_path
        wait_until("the restarted broker to follow the stopped leader", lambda: (
            f"broker {follower}: follower of kip101-0 (leader {leader}" in log.read_text()), 30)
        k.c.kill_broker(leader)
    finally:
        k.c.signal_broker(leader, signal.SIGCONT)
    wait_until("the follower to lead kip101-0", lambda: k.state("kip101")["leader"] == follower, 90)
    k.c.stop_broker(follower)
    assert sorted(k.values(follower, "kip101")) == sorted(acked.values())
