"""The hand-written hot-path codecs are byte-identical to kafka-python's generated ones."""
from __future__ import annotations

import uuid

from hypothesis import given, settings, strategies as st
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from tidelake.protocol.fast import decode_produce_request, encode_fetch_response, encode_produce_response

names = st.text(alphabet="abcxyz-._0123456789", min_size=1, max_size=12)
uuids = st.uuids()
i16 = st.integers(-1, 120)
i64 = st.integers(-1, 2**40)
msg = st.none() | st.text(max_size=20)


@given(st.integers(3, 13), st.none() | st.text(max_size=10), st.sampled_from([0, 1, -1]),
       st.lists(st.tuples(names, uuids, st.lists(st.tuples(st.integers(0, 100), st.none() | st.binary(max_size=50)),
                                                  max_size=3)), max_size=3))
@settings(max_examples=300, deadline=None)
def test_produce_request_decode_matches(version, txn, acks, topics):
    req = ProduceRequest(transactional_id=txn, acks=acks, timeout_ms=1234, topic_data=[
        ProduceRequest.TopicProduceData(name=n, topic_id=tid, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=r) for i, r in parts])
        for n, tid, parts in topics])
    body = bytes(req.encode(version=version))
    fast = decode_produce_request(body, 0, version)
    ref = ProduceRequest.decode(body, version=version)
    assert (fast.transactional_id, fast.acks, fast.timeout_ms) == (ref.transactional_id, ref.acks, ref.timeout_ms)
    got = [((t.name if version < 13 else t.topic_id),
            [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
           for t in fast.topic_data]
    want = [((t.name if version < 13 else t.topic_id),
             [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in ref.topic_data]
    assert got == want


@given(st.integers(3, 13), st.lists(st.tuples(names, uuids, st.lists(
    st.tuples(st.integers(0, 100), i16, i64, i64, i64, msg), max_size=3)), max_size=3), st.integers(0, 100))
@settings(max_examples=300, deadline=None)
def test_produce_response_encode_matches(version, topics, throttle):
    PR = ProduceResponse.TopicProduceResponse
    ref = ProduceResponse(throttle_time_ms=throttle, responses=[
        PR(name=n, topic_id=tid, partition_responses=[PR.PartitionProduceResponse(
            index=i, error_code=e, base_offset=b, log_append_time_ms=a, log_start_offset=s, record_errors=[],
            error_message=m) for i, e, b, a, s, m in parts]) for n, tid, parts in topics])
    assert encode_produce_response(version, topics, throttle) == bytes(ref.encode(version=version))


aborted = st.none() | st.lists(st.tuples(i64, i64), max_size=3)


@given(st.integers(4, 17), i16, st.integers(0, 2**31 - 1), st.lists(st.tuples(names, uuids, st.lists(
    st.tuples(st.integers(0, 100), i16, i64, i64, i64, aborted, st.binary(max_size=40)), max_size=3)), max_size=3))
@settings(max_examples=300, deadline=None)
def test_fetch_response_encode_matches(version, error, session, topics):
    FR = FetchResponse.FetchableTopicResponse
    P = FR.PartitionData
    ref = FetchResponse(throttle_time_ms=0, error_code=error, session_id=session, responses=[
        FR(topic=n, topic_id=tid, partitions=[P(
            partition_index=i, error_code=e, high_watermark=h, last_stable_offset=l, log_start_offset=s,
            aborted_transactions=None if ab is None else [P.AbortedTransaction(producer_id=a, first_offset=b)
                                                          for a, b in ab],
            preferred_read_replica=-1, records=r) for i, e, h, l, s, ab, r in parts]) for n, tid, parts in topics])
    fast = b"".join(bytes(c) for c in encode_fetch_response(version, error, session, topics))
    assert fast == bytes(ref.encode(version=version))
