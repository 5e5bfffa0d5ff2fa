"""What an operator sees at INFO (group joins and expirations, transaction timeouts, retention) and
at DEBUG (connections), from the broker's named loggers."""
from __future__ import annotations

import logging

from kafka.protocol.consumer import JoinGroupRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, InitProducerIdRequest
from txn_helpers import raw_request, wait_for

from tidelake.broker import EmbeddedBroker


def _messages(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_group_join_expiry_and_transaction_timeout_are_logged_at_info(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tidelake")
    config = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
              "transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"}
    with EmbeddedBroker(tmp_path, config=config) as b:
        b.run(b.broker.create_topic, "t", 1)
        join = JoinGroupRequest(group_id="g", session_timeout_ms=200, rebalance_timeout_ms=1000, member_id="",
                                group_instance_id=None, protocol_type="consumer",
                                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
        member = raw_request(b.bootstrap_servers, join, 3).member_id
        # no heartbeat follows: the session expires
        wait_for(lambda: any("session expired" in m for m in _messages(caplog, "tidelake.broker.server")),
                 what="session expiry line")

        init = raw_request(b.bootstrap_servers, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=100,
                                                                      producer_id=-1, producer_epoch=-1), 2)
        add = AddPartitionsToTxnRequest(v3_and_below_transactional_id="tx", v3_and_below_producer_id=init.producer_id,
                                        v3_and_below_producer_epoch=init.producer_epoch, v3_and_below_topics=[
                                            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])])
        assert raw_request(b.bootstrap_servers, add, 3).results_by_topic_v3_and_below[0].results_by_partition[
            0].partition_error_code == 0
        wait_for(lambda: any("timed out" in m for m in _messages(caplog, "tidelake.broker.server")),
                 what="transaction timeout line")

    joins = _messages(caplog, "tidelake.broker.groups")
    assert f"group g: member {member} joined generation 1 (protocol range, leader of 1 members)" in joins
    assert f"group g: session expired for {member}; rebalancing" in _messages(caplog, "tidelake.broker.server")
    states = _messages(caplog, "tidelake.coordinator.group")
    assert "group g: Empty -> PreparingRebalance (generation 0, 1 member)" in states, states
    assert "group g: PreparingRebalance -> CompletingRebalance (generation 1, 1 member)" in states, states
    timeouts = [m for m in _messages(caplog, "tidelake.broker.server") if "timed out" in m]
    assert timeouts == [f"transaction tx (producer id {init.producer_id}, epoch {init.producer_epoch}) timed out "
                        f"after 100 ms: aborted, producer fenced with epoch {init.producer_epoch + 1}"]


def test_connections_open_and_close_at_debug(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.transport")
    with EmbeddedBroker(tmp_path) as b:
        raw_request(b.bootstrap_servers, ApiVersionsRequest(), 0)
        wait_for(lambda: any(m.endswith("closed") for m in _messages(caplog, "tidelake.broker.transport")),
                 what="close line")
    lines = _messages(caplog, "tidelake.broker.transport")
    assert any(m.startswith("connection from ('127.0.0.1', ") and m.endswith(") opened") for m in lines), lines
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "tidelake.broker.transport")


def test_producer_fencing_is_logged_at_info(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tidelake")
    with EmbeddedBroker(tmp_path) as b:
        b.run(b.broker.create_topic, "t", 1)
        init = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1,
                                     producer_epoch=-1)
        first = raw_request(b.bootstrap_servers, init, 2)
        second = raw_request(b.bootstrap_servers, init, 2)   # a new instance: the first is now a zombie
        assert second.producer_epoch == first.producer_epoch + 1
        add = AddPartitionsToTxnRequest(v3_and_below_transactional_id="tx", v3_and_below_producer_id=first.producer_id,
                                        v3_and_below_producer_epoch=first.producer_epoch, v3_and_below_topics=[
                                            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])])
        code = raw_request(b.bootstrap_servers, add, 3).results_by_topic_v3_and_below[0].results_by_partition[
            0].partition_error_code
        assert code != 0
    fenced = [m for m in _messages(caplog, "tidelake.coordinator.transactions") if "fencing" in m]
    assert fenced == [f"transactional id tx: fencing producer {first.producer_id} at epoch {first.producer_epoch}; "
                      f"the current epoch is {second.producer_epoch}"], fenced
