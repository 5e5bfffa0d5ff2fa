"""Broker APIs over real sockets with hand-crafted requests (exact versions, exact bytes)."""
from __future__ import annotations

import struct
import threading
import time

import pytest
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from tidelake.broker import EmbeddedBroker
from tidelake.protocol.framing import encode_request_frame, split_response_frame
from tidelake.protocol.records import Record, build_batch, decode_records, iter_batches
from tidelake.protocol.wire_client import WireClient

PR = ProduceRequest
FR = FetchRequest


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("wire"), config={"num.partitions": "2"}) as b:
        yield b


@pytest.fixture
def client(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        yield c


def produce_req(topic, partition, records, acks=1):
    return PR(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        PR.TopicProduceData(name=topic, partition_data=[PR.TopicProduceData.PartitionProduceData(
            index=partition, records=records)])])


def fetch_req(topic, partition, offset, *, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, pmax=1 << 20,
              isolation=0, session_id=0, session_epoch=-1):
    return FR(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
              isolation_level=isolation, session_id=session_id, session_epoch=session_epoch,
              topics=[FR.FetchTopic(topic=topic, partitions=[FR.FetchTopic.FetchPartition(
                  partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                  partition_max_bytes=pmax)])], forgotten_topics_data=[], rack_id="")


def create(broker, name, partitions=1, configs=None):
    broker.run(broker.broker.create_topic, name, partitions, configs or {})


def batch(values, ts=1_000, **kw):
    return build_batch([Record(i, ts + i, None, v) for i, v in enumerate(values)], **kw)


def test_api_versions_every_version_and_unsupported_version_gets_v0_error(client, broker):
    for v in range(0, 5):
        r = client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), v)
        assert r.error_code == 0
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert keys[0][0] <= 3 <= keys[0][1] and keys[1][0] <= 4 <= keys[1][1] and 18 in keys
    # A newer ApiVersions than served: v0 response, UNSUPPORTED_VERSION, our ranges (how clients negotiate)
    frame = encode_request_frame(18, 99, 42, b"\x00\x00\x00", "future-client", flexible_header=True)
    client.send_raw(frame)
    cid, body = split_response_frame(client.recv_frame(), flexible_header=False)
    assert cid == 42
    r = ApiVersionsResponse.decode(body, version=0)
    assert r.error_code == 35 and any(k.api_key == 0 for k in r.api_keys)


def test_unsupported_produce_version_answers_per_partition_error(client, broker):
    req = produce_req("t-unsup", 0, batch([b"x"]))
    r = client.request(req, 2)  # Produce v2 is below the served range (3+)
    assert r.responses[0].partition_responses[0].error_code == 35
    # and the connection still works
    assert client.request(ApiVersionsRequest(), 0).error_code == 0


def test_produce_then_fetch_offsets_and_bytes_are_opaque(client, broker):
    create(broker, "t-basic")
    b1, b2 = batch([b"a", b"b", b"c"]), batch([b"d"])
    r1 = client.request(produce_req("t-basic", 0, b1), 9)
    r2 = client.request(produce_req("t-basic", 0, b2, acks=-1), 9)
    p1, p2 = r1.responses[0].partition_responses[0], r2.responses[0].partition_responses[0]
    assert (p1.error_code, p1.base_offset, p2.error_code, p2.base_offset) == (0, 0, 0, 3)
    f = client.request(fetch_req("t-basic", 0, 0), 11)
    part = f.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 4 and part.log_start_offset == 0
    batches = [(h.base_offset, bytes(part.records[pos + 16:pos + h.size])) for pos, h in iter_batches(part.records)]
    # client bytes stored as sent from the magic byte on (the broker sets base offset and leader epoch,
    # both outside the CRC)
    assert batches == [(0, b1[16:]), (3, b2[16:])]
    values = [r.value for pos, h in iter_batches(part.records) for r in decode_records(part.records, pos, h)]
    assert values == [b"a", b"b", b"c", b"d"]
    # fetch in the middle of a batch returns the whole batch; at LEO returns nothing
    f = client.request(fetch_req("t-basic", 0, 1), 11)
    assert [h.base_offset for _, h in iter_batches(f.responses[0].partitions[0].records)] == [0, 3]
    f = client.request(fetch_req("t-basic", 0, 4), 11)
    assert not f.responses[0].partitions[0].records


def test_produce_acks_zero_sends_no_response_but_appends(client, broker):
    create(broker, "t-acks0")
    client.send_raw(client.encode(produce_req("t-acks0", 0, batch([b"z"]), acks=0), 9))
    # the next response on this connection belongs to the next request: nothing was sent for acks=0
    r = client.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="t-acks0", partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    assert r.topics[0].partitions[0].offset == 1


def test_produce_errors_per_partition(client, broker):
    create(broker, "t-err", configs={"max.message.bytes": "200"})
    good = batch([b"ok"])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # CRC mismatch
    cases = [("no-such-topic", 0, good, 3), ("t-err", 5, good, 3), ("t-err", 0, bytes(corrupt), 2),
             ("t-err", 0, good[:40], 2), ("t-err", 0, batch([b"x" * 500]), 10)]
    for topic, p, data, code in cases:
        r = client.request(produce_req(topic, p, data), 9)
        assert r.responses[0].partition_responses[0].error_code == code, (topic, p, code)
    r = client.request(produce_req("t-err", 0, good, acks=2), 9)
    assert r.responses[0].partition_responses[0].error_code == 21  # INVALID_REQUIRED_ACKS


def test_idempotent_duplicate_retry_acknowledged_with_original_offset(client, broker):
    create(broker, "t-idem")
    init = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
    pid = init.producer_id
    first = batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
    second = batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=2)
    r = [client.request(produce_req("t-idem", 0, b), 9).responses[0].partition_responses[0]
         for b in (first, second, first, second)]
    assert [(x.error_code, x.base_offset) for x in r] == [(0, 0), (0, 2), (0, 0), (0, 2)]
    gap = batch([b"d"], producer_id=pid, producer_epoch=0, base_sequence=7)
    x = client.request(produce_req("t-idem", 0, gap), 9).responses[0].partition_responses[0]
    assert x.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    f = client.request(fetch_req("t-idem", 0, 0), 11).responses[0].partitions[0]
    assert f.high_watermark == 3  # duplicates stored once
    # a new idempotent producer gets a new id
    assert client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1), 4).producer_id != pid


def test_transactional_init_without_coordinator_or_with_it(client, broker):
    r = client.request(InitProducerIdRequest(transactional_id="tx-1", transaction_timeout_ms=60000), 4)
    if broker.broker.context.transactions is None:
        assert r.error_code == 15  # COORDINATOR_NOT_AVAILABLE
    else:
        assert r.error_code == 0 and r.producer_id >= 0


def test_fetch_long_poll_wakes_on_append(broker):
    create(broker, "t-poll")
    with WireClient.connect(broker.bootstrap_servers) as c1, WireClient.connect(broker.bootstrap_servers) as c2:
        cid = c1.next_correlation_id()
        c1.send_raw(c1.encode(fetch_req("t-poll", 0, 0, max_wait_ms=20_000, min_bytes=1), 11, cid))
        time.sleep(0.2)  # let the fetch park (not an assertion on timing: the result is checked below)
        c2.request(produce_req("t-poll", 0, batch([b"wake"])), 9)
        r = c1.read_response(fetch_req("t-poll", 0, 0), 11, cid)
        assert r.responses[0].partitions[0].high_watermark == 1
        assert r.responses[0].partitions[0].records  # the data that woke it, not an empty timeout


def test_fetch_max_wait_returns_empty_when_nothing_arrives(client, broker):
    create(broker, "t-empty")
    r = client.request(fetch_req("t-empty", 0, 0, max_wait_ms=50, min_bytes=1), 11)
    p = r.responses[0].partitions[0]
    assert p.error_code == 0 and not p.records and p.high_watermark == 0


def test_fetch_limits_and_offset_out_of_range(client, broker):
    create(broker, "t-limits")
    for i in range(5):
        client.request(produce_req("t-limits", 0, batch([bytes([65 + i]) * 100])), 9)
    one = len(batch([b"A" * 100]))
    # per-partition limit smaller than a batch: the first batch still comes (KIP-74), only one
    r = client.request(fetch_req("t-limits", 0, 0, pmax=10), 11).responses[0].partitions[0]
    assert len(list(iter_batches(r.records))) == 1
    r = client.request(fetch_req("t-limits", 0, 0, pmax=one * 3), 11).responses[0].partitions[0]
    assert len(list(iter_batches(r.records))) == 3
    r = client.request(fetch_req("t-limits", 0, 0, max_bytes=one * 2), 11).responses[0].partitions[0]
    assert len(list(iter_batches(r.records))) == 2
    r = client.request(fetch_req("t-limits", 0, 6), 11).responses[0].partitions[0]
    assert r.error_code == 1  # OFFSET_OUT_OF_RANGE beyond LEO
    r = client.request(fetch_req("no-such", 0, 0), 11).responses[0].partitions[0]
    assert r.error_code == 3


def test_incremental_fetch_session(client, broker):
    create(broker, "t-sess", 2)
    for p in (0, 1):
        client.request(produce_req("t-sess", p, batch([b"x"])), 9)
    full = FR(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
              session_epoch=0, topics=[FR.FetchTopic(topic="t-sess", partitions=[
                  FR.FetchTopic.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20,
                                               current_leader_epoch=-1, log_start_offset=-1) for p in (0, 1)])],
              forgotten_topics_data=[], rack_id="")
    r = client.request(full, 11)
    assert r.error_code == 0 and r.session_id != 0
    assert sorted(p.partition_index for p in r.responses[0].partitions) == [0, 1]
    sid = r.session_id

    def inc(epoch, offsets):
        return FR(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=sid,
                  session_epoch=epoch, topics=[FR.FetchTopic(topic="t-sess", partitions=[
                      FR.FetchTopic.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20,
                                                   current_leader_epoch=-1, log_start_offset=-1)
                      for p, o in offsets])] if offsets else [], forgotten_topics_data=[], rack_id="")
    # incremental: both partitions moved to offset 1, nothing new anywhere -> no partitions in the response
    r = client.request(inc(1, [(0, 1), (1, 1)]), 11)
    assert r.error_code == 0 and r.session_id == sid and r.responses == []
    r = client.request(inc(2, []), 11)  # nothing changed, nothing named: still nothing
    assert r.error_code == 0 and r.responses == []
    # new data on partition 1: only it shows up, from the offset the session remembers
    client.request(produce_req("t-sess", 1, batch([b"y"])), 9)
    r = client.request(inc(3, []), 11)
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in r.responses] == [("t-sess", [1])]
    part = r.responses[0].partitions[0]
    assert part.high_watermark == 2 and [h.base_offset for _, h in iter_batches(part.records)] == [1]
    # wrong epoch / unknown session
    assert client.request(fetch_req("t-sess", 0, 1, session_id=sid, session_epoch=9), 11).error_code == 71
    assert client.request(fetch_req("t-sess", 0, 1, session_id=12345, session_epoch=1), 11).error_code == 70


def test_metadata_auto_create_and_invalid_names(client, broker):
    r = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto-made")],
                                       allow_auto_topic_creation=True), 12)
    t = r.topics[0]
    assert t.error_code == 0 and len(t.partitions) == 2  # num.partitions=2 on this broker
    assert r.brokers[0].port == broker.port and r.controller_id == broker.broker.context.node_id
    r = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="not-made")],
                                       allow_auto_topic_creation=False), 12)
    assert r.topics[0].error_code == 3
    r = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="bad name!")],
                                       allow_auto_topic_creation=True), 12)
    assert r.topics[0].error_code == 17
    r = client.request(MetadataRequest(topics=None), 4)
    assert "auto-made" in {t.name for t in r.topics}


def test_list_offsets_by_timestamp_and_specials(client, broker):
    create(broker, "t-ts")
    for i, ts in enumerate((1000, 2000, 3000)):
        client.request(produce_req("t-ts", 0, build_batch([Record(0, ts, None, b"v"), Record(1, ts + 5, None, b"w")])), 9)

    def lo(ts, v=7):
        r = client.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name="t-ts", partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=ts)])]), v)
        p = r.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp
    assert lo(-2) == (0, 0, -1)
    assert lo(-1) == (0, 6, -1)
    assert lo(1500) == (0, 2, 2000)
    assert lo(2003) == (0, 3, 2005)
    assert lo(3006) == (0, -1, -1)
    assert lo(-3) == (0, 5, 3005)


def test_describe_configs_every_config_with_source(client, broker):
    create(broker, "t-cfg", configs={"retention.ms": "12345"})
    R = DescribeConfigsRequest
    r = client.request(R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name="t-cfg",
                                                              configuration_keys=None)],
                         include_synonyms=True, include_documentation=True), 4)
    res = r.results[0]
    assert res.error_code == 0
    cfgs = {c.name: c for c in res.configs}
    for name in ("retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "cleanup.policy",
                 "max.message.bytes", "min.insync.replicas", "message.timestamp.type"):
        assert name in cfgs
    assert cfgs["retention.ms"].value == "12345" and cfgs["retention.ms"].config_source == 1
    assert cfgs["segment.bytes"].config_source == 5 and cfgs["segment.bytes"].value == "1073741824"
    assert cfgs["segment.bytes"].synonyms[0].name == "log.segment.bytes"
    r = client.request(R(resources=[R.DescribeConfigsResource(resource_type=4, resource_name=str(broker.broker.context.node_id),
                                                              configuration_keys=["num.partitions"])]), 4)
    assert [(c.name, c.value, c.config_source) for c in r.results[0].configs] == [("num.partitions", "2", 4)]
    r = client.request(R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name="nope",
                                                              configuration_keys=None)]), 4)
    assert r.results[0].error_code == 3


def test_unknown_api_key_closes_only_that_connection(broker):
    with WireClient.connect(broker.bootstrap_servers) as bad, WireClient.connect(broker.bootstrap_servers) as good:
        bad.send_raw(encode_request_frame(999, 0, 1, b"", "x"))
        with pytest.raises((ConnectionError, OSError)):
            bad.recv_frame()
        assert good.request(ApiVersionsRequest(), 0).error_code == 0


def test_pipelined_requests_answered_in_order(broker):
    create(broker, "t-pipe")
    with WireClient.connect(broker.bootstrap_servers) as c:
        cids = []
        data = b""
        for i in range(50):
            cid = c.next_correlation_id()
            cids.append(cid)
            data += c.encode(produce_req("t-pipe", 0, batch([b"%d" % i])), 9, cid)
        c.send_raw(data)
        offsets = []
        for cid in cids:
            r = c.read_response(produce_req("t-pipe", 0, b""), 9, cid)  # asserts the correlation id order
            offsets.append(r.responses[0].partition_responses[0].base_offset)
        assert offsets == list(range(50))


def test_pipelined_produce_answers_are_not_held_behind_a_parked_fetch(broker):
    """Answers to pipelined Produce requests are written together, but never wait for a Fetch that
    long-polls: the produce answer arrives while the fetch is still parked (the fetch waits up to 60 s,
    the client's socket timeout is 20 s)."""
    create(broker, "t-coalesce")
    create(broker, "t-coalesce-wait")
    with WireClient.connect(broker.bootstrap_servers, timeout=20) as c, \
            WireClient.connect(broker.bootstrap_servers) as other:
        produce_cids = [c.next_correlation_id() for _ in range(3)]
        fetch_cid = c.next_correlation_id()
        data = b"".join(c.encode(produce_req("t-coalesce", 0, batch([b"%d" % i])), 9, cid)
                        for i, cid in enumerate(produce_cids))
        data += c.encode(fetch_req("t-coalesce-wait", 0, 0, max_wait_ms=60_000, min_bytes=1), 11, fetch_cid)
        c.send_raw(data)
        offsets = [c.read_response(produce_req("t-coalesce", 0, b""), 9, cid)
                   .responses[0].partition_responses[0].base_offset for cid in produce_cids]
        assert offsets == [0, 1, 2]
        # the fetch is still parked: data on its partition wakes it
        assert other.request(produce_req("t-coalesce-wait", 0, batch([b"wake"])), 9) \
            .responses[0].partition_responses[0].error_code == 0
        part = c.read_response(fetch_req("t-coalesce-wait", 0, 0), 11, fetch_cid).responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 1 and part.records


def test_answers_before_a_bad_frame_are_sent_before_the_connection_closes(broker):
    create(broker, "t-before-bad")
    with WireClient.connect(broker.bootstrap_servers) as c:
        cids = [c.next_correlation_id() for _ in range(3)]
        data = b"".join(c.encode(produce_req("t-before-bad", 0, batch([b"%d" % i])), 9, cid)
                        for i, cid in enumerate(cids))
        c.send_raw(data + encode_request_frame(999, 0, 99, b"", "x"))  # unknown api key: close
        offsets = [c.read_response(produce_req("t-before-bad", 0, b""), 9, cid)
                   .responses[0].partition_responses[0].base_offset for cid in cids]
        assert offsets == [0, 1, 2]
        with pytest.raises((ConnectionError, OSError)):
            c.recv_frame()


def test_acks_all_with_min_insync_replicas_above_one_is_refused(client, broker):
    create(broker, "t-isr", configs={"min.insync.replicas": "2"})
    r = client.request(produce_req("t-isr", 0, batch([b"x"]), acks=-1), 9).responses[0].partition_responses[0]
    assert r.error_code == 19  # NOT_ENOUGH_REPLICAS
    r = client.request(produce_req("t-isr", 0, batch([b"x"]), acks=1), 9).responses[0].partition_responses[0]
    assert (r.error_code, r.base_offset) == (0, 0)


def test_read_committed_fetch_stops_at_lso_and_lists_aborted(client, broker):
    create(broker, "t-txn")
    init = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1), 4)
    pid = init.producer_id
    txn1 = batch([b"t1a", b"t1b"], producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
    assert client.request(produce_req("t-txn", 0, txn1), 9).responses[0].partition_responses[0].error_code == 0
    committed = client.request(fetch_req("t-txn", 0, 0, isolation=1), 11).responses[0].partitions[0]
    assert committed.last_stable_offset == 0 and not committed.records and committed.high_watermark == 2
    uncommitted = client.request(fetch_req("t-txn", 0, 0, isolation=0), 11).responses[0].partitions[0]
    assert uncommitted.records
    broker.run(lambda: broker.broker.context.partitions.append_marker("t-txn", 0, producer_id=pid, producer_epoch=0, commit=False))
    r = client.request(fetch_req("t-txn", 0, 0, isolation=1), 11).responses[0].partitions[0]
    assert r.last_stable_offset == 3 and r.records
    assert [(a.producer_id, a.first_offset) for a in r.aborted_transactions] == [(pid, 0)]


def test_incremental_alter_list_ops_broker_configs_cluster_log_dirs_producers(client, broker):
    from kafka.protocol.admin import (DescribeClusterRequest, DescribeLogDirsRequest, DescribeProducersRequest,
                                      IncrementalAlterConfigsRequest as IAC)
    create(broker, "t-iac")
    R = IAC.AlterConfigsResource

    def alter(rtype, name, ops):
        r = client.request(IAC(resources=[R(resource_type=rtype, resource_name=name, configs=[
            R.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])], validate_only=False), 1)
        return r.responses[0].error_code
    assert alter(2, "t-iac", [("cleanup.policy", 2, "compact")]) == 0  # APPEND to the default "delete"
    assert broker.broker.context.topics.get("t-iac").configs["cleanup.policy"] == "delete,compact"
    assert alter(2, "t-iac", [("cleanup.policy", 3, "delete")]) == 0  # SUBTRACT
    assert broker.broker.context.topics.get("t-iac").configs["cleanup.policy"] == "compact"
    assert alter(2, "t-iac", [("retention.ms", 2, "5")]) == 40  # APPEND on a non-list: INVALID_CONFIG
    assert alter(2, "t-iac", [("no.such", 0, "5")]) == 40
    assert alter(4, str(broker.broker.context.node_id), [("log.retention.bytes", 0, "123456")]) == 0
    assert broker.broker.context.config.get("log.retention.bytes") == "123456"
    assert alter(4, str(broker.broker.context.node_id), [("node.id", 0, "7")]) == 40  # read-only
    assert alter(4, str(broker.broker.context.node_id), [("log.retention.bytes", 1, None)]) == 0
    dc = client.request(DescribeClusterRequest(include_cluster_authorized_operations=False), 1)
    assert dc.error_code == 0 and [b.port for b in dc.brokers] == [broker.port]
    ld = client.request(DescribeLogDirsRequest(topics=None), 4)
    assert ld.results[0].error_code == 0 and any(t.name == "t-iac" for t in ld.results[0].topics)
    create(broker, "t-prod")
    pid = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1), 4).producer_id
    client.request(produce_req("t-prod", 0, batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)), 9)
    dp = client.request(DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
        name="t-prod", partition_indexes=[0])]), 0)
    active = dp.topics[0].partitions[0].active_producers
    assert [(a.producer_id, a.producer_epoch, a.last_sequence) for a in active] == [(pid, 0, 1)]


def test_admin_validate_only_bad_configs_assignments_and_topic_ids(client, broker):
    from kafka.protocol.admin import (CreatePartitionsRequest as CPR, CreateTopicsRequest as CTR,
                                      DeleteTopicsRequest as DTR)
    T = CTR.CreatableTopic

    def create_topics(topics, validate_only=False):
        return {t.name: t for t in client.request(CTR(topics=topics, timeout_ms=1000, validate_only=validate_only), 7).topics}
    r = create_topics([T(name="v-only", num_partitions=3, replication_factor=1, assignments=[], configs=[])], True)
    assert r["v-only"].error_code == 0 and r["v-only"].num_partitions == 3 and broker.broker.context.topics.get("v-only") is None
    r = create_topics([
        T(name="bad-cfg", num_partitions=1, replication_factor=1, assignments=[],
          configs=[T.CreatableTopicConfig(name="retention.ms", value="soon")]),
        T(name="bad-name?", num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        T(name="zero-parts", num_partitions=0, replication_factor=1, assignments=[], configs=[]),
        T(name="assigned", num_partitions=-1, replication_factor=-1, configs=[],
          assignments=[T.CreatableReplicaAssignment(partition_index=i, broker_ids=[broker.broker.context.node_id])
                       for i in range(2)]),
        T(name="defaults", num_partitions=-1, replication_factor=-1, assignments=[], configs=[])])
    assert (r["bad-cfg"].error_code, r["bad-name?"].error_code, r["zero-parts"].error_code) == (40, 17, 37)
    assert r["assigned"].error_code == 0 and r["assigned"].num_partitions == 2
    assert r["defaults"].error_code == 0 and r["defaults"].num_partitions == 2  # num.partitions of this broker
    assert r["defaults"].topic_id == broker.broker.context.topics.get("defaults").topic_id
    cp = client.request(CPR(topics=[CPR.CreatePartitionsTopic(name="defaults", count=5, assignments=None)],
                            timeout_ms=1000, validate_only=True), 3)
    assert cp.results[0].error_code == 0 and broker.broker.context.topics.get("defaults").partitions == 2
    # Metadata by topic id (v10+), DeleteTopics by topic id (v6)
    tid = broker.broker.context.topics.get("defaults").topic_id
    md = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=tid)],
                                        allow_auto_topic_creation=False), 12)
    assert md.topics[0].name == "defaults" and md.topics[0].error_code == 0
    dt = client.request(DTR(topics=[DTR.DeleteTopicState(name=None, topic_id=tid)], timeout_ms=1000), 6)
    assert dt.responses[0].error_code == 0 and dt.responses[0].name == "defaults"
    assert broker.broker.context.topics.get("defaults") is None
    dt = client.request(DTR(topics=[DTR.DeleteTopicState(name=None, topic_id=tid)], timeout_ms=1000), 6)
    assert dt.responses[0].error_code == 100  # UNKNOWN_TOPIC_ID


def test_acks_zero_error_closes_the_connection(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        c.send_raw(c.encode(produce_req("no-such-topic-acks0", 0, batch([b"x"]), acks=0), 9))
        with pytest.raises((ConnectionError, OSError)):
            c.recv_frame()


def test_describe_topic_partitions_pages_with_a_cursor(client, broker):
    from kafka.protocol.admin import DescribeTopicPartitionsRequest as DTP
    create(broker, "dtp-a", 3)
    create(broker, "dtp-b", 2)
    seen, cursor = [], None
    for _ in range(10):
        r = client.request(DTP(topics=[DTP.TopicRequest(name="dtp-b"), DTP.TopicRequest(name="dtp-a"),
                                       DTP.TopicRequest(name="dtp-none")],
                               response_partition_limit=2, cursor=cursor), 0)
        seen += [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in r.topics]
        cursor = r.next_cursor
        if cursor is None:
            break
    flat = [(n, p) for n, e, ps in seen if e == 0 for p in ps]
    assert flat == [("dtp-a", 0), ("dtp-a", 1), ("dtp-a", 2), ("dtp-b", 0), ("dtp-b", 1)]
    assert ("dtp-none", 3, []) in seen


def test_clients_cannot_produce_to_internal_topics(client, broker):
    broker.run(lambda: broker.broker.create_topic("__internal_x", 1, {}, internal=True))
    r = client.request(produce_req("__internal_x", 0, batch([b"x"])), 9).responses[0].partition_responses[0]
    assert r.error_code == 17
    broker.run(broker.broker.context.partitions.append, "__internal_x", 0, batch([b"by the coordinator"]))  # the broker itself may
    assert broker.broker.logs.get("__internal_x", 0).log_end_offset == 1


def test_list_offsets_and_delete_records_answer_each_partition_on_its_own(client, broker):
    """One request naming a good partition, a missing one and a bad offset: each gets its own answer."""
    from kafka.protocol.admin import DeleteRecordsRequest as DR
    LR = ListOffsetsRequest
    create(broker, "t-each", 2)
    client.request(produce_req("t-each", 0, batch([b"a", b"b", b"c"])), 9)
    r = client.request(LR(replica_id=-1, isolation_level=0, topics=[LR.ListOffsetsTopic(name="t-each", partitions=[
        LR.ListOffsetsTopic.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=ts)
        for p, ts in ((0, -1), (7, -1), (1, -9))])]), 7)
    got = {p.partition_index: (p.error_code, p.offset) for p in r.topics[0].partitions}
    assert got == {0: (0, 3), 7: (3, -1), 1: (42, -1)}  # latest; UNKNOWN_TOPIC_OR_PARTITION; INVALID_REQUEST
    r = client.request(DR(timeout_ms=5000, topics=[DR.DeleteRecordsTopic(name="t-each", partitions=[
        DR.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=o)
        for p, o in ((0, 2), (7, 0), (1, 5))])]), 2)
    got = {p.partition_index: (p.error_code, p.low_watermark) for p in r.topics[0].partitions}
    assert got == {0: (0, 2), 7: (3, -1), 1: (1, -1)}  # moved; unknown; OFFSET_OUT_OF_RANGE


def test_offset_for_leader_epoch_per_partition(client, broker):
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest as O
    create(broker, "t-epoch", 1)
    client.request(produce_req("t-epoch", 0, batch([b"a", b"b"])), 9)
    r = client.request(O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic="t-epoch", partitions=[
        O.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=p, current_leader_epoch=-1, leader_epoch=e)
        for p, e in ((0, 0), (0, 3), (9, 0))])]), 4)
    got = [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in r.topics[0].partitions]
    # epoch 0 ends at the log end; a later epoch is unknown here; partition 9 does not exist
    assert got == [(0, 0, 0, 2), (0, 0, -1, -1), (9, 3, -1, -1)]


def test_offset_for_leader_epoch_answers_from_the_leader_epoch_cache(client, broker):
    """Batches written in leader epochs 0, 2 and 5: each epoch ends where the next one starts, the
    latest at the log end; an epoch between two known ones belongs to the older; after DeleteRecords
    an epoch older than every cached one ends at the first cached start (Kafka's answers)."""
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest as O
    create(broker, "t-epochs", 1)
    for values, epoch in (([b"a", b"b"], 0), ([b"c", b"d", b"e"], 2), ([b"f"], 5)):
        broker.run(lambda: broker.broker.context.partitions.append("t-epochs", 0, batch(values), leader_epoch=epoch))

    def ask(*epochs):
        r = client.request(O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic="t-epochs", partitions=[
            O.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=e)
            for e in epochs])]), 4)
        assert all(p.error_code == 0 for p in r.topics[0].partitions)
        return [(p.leader_epoch, p.end_offset) for p in r.topics[0].partitions]
    assert ask(0, 1, 2, 3, 4, 5, 6, -1) == [(0, 2), (0, 2), (2, 5), (2, 5), (2, 5), (5, 6), (-1, -1), (-1, -1)]
    broker.run(lambda: broker.broker.logs.get("t-epochs", 0).delete_records_before(3))
    assert ask(0, 1, 2, 5) == [(0, 3), (1, 3), (2, 5), (5, 6)]


def test_produce_record_errors_name_each_keyless_record_of_a_compacted_topic(client, broker):
    """KIP-467 on the wire: INVALID_RECORD, one record error per keyless record with its index in
    the request's records (across batches) and Kafka's message; older versions get the code alone."""
    create(broker, "t-compact-keys", 1, {"cleanup.policy": "compact"})
    keyed = build_batch([Record(0, 1, b"a", b"1"), Record(1, 1, None, b"2")])
    second = build_batch([Record(0, 1, None, None), Record(1, 1, b"b", b"3")], compression=1)
    r = client.request(produce_req("t-compact-keys", 0, keyed + second), 9).responses[0].partition_responses[0]
    message = "Compacted topic cannot accept message without key in topic partition t-compact-keys-0."
    assert r.error_code == 87 and r.base_offset == -1
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [(1, message), (2, message)]
    assert "2 record errors" in r.error_message
    r = client.request(produce_req("t-compact-keys", 0, keyed), 7).responses[0].partition_responses[0]
    assert r.error_code == 87
    assert broker.broker.logs.get("t-compact-keys", 0).log_end_offset == 0
