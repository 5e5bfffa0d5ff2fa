"""Bad input on the request path (issue 2 item 8): malformed frames, lying sizes, unknown API keys and
versions, truncated record batches, bad CRCs, oversize requests. The broker must answer with the
right error or close only that connection — and another client keeps producing and consuming
during and after, which a background client checks the whole time."""
from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.protocol.consumer import FetchRequest as FR
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest as PR

from tidelake.broker import EmbeddedBroker
from tidelake.broker import handlers  # noqa: F401 (registers every handler before the strategies read REGISTRY)
from tidelake.broker.registry import REGISTRY
from tidelake.protocol.framing import encode_request_frame, split_response_frame
from tidelake.protocol.records import Record, build_batch
from steady_client import SteadyClient, produce
from tidelake.protocol.wire_client import WireClient

MAX_REQUEST = 64 * 1024
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("fuzz"),
                        config={"socket.request.max.bytes": str(MAX_REQUEST)}) as b:
        b.run(b.broker.create_topic, "steady", 1, {})
        b.run(b.broker.create_topic, "fuzz", 1, {})
        steady = SteadyClient(b.bootstrap_servers)
        steady.start()
        yield b
        steady.stop_event.set()
        steady.join(30)
        assert not steady.failures, steady.failures
        assert steady.round_trips > 0
        # and after all the abuse, a fresh client still works
        with WireClient.connect(b.bootstrap_servers) as c:
            assert c.request(ApiVersionsRequest(), 0).error_code == 0


def exchange(broker, raw: bytes, *, half_close: bool = True, timeout: float = 15.0) -> tuple[list[bytes], bool]:
    """Send ``raw``; read response frames until the broker closes (or, without half-close, until one
    frame arrived). Returns (frames, closed_by_broker). A hang fails the test via the timeout."""
    frames: list[bytes] = []
    with WireClient("127.0.0.1", broker.port, timeout=timeout) as c:
        try:
            c.send_raw(raw)
        except (BrokenPipeError, ConnectionResetError):
            return frames, True  # closed while we were still sending (e.g. oversize)
        if half_close:
            c.sock.shutdown(socket.SHUT_WR)
        while True:
            try:
                frames.append(c.recv_frame())
            except ConnectionError:
                return frames, True
            except socket.timeout:
                raise AssertionError("broker neither answered nor closed the connection (hang)")
            if not half_close:
                return frames, False


def assert_alive(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        assert c.request(ApiVersionsRequest(), 0).error_code == 0


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes(broker, raw):
    frames, closed = exchange(broker, raw)
    assert closed  # EOF after garbage: the broker closes; whatever it answered were whole frames
    for f in frames:
        assert len(f) >= 4
    assert_alive(broker)


@FUZZ
@given(st.integers(-2**31, 2**31 - 1), st.binary(min_size=0, max_size=200))
def test_lying_size_prefix(broker, size, body):
    raw = struct.pack(">i", size) + body
    frames, closed = exchange(broker, raw)
    assert closed
    if size < 0 or size > MAX_REQUEST or size > len(body):
        assert frames == []  # negative, oversize or never-completed frames are never answered
    assert_alive(broker)


@FUZZ
@given(st.integers(-32768, 32767).filter(lambda k: k not in REGISTRY), st.integers(-32768, 32767),
       st.binary(max_size=100))
def test_unknown_api_key_closes_connection(broker, api_key, version, body):
    frames, closed = exchange(broker, encode_request_frame(api_key, version, 7, body, "fuzz"), half_close=False)
    assert closed and frames == []
    assert_alive(broker)


@FUZZ
@given(st.sampled_from(sorted(REGISTRY)), st.integers(-32768, 32767), st.binary(max_size=300))
def test_any_version_of_known_api_answers_or_closes(broker, api_key, version, body):
    spec = REGISTRY[api_key]
    flexible = version >= 0 and spec.request_cls.flexible_version_q(version)
    frame = encode_request_frame(api_key, version, 99, body, "fuzz", flexible_header=flexible)
    frames, closed = exchange(broker, frame, half_close=False)
    if frames:
        cid, _ = split_response_frame(frames[0], flexible_header=False)
        assert cid == 99
        if not spec.min_version <= version <= spec.max_version and api_key == 18:
            from kafka.protocol.metadata import ApiVersionsResponse
            r = ApiVersionsResponse.decode(frames[0][4:], version=0)
            assert r.error_code == 35
    else:
        assert closed
    assert_alive(broker)


@FUZZ
@given(st.data())
def test_truncated_and_corrupted_batches_get_corrupt_message(broker, data):
    values = data.draw(st.lists(st.binary(max_size=50), min_size=1, max_size=5))
    good = bytearray(build_batch([Record(i, 1000 + i, None, v) for i, v in enumerate(values)],
                                 compression=data.draw(st.sampled_from([0, 1, 2, 3, 4]))))
    mode = data.draw(st.sampled_from(["truncate", "flip", "length"]))
    if mode == "truncate":
        bad = bytes(good[:data.draw(st.integers(1, len(good) - 1))])
    elif mode == "flip":
        pos = data.draw(st.integers(17, len(good) - 1))  # CRC field or anything it covers
        good[pos] ^= data.draw(st.integers(1, 255))
        bad = bytes(good)
    else:
        struct.pack_into(">i", good, 8, data.draw(st.integers(-100, 100_000).filter(lambda n: n != len(good) - 12)))
        bad = bytes(good)
    plog = broker.broker.logs.get("fuzz", 0)
    end_before = plog.log_end_offset
    with WireClient.connect(broker.bootstrap_servers) as c:
        r = c.request(produce("fuzz", 0, bad), 9)
        code = r.responses[0].partition_responses[0].error_code
        assert code in (2, 87), code  # CORRUPT_MESSAGE (or INVALID_RECORD)
        assert plog.log_end_offset == end_before  # nothing of it was stored
        # the same connection is still usable
        ok = c.request(produce("fuzz", 0, build_batch([Record(0, 1, None, b"ok")])), 9)
        assert ok.responses[0].partition_responses[0].error_code == 0


def test_oversize_request_closes_only_that_connection(broker):
    big = produce("fuzz", 0, build_batch([Record(0, 1, None, b"x" * (MAX_REQUEST + 10))]))
    with WireClient.connect(broker.bootstrap_servers) as c:
        frames, closed = exchange(broker, c.encode(big, 9), half_close=False)
    assert closed and frames == []
    # a size prefix alone is enough to be refused: the broker does not wait for the body
    frames, closed = exchange(broker, struct.pack(">i", MAX_REQUEST + 1), half_close=False)
    assert closed and frames == []
    assert_alive(broker)


def test_valid_header_garbage_body_closes_connection(broker):
    frames, closed = exchange(broker, encode_request_frame(0, 9, 5, b"\xff" * 40, "fuzz", flexible_header=True),
                              half_close=False)
    assert closed and frames == []
    assert_alive(broker)


@FUZZ
@given(st.integers(1, 10_000), st.sampled_from([3, 7, 9, 11]))
def test_records_field_claiming_more_bytes_than_the_frame_closes_connection(broker, extra, version):
    good = build_batch([Record(0, 1, None, b"payload")])
    body = bytearray(produce("fuzz", 0, good).encode(version=version))
    # the records length sits right before the batch bytes: make it lie
    at = bytes(body).rfind(good)
    if version >= 9:  # compact bytes: unsigned varint of len+1, one or two bytes here
        body[at - 1:at] = b""  # drop the one-byte varint and write a bigger one
        n = len(good) + 1 + extra
        varint = bytearray()
        while n >= 0x80:
            varint.append((n & 0x7F) | 0x80)
            n >>= 7
        varint.append(n)
        body[at - 1:at - 1] = varint
    else:
        struct.pack_into(">i", body, at - 4, len(good) + extra)
    frame = encode_request_frame(0, version, 3, bytes(body), "fuzz", flexible_header=version >= 9)
    end_before = broker.broker.logs.get("fuzz", 0).log_end_offset
    frames, closed = exchange(broker, frame, half_close=False)
    assert closed and frames == []
    assert broker.broker.logs.get("fuzz", 0).log_end_offset == end_before
    assert_alive(broker)


@pytest.fixture(autouse=True)
def no_handler_traceback(caplog):
    """Whatever a case sends, the broker answers or closes; no exception reaches the log as a trace."""
    yield
    traced = [r for r in caplog.records if r.name.startswith("tidelake") and r.exc_info]
    assert not traced, [r.getMessage() for r in traced]


def _null_requests():
    """Requests with a null where Kafka's spec forbids one (the codec writes -1 for None)."""
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
    from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest

    oc_topic = OffsetCommitRequest.OffsetCommitRequestTopic
    return [
        ("OffsetCommit null topics", OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                                         retention_time_ms=-1, topics=None), 8, "topics"),
        ("OffsetCommit null partitions", OffsetCommitRequest(
            group_id="g", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
            topics=[oc_topic(name="fuzz", partitions=None)]), 2, "topics.partitions"),
        ("OffsetCommit null group id", OffsetCommitRequest(group_id=None, generation_id_or_member_epoch=-1,
                                                           member_id="", topics=[]), 9, "group_id"),
        ("CreateTopics null topics", CreateTopicsRequest(topics=None, timeout_ms=1000, validate_only=False), 5,
         "topics"),
        ("CreateTopics null topics (v2)", CreateTopicsRequest(topics=None, timeout_ms=1000), 2, "topics"),
        ("DeleteTopics null names", DeleteTopicsRequest(topic_names=None, timeout_ms=1000), 4, "topic_names"),
        ("DeleteTopics null topics", DeleteTopicsRequest(topics=None, timeout_ms=1000), 6, "topics"),
        ("JoinGroup null protocols", JoinGroupRequest(group_id="g", session_timeout_ms=10000,
                                                      rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                                                      protocols=None), 5, "protocols"),
        ("OffsetFetch null groups", OffsetFetchRequest(groups=None, require_stable=False), 8, "groups"),
        ("Produce null topic_data", PR(transactional_id=None, acks=1, timeout_ms=5000, topic_data=None), 9,
         "topic_data"),
        ("Produce null partition_data", PR(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            PR.TopicProduceData(name="fuzz", partition_data=None)]), 7, "topic_data.partition_data"),
        ("Fetch null topics", FR(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                 session_id=0, session_epoch=-1, topics=None, forgotten_topics_data=[], rack_id=""),
         11, "topics"),
        ("Fetch null rack", FR(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                               session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id=None),
         12, "rack_id"),
    ]


@pytest.mark.parametrize("case", _null_requests(), ids=lambda c: c[0])
def test_null_where_the_spec_forbids_it_closes_before_any_handler(broker, caplog, case):
    """Kafka's readers throw on such a null and the broker closes the connection without an answer."""
    _name, request, version, field = case
    topics_before = sorted(broker.broker.context.metadata.topics)
    with WireClient.connect(broker.bootstrap_servers) as c:
        frames, closed = exchange(broker, c.encode(request, version), half_close=False)
    assert closed and frames == []
    assert any(f"non-nullable field {field} was serialized as null" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
    assert sorted(broker.broker.context.metadata.topics) == topics_before
    assert_alive(broker)
