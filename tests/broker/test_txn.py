"""Transactions end to end on an EmbeddedBroker with confluent-kafka (librdkafka) and raw requests."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaError, KafkaException, Producer
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest

from txn_helpers import create_topics, end_offsets, raw_request, read_all, wait_for
from tidelake.broker.embedded import EmbeddedBroker

BROKER_CONFIG = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
    "transaction.max.timeout.ms": "60000",
}


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", port=0, config=BROKER_CONFIG) as b:
        yield b


def txn_producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def describe(bootstrap: str, txn_id: str):
    resp = raw_request(bootstrap, DescribeTransactionsRequest(transactional_ids=[txn_id]), 0)
    return resp.transaction_states[0]


def test_commit_and_abort_visibility(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, {"t": 2})
    p = txn_producer(bs, "tx-commit-abort")
    p.begin_transaction()
    for i in range(5):
        p.produce("t", f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("t", f"a{i}".encode(), partition=i % 2)
    p.flush(30)
    # while the transaction is open, the LSO of both partitions stops at its first record
    lso, hw = end_offsets(bs, "t", 2, "read_committed"), end_offsets(bs, "t", 2, "read_uncommitted")
    assert lso == [3 + 1, 2 + 1]  # 3 and 2 committed records + their COMMIT markers
    assert hw == [3 + 1 + 2, 2 + 1 + 1]
    assert read_all(bs, "t", 2, "read_committed") == [f"c{i}" for i in range(5)]
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce("t", f"d{i}".encode(), partition=i % 2)
    p.commit_transaction(30)

    committed = read_all(bs, "t", 2, "read_committed")
    assert committed == sorted([f"c{i}" for i in range(5)] + ["d0", "d1"])
    assert read_all(bs, "t", 2, "read_uncommitted") == sorted(committed + ["a0", "a1", "a2"])
    assert end_offsets(bs, "t", 2, "read_committed") == end_offsets(bs, "t", 2, "read_uncommitted")
    st = describe(bs, "tx-commit-abort")
    assert st.error_code == 0 and st.transaction_state == "CompleteCommit" and st.topics == []


def test_zombie_producer_is_fenced(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, {"f": 1})
    zombie = txn_producer(bs, "tx-fence")
    zombie.begin_transaction()
    zombie.produce("f", b"zombie", partition=0)
    zombie.flush(30)
    old = describe(bs, "tx-fence")
    fresh = txn_producer(bs, "tx-fence")  # same transactional.id: bumps the epoch, aborts the zombie's txn
    new = describe(bs, "tx-fence")
    assert new.producer_id == old.producer_id and new.producer_epoch > old.producer_epoch
    with pytest.raises(KafkaException) as exc:
        zombie.commit_transaction(30)
    err = exc.value.args[0]
    assert err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
    # on the wire: the old epoch gets PRODUCER_FENCED (90) from EndTxn
    resp = raw_request(bs, EndTxnRequest(transactional_id="tx-fence", producer_id=old.producer_id,
                                         producer_epoch=old.producer_epoch, committed=True), 3)
    assert resp.error_code == 90
    resp = raw_request(bs, EndTxnRequest(transactional_id="tx-fence", producer_id=old.producer_id,
                                         producer_epoch=old.producer_epoch, committed=True), 1)
    assert resp.error_code == 47  # pre-PRODUCER_FENCED clients get INVALID_PRODUCER_EPOCH
    fresh.begin_transaction()
    fresh.produce("f", b"fresh", partition=0)
    fresh.commit_transaction(30)
    assert read_all(bs, "f", 1, "read_committed") == ["fresh"]
    assert read_all(bs, "f", 1, "read_uncommitted") == ["fresh", "zombie"]


def test_transaction_timeout_aborts(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, {"slow": 1})
    with pytest.raises(KafkaException):  # above transaction.max.timeout.ms
        txn_producer(bs, "tx-too-long", **{"transaction.timeout.ms": 60001})
    resp = raw_request(bs, InitProducerIdRequest(transactional_id="tx-too-long", transaction_timeout_ms=60001), 2)
    assert resp.error_code == 50  # INVALID_TRANSACTION_TIMEOUT

    p = txn_producer(bs, "tx-slow", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("slow", b"never", partition=0)
    p.flush(30)
    assert describe(bs, "tx-slow").transaction_state == "Ongoing"
    st = wait_for(lambda: (s := describe(bs, "tx-slow")).transaction_state == "CompleteAbort" and s,
                  what="timeout abort")
    assert st.topics == []
    assert read_all(bs, "slow", 1, "read_committed") == []
    assert end_offsets(bs, "slow", 1, "read_committed") == end_offsets(bs, "slow", 1, "read_uncommitted") == [2]
    with pytest.raises(KafkaException):  # the epoch was bumped: this producer is fenced
        p.commit_transaction(30)


def test_add_partitions_forms_and_errors(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, {"ap": 2})
    init = raw_request(bs, InitProducerIdRequest(transactional_id="tx-raw", transaction_timeout_ms=30000), 2)
    pid, epoch = init.producer_id, init.producer_epoch
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    # v3 client form with one unknown partition: it fails, the rest is not attempted
    resp = raw_request(bs, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-raw", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name="ap", partitions=[0, 7])]), 3)
    codes = {r.partition_index: r.partition_error_code for r in resp.results_by_topic_v3_and_below[0].results_by_partition}
    assert codes == {0: 55, 7: 3}
    resp = raw_request(bs, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-raw", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name="ap", partitions=[0])]), 3)
    assert resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    # v4 batched form with verify_only: partition 0 is in the transaction, 1 is not
    X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    resp = raw_request(bs, AddPartitionsToTxnRequest(transactions=[
        X(transactional_id="tx-raw", producer_id=pid, producer_epoch=epoch, verify_only=True,
          topics=[X.AddPartitionsToTxnTopic(name="ap", partitions=[0, 1])])]), 4)
    res = resp.results_by_transaction[0]
    assert res.transactional_id == "tx-raw"
    assert {r.partition_index: r.partition_error_code for r in res.topic_results[0].results_by_partition} == {0: 0, 1: 48}
    st = describe(bs, "tx-raw")
    assert st.transaction_state == "Ongoing" and [(t.topic, t.partitions) for t in st.topics] == [("ap", [0])]
    # wrong producer id / epoch
    resp = raw_request(bs, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-raw", v3_and_below_producer_id=pid + 100, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name="ap", partitions=[1])]), 3)
    assert resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 49
    resp = raw_request(bs, EndTxnRequest(transactional_id="tx-raw", producer_id=pid, producer_epoch=epoch,
                                         committed=False), 3)
    assert resp.error_code == 0
    assert describe(bs, "tx-raw").transaction_state == "CompleteAbort"


def test_list_describe_api_and_cli(broker):
    from tidelake.cli.main import cli
    bs = broker.bootstrap_servers
    create_topics(bs, {"l": 1})
    done = txn_producer(bs, "tx-list-done")
    done.begin_transaction()
    done.produce("l", b"x", partition=0)
    done.commit_transaction(30)
    open_ = txn_producer(bs, "tx-list-open")
    open_.begin_transaction()
    open_.produce("l", b"y", partition=0)
    open_.flush(30)

    resp = raw_request(bs, ListTransactionsRequest(state_filters=["Ongoing", "Nope"], producer_id_filters=[]), 1)
    assert resp.error_code == 0 and resp.unknown_state_filters == ["Nope"]
    assert [s.transactional_id for s in resp.transaction_states] == ["tx-list-open"]
    unknown = describe(bs, "tx-missing")
    assert unknown.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND

    runner = CliRunner()
    out = runner.invoke(cli, ["transactions", "list", "-b", bs, "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    rows = {r["transactional_id"]: r["state"] for r in json.loads(out.output)}
    assert rows == {"tx-list-done": "CompleteCommit", "tx-list-open": "Ongoing"}
    out = runner.invoke(cli, ["transactions", "list", "-b", bs, "--state", "Ongoing"], catch_exceptions=False)
    assert out.exit_code == 0 and "tx-list-open" in out.output and "tx-list-done" not in out.output
    out = runner.invoke(cli, ["transactions", "describe", "-b", bs, "tx-list-open", "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["state"] == "Ongoing" and doc["partitions"] == ["l-0"] and doc["transaction_start_time_ms"] > 0
    out = runner.invoke(cli, ["transactions", "describe", "-b", bs, "tx-list-open"], catch_exceptions=False)
    assert out.exit_code == 0 and "Ongoing" in out.output and "l-0" in out.output
    out = runner.invoke(cli, ["transactions", "describe", "-b", bs, "tx-missing"])
    assert out.exit_code != 0 and "TransactionalIdNotFound" in out.output
    open_.abort_transaction(30)


def test_state_survives_restart_and_prepared_commit_is_completed(tmp_path):
    """A clean restart reloads __transaction_state; a transaction found in PrepareCommit (as after a
    crash between the PrepareCommit record and the markers) is completed with COMMIT markers."""
    from tidelake.coordinator.transactions import TxnStatus
    from tidelake.coordinator.txn_log import TxnLogValue, encode_key, encode_value, partition_for
    from tidelake.log.manager import LogManager
    from tidelake.protocol.records import Record, build_batch

    data = tmp_path / "data"
    with EmbeddedBroker(data, port=0, config=BROKER_CONFIG) as b:
        bs = b.bootstrap_servers
        create_topics(bs, {"r": 2})
        p = txn_producer(bs, "tx-restart")
        p.begin_transaction()
        for i in range(4):
            p.produce("r", f"pending{i}".encode(), partition=i % 2)
        p.flush(30)
        before = describe(bs, "tx-restart")
        assert before.transaction_state == "Ongoing"
    # the broker is down: record "PrepareCommit" for that transaction, as the coordinator does
    # before it writes markers (the crash window this test reproduces)
    logs = LogManager(data)
    logs.load()
    value = TxnLogValue(before.producer_id, before.producer_epoch, before.transaction_timeout_ms,
                        TxnStatus.PREPARE_COMMIT, {"r": [0, 1]}, before.transaction_start_time_ms,
                        before.transaction_start_time_ms)
    state_log = logs.get("__transaction_state", partition_for("tx-restart"))
    state_log.append(build_batch([Record(0, 1, encode_key("tx-restart"), encode_value(value))]), now_ms=1)
    logs.close()

    with EmbeddedBroker(data, port=0, config=BROKER_CONFIG) as b:
        bs = b.bootstrap_servers
        after = describe(bs, "tx-restart")
        assert after.transaction_state == "CompleteCommit"
        assert (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch)
        assert read_all(bs, "r", 2, "read_committed") == [f"pending{i}" for i in range(4)]
        # the same transactional id continues with the next epoch
        init = raw_request(bs, InitProducerIdRequest(transactional_id="tx-restart", transaction_timeout_ms=30000), 2)
        assert (init.producer_id, init.producer_epoch) == (before.producer_id, before.producer_epoch + 1)


def test_txn_offset_commit_pending_until_commit_across_restart(tmp_path):
    """Offsets sent in a transaction are invisible (UNSTABLE_OFFSET_COMMIT for require_stable) until
    the COMMIT marker; the pending state is rebuilt from __consumer_offsets after a restart."""
    from kafka.protocol.consumer import OffsetFetchRequest
    from kafka.protocol.producer import AddOffsetsToTxnRequest, TxnOffsetCommitRequest

    def fetch(bs, require_stable):
        resp = raw_request(bs, OffsetFetchRequest(
            group_id="g-txn", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="src", partition_indexes=[0, 1])],
            require_stable=require_stable), 7)
        return {p.partition_index: (p.committed_offset, p.error_code) for p in resp.topics[0].partitions}

    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    data = tmp_path / "data"
    with EmbeddedBroker(data, port=0, config=BROKER_CONFIG) as b:
        bs = b.bootstrap_servers
        create_topics(bs, {"src": 2})
        init = raw_request(bs, InitProducerIdRequest(transactional_id="tx-offsets", transaction_timeout_ms=60000), 2)
        pid, epoch = init.producer_id, init.producer_epoch
        # TxnOffsetCommit before AddOffsetsToTxn is refused
        resp = raw_request(bs, TxnOffsetCommitRequest(
            transactional_id="tx-offsets", group_id="g-txn", producer_id=pid, producer_epoch=epoch,
            topics=[T(name="src", partitions=[P(partition_index=0, committed_offset=5, committed_metadata="m")])]), 3)
        assert resp.topics[0].partitions[0].error_code == 48  # INVALID_TXN_STATE
        resp = raw_request(bs, AddOffsetsToTxnRequest(transactional_id="tx-offsets", producer_id=pid,
                                                      producer_epoch=epoch, group_id="g-txn"), 3)
        assert resp.error_code == 0
        resp = raw_request(bs, TxnOffsetCommitRequest(
            transactional_id="tx-offsets", group_id="g-txn", producer_id=pid, producer_epoch=epoch,
            topics=[T(name="src", partitions=[P(partition_index=0, committed_offset=5, committed_metadata="m"),
                                              P(partition_index=1, committed_offset=9, committed_metadata=None)])]), 3)
        assert [p.error_code for p in resp.topics[0].partitions] == [0, 0]
        assert fetch(bs, True) == {0: (-1, 88), 1: (-1, 88)}  # UNSTABLE_OFFSET_COMMIT
        assert fetch(bs, False) == {0: (-1, 0), 1: (-1, 0)}  # nothing committed yet
    with EmbeddedBroker(data, port=0, config=BROKER_CONFIG) as b:
        bs = b.bootstrap_servers
        assert describe(bs, "tx-offsets").transaction_state == "Ongoing"
        assert fetch(bs, True) == {0: (-1, 88), 1: (-1, 88)}
        resp = raw_request(bs, EndTxnRequest(transactional_id="tx-offsets", producer_id=pid, producer_epoch=epoch,
                                             committed=True), 3)
        assert resp.error_code == 0
        assert fetch(bs, True) == {0: (5, 0), 1: (9, 0)}
    with EmbeddedBroker(data, port=0, config=BROKER_CONFIG) as b:  # and the group loader keeps them
        assert fetch(b.bootstrap_servers, True) == {0: (5, 0), 1: (9, 0)}


def test_transactional_produce_to_a_partition_not_in_the_transaction_is_rejected(broker):
    """KIP-890 part 1: the partition leader verifies a transactional Produce with the transaction
    coordinator. A kafka-python producer made to skip AddPartitionsToTxn for partition 1 gets
    INVALID_TXN_STATE there (as from Kafka 3.9) and nothing is written; partition 0, added the
    normal way, was accepted."""
    import kafka.errors
    from kafka import KafkaProducer
    from kafka.structs import TopicPartition

    bs = broker.bootstrap_servers
    create_topics(bs, {"txn-verify": 2})
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="tx-verify")
    try:
        p.init_transactions()
        p.begin_transaction()
        assert p.send("txn-verify", b"added", partition=0).get(30).offset == 0
        p._transaction_manager._partitions_in_transaction.add(TopicPartition("txn-verify", 1))  # never added
        with pytest.raises(kafka.errors.InvalidTxnStateError):
            p.send("txn-verify", b"not added", partition=1).get(30)
    finally:
        p.close(timeout=5)
    assert broker.broker.logs.get("txn-verify", 1).log_end_offset == 0


def test_an_invalid_txn_state_answer_is_logged_with_its_reason(broker, caplog):
    """INVALID_TXN_STATE is fatal to the producer, so the broker says at INFO why it answered it: the
    request, the producer, the transaction's state and partitions."""
    bs = broker.bootstrap_servers
    create_topics(bs, {"why": 1})
    init = raw_request(bs, InitProducerIdRequest(transactional_id="tx-why", transaction_timeout_ms=30000), 2)
    pid, epoch = init.producer_id, init.producer_epoch
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    with caplog.at_level("INFO", logger="tidelake.coordinator.transactions"):
        resp = raw_request(bs, EndTxnRequest(transactional_id="tx-why", producer_id=pid, producer_epoch=epoch,
                                             committed=True), 3)
        assert resp.error_code == 48
        raw_request(bs, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx-why", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[T(name="why", partitions=[0])]), 3)
        assert raw_request(bs, EndTxnRequest(transactional_id="tx-why", producer_id=pid, producer_epoch=epoch,
                                             committed=True), 3).error_code == 0
        assert raw_request(bs, EndTxnRequest(transactional_id="tx-why", producer_id=pid, producer_epoch=epoch,
                                             committed=False), 3).error_code == 48
    lines = [r.getMessage() for r in caplog.records if "INVALID_TXN_STATE" in r.getMessage()]
    assert lines == [
        f"transactional id tx-why: INVALID_TXN_STATE for EndTxn(commit) of producer ({pid}, {epoch}): cannot commit "
        "in state Empty (partitions [])",
        f"transactional id tx-why: INVALID_TXN_STATE for EndTxn(abort) of producer ({pid}, {epoch}): cannot abort "
        "in state CompleteCommit (partitions [])"]
