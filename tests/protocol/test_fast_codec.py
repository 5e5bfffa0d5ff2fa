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


@given(st.integers(4, 18), i16, st.integers(0, 2**31 - 1), st.lists(st.tuples(names, uuids, st.lists(
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


@given(st.integers(4, 18), st.integers(-1, 5), st.integers(0, 1000), st.integers(0, 10**6), st.integers(0, 10**7),
       st.sampled_from([0, 1]), st.integers(0, 2**31 - 1), st.integers(-1, 50),
       st.lists(st.tuples(names, uuids, st.lists(st.tuples(st.integers(0, 50), st.integers(-1, 9), i64, i64,
                                                           st.integers(0, 2**20)), max_size=3)), max_size=3),
       st.lists(st.tuples(names, uuids, st.lists(st.integers(0, 50), max_size=3)), max_size=2),
       st.text(max_size=5))
@settings(max_examples=300, deadline=None)
def test_fetch_request_decode_matches(version, replica, wait, minb, maxb, iso, sid, sepoch, topics, forgotten, rack):
    from kafka.protocol.consumer import FetchRequest as FR

    from tidelake.protocol.fast import decode_fetch_request
    req = FR(replica_id=replica, max_wait_ms=wait, min_bytes=minb, max_bytes=maxb, isolation_level=iso,
             session_id=sid, session_epoch=sepoch, rack_id=rack,
             topics=[FR.FetchTopic(topic=n, topic_id=tid, partitions=[FR.FetchTopic.FetchPartition(
                 partition=p, current_leader_epoch=e, fetch_offset=o, log_start_offset=ls, partition_max_bytes=m)
                 for p, e, o, ls, m in parts]) for n, tid, parts in topics],
             forgotten_topics_data=[FR.ForgottenTopic(topic=n, topic_id=tid, partitions=ps) for n, tid, ps in forgotten])
    body = bytes(req.encode(version=version))
    fast = decode_fetch_request(body, 0, version)
    ref = FR.decode(body, version=version)
    for attr in ("max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "session_id", "session_epoch"):
        assert getattr(fast, attr) == getattr(ref, attr), attr
    if version < 15:
        assert fast.replica_id == ref.replica_id
    key = (lambda t: t.topic_id) if version >= 13 else (lambda t: t.topic)
    assert [(key(t), [(p.partition, p.fetch_offset, p.partition_max_bytes,
                       p.current_leader_epoch if version >= 9 else -1, p.log_start_offset if version >= 5 else -1)
                      for p in t.partitions]) for t in fast.topics] == \
        [(key(t), [(p.partition, p.fetch_offset, p.partition_max_bytes,
                    p.current_leader_epoch if version >= 9 else -1, p.log_start_offset if version >= 5 else -1)
                   for p in t.partitions]) for t in ref.topics]
    if version >= 7:
        assert [(key(t), list(t.partitions)) for t in fast.forgotten_topics_data] == \
            [(key(t), list(t.partitions)) for t in ref.forgotten_topics_data]


@given(st.binary(max_size=400), st.integers(3, 18))
@settings(max_examples=500, deadline=None)
def test_fast_decoders_reject_garbage_with_decode_error_only(data, version):
    from tidelake.protocol.fast import DecodeError, decode_fetch_request
    for decode, lo, hi in ((decode_produce_request, 3, 13), (decode_fetch_request, 4, 18)):
        if lo <= version <= hi:
            try:
                decode(data, 0, version)
            except DecodeError:
                pass
