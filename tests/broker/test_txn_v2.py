"""Transactions v2 (KIP-890 part 2) on one broker: the transaction.version feature in ApiVersions, a v2
producer (raw requests, tests/txn_v2_producer.py: no installed client speaks v2) whose Produce adds its
partitions, whose EndTxn bumps the epoch, and whose previous epoch is fenced everywhere."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import EndTxnRequest, WriteTxnMarkersRequest

from txn_helpers import create_topics, raw_request, read_all
from txn_v2_producer import RawTxnProducerV2
from tidelake.broker.embedded import EmbeddedBroker
from tidelake.protocol.wire_client import WireClient

INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
PRODUCER_FENCED = 90


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", port=0) as b:
        yield b


def _state(bootstrap: str, txn_id: str):
    return raw_request(bootstrap, DescribeTransactionsRequest(transactional_ids=[txn_id]), 0).transaction_states[0]


def _features(bootstrap: str):
    r = raw_request(bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    return ({f.name: (f.min_version, f.max_version) for f in r.supported_features},
            {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features},
            r.finalized_features_epoch)


def test_api_versions_advertises_transaction_version_2(broker):
    supported, finalized, epoch = _features(broker.bootstrap_servers)
    assert supported["transaction.version"] == (0, 2)  # (beside the other features, e.g. streams.version)
    assert finalized["transaction.version"] == (2, 2) and epoch >= 0
    # a real client reads them so (kafka-python's admin DescribeFeatures)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        features = admin.describe_features()
    finally:
        admin.close()
    assert features["transaction.version"]["finalized"] == (2, 2)
    assert features["transaction.version"]["supported"] == (0, 2)


def test_api_versions_of_the_v2_apis_as_kafka_4(broker):
    r = raw_request(broker.bootstrap_servers, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    served = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    # Produce 12+, AddPartitionsToTxn 5, EndTxn 5, WriteTxnMarkers 2, TxnOffsetCommit 5; InitProducerId stops at
    # v5 as Kafka 4.x's does (v6, KIP-939's two-phase commit, is marked unstable in Kafka's spec)
    assert {key: served[key][1] for key in (0, 22, 24, 26, 27, 28)} == {0: 13, 22: 5, 24: 5, 26: 5, 27: 2, 28: 5}


def test_transaction_version_pinned_to_1(tmp_path):
    with EmbeddedBroker(tmp_path / "data", port=0, config={"transaction.version": "1"}) as b:
        bs = b.bootstrap_servers
        assert _features(bs)[1]["transaction.version"] == (1, 1)
        create_topics(bs, {"p1": 1})
        with WireClient.connect(bs) as c:
            p = RawTxnProducerV2(c, "tv-pinned")
            p.init()
            # the v1 protocol: a partition must be added first (KIP-890 part 1 verification refuses it)
            assert p.produce("p1", 0, ["x"]) == INVALID_TXN_STATE


def test_v2_producer_commit_abort_and_zombie_fenced(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, {"v2": 2})
    with WireClient.connect(bs) as c:
        p = RawTxnProducerV2(c, "tv2-flow")
        p.init()
        pid, epoch = p.producer_id, p.producer_epoch
        # no AddPartitionsToTxn: the Produce adds each partition
        assert p.produce("v2", 0, ["c0", "c1"]) == 0
        assert p.produce("v2", 1, ["c2"]) == 0
        st = _state(bs, "tv2-flow")
        assert st.transaction_state == "Ongoing"
        assert {(t.topic, tuple(t.partitions)) for t in st.topics} == {("v2", (0, 1))}
        assert p.end(commit=True) == 0
        assert (p.producer_id, p.producer_epoch) == (pid, epoch + 1)  # the bump, returned by EndTxn v5
        st = _state(bs, "tv2-flow")
        assert (st.transaction_state, st.producer_epoch) == ("CompleteCommit", epoch + 1)

        zombie = RawTxnProducerV2(c, "tv2-flow", producer_id=pid, producer_epoch=epoch)  # the first epoch's holder
        assert p.produce("v2", 0, ["a0"]) == 0  # the second transaction, at the bumped epoch, sequence 0 again
        assert p.produce("v2", 1, ["a1"]) == 0
        assert p.end(commit=False) == 0
        assert p.producer_epoch == epoch + 2

        assert zombie.produce("v2", 0, ["zombie"]) == INVALID_PRODUCER_EPOCH
        r = c.request(EndTxnRequest(transactional_id="tv2-flow", producer_id=pid, producer_epoch=epoch,
                                    committed=True), 5)
        assert r.error_code == PRODUCER_FENCED

        assert p.produce("v2", 1, ["c3"]) == 0
        assert p.end(commit=True) == 0
    assert read_all(bs, "v2", 2, "read_committed") == ["c0", "c1", "c2", "c3"]
    assert read_all(bs, "v2", 2, "read_uncommitted") == ["a0", "a1", "c0", "c1", "c2", "c3"]


def test_v2_txn_offset_commit_adds_the_group(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, {"v2o": 1})
    with WireClient.connect(bs) as c:
        p = RawTxnProducerV2(c, "tv2-offsets")
        p.init()
        assert p.produce("v2o", 0, ["x"]) == 0
        assert p.commit_offset("g-v2", "v2o", 0, 42) == 0  # no AddOffsetsToTxn first
        assert {t.topic for t in _state(bs, "tv2-offsets").topics} == {"v2o", "__consumer_offsets"}
        assert p.end(commit=True) == 0
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "g-v2"})
    try:
        assert consumer.committed([TopicPartition("v2o", 0)], timeout=10)[0].offset == 42
    finally:
        consumer.close()


def _marker(bootstrap: str, producer_id: int, producer_epoch: int, commit: bool, topic: str, partition: int,
            transaction_version: int) -> int:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    r = raw_request(bootstrap, WriteTxnMarkersRequest(markers=[M(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])], coordinator_epoch=0,
        transaction_version=transaction_version)]), 2)
    return r.markers[0].topics[0].partitions[0].error_code


def test_a_stale_v2_marker_cannot_end_the_next_transaction(broker):
    """KIP-1228: a v2 marker carries the epoch bumped past its transaction's records, so a marker at the
    epoch of an open transaction is a late retry of the previous one: refused, not ending this one."""
    bs = broker.bootstrap_servers
    create_topics(bs, {"v2m": 1})
    with WireClient.connect(bs) as c:
        p = RawTxnProducerV2(c, "tv2-markers")
        p.init()
        assert p.produce("v2m", 0, ["first"]) == 0
        assert p.end(commit=True) == 0
        pid, bumped = p.producer_id, p.producer_epoch
        # a retry of that COMMIT marker while nothing is open here: written again, harmlessly
        assert _marker(bs, pid, bumped, True, "v2m", 0, transaction_version=2) == 0
        assert p.produce("v2m", 0, ["second"]) == 0  # the next transaction, at the bumped epoch
        assert _marker(bs, pid, bumped, True, "v2m", 0, transaction_version=2) == INVALID_PRODUCER_EPOCH
        assert p.end(commit=False) == 0
    assert read_all(bs, "v2m", 1, "read_committed") == ["first"]
