"""SPEC B1: "Unsupported versions get UNSUPPORTED_VERSION, never a dropped connection."

For every registered API, a request at a version the broker does not serve (below its minimum, or
above its maximum while Kafka's spec still defines it) is sent over a raw socket; the answer must be
a response decodable at that very version, carrying error 35 where that API reports errors (top
level, or per resource / topic / partition echoing the request's names), and the same connection
must then still serve ApiVersions. Only a version the spec does not define at all (no response could
be encoded for it) closes the connection — and the broker says why in its log.
"""
from __future__ import annotations

import logging
import socket
import uuid

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tidelake.broker import EmbeddedBroker
from tidelake.broker import handlers  # noqa: F401 (registers every handler before the parametrisation reads REGISTRY)
from tidelake.broker.error_response import error_response
from tidelake.broker.registry import REGISTRY
from tidelake.protocol.framing import encode_request_frame, split_response_frame
from tidelake.protocol.wire_client import WireClient

UNSUPPORTED_VERSION = 35
API_VERSIONS = 18
TOPIC_ID = uuid.UUID(int=0x1234)
INT = 7
# Per simple type, the value every field of that type gets in a sample request (strings: "<Field>-0").
SAMPLE_VALUES = {"int8": 1, "int16": 1, "int32": INT, "int64": 9, "uint16": 1, "float64": 1.0,
                 "bool": False, "uuid": TOPIC_ID, "bytes": b"", "records": b""}


def spec_max(spec) -> int:
    return min(spec.request_cls.max_version, spec.response_cls.max_version)


def sample_request(spec, version: int):
    """A request at ``version`` with every array holding one item, built from the JSON spec."""
    def build(struct, data_class):
        values = {}
        for f in struct._fields:
            if not f.for_version_q(version) or f.tagged_field_q(version):
                continue
            if f.is_struct_array():
                values[f.name] = [build(f.array_of, f.data_class)]
            elif f.is_struct():
                values[f.name] = build(f, f.data_class)
            elif f.is_array():
                values[f.name] = [f"{f._name}-0" if f.array_of.type_str == "string"
                                  else SAMPLE_VALUES[f.array_of.type_str]]
            else:
                values[f.name] = f"{f._name}-0" if f.type_str == "string" else SAMPLE_VALUES[f.type_str]
        return data_class(**values)
    return build(spec.request_cls._struct, lambda **kw: spec.request_cls(version=version, **kw))


def unsupported_defined_versions(spec) -> list[int]:
    """Versions outside what the broker serves that the spec (and so kafka-python) still defines."""
    return [v for v in range(0, spec_max(spec) + 1) if not spec.min_version <= v <= spec.max_version]


# Where each API reports the error, checked against the sample request's items (names "<Field>-0",
# ints 7, uuids TOPIC_ID). One entry per API that has unsupported-but-defined versions.
def _produce(r, v):
    assert [(t.name, p.index, p.error_code) for t in r.responses for p in t.partition_responses] == \
        [("Name-0", INT, 35)]


def _fetch(r, v):
    assert [(t.topic, p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == \
        [("Topic-0", INT, 35)]


def _list_offsets(r, v):
    assert [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == \
        [("Name-0", INT, 35)]


def _offset_commit(r, v):
    key = TOPIC_ID if v >= 10 else "Name-0"  # v10 names topics by id
    assert [(t.topic_id if v >= 10 else t.name, p.partition_index, p.error_code)
            for t in r.topics for p in t.partitions] == [(key, INT, 35)]


def _offset_fetch(r, v):
    if v >= 8:  # per group (the group-level error code covers its topics)
        assert [(g.group_id, g.error_code) for g in r.groups] == [("GroupId-0", 35)]
    else:  # v0: per partition, the request listed partition indexes as plain int32s
        assert [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == \
            [("Name-0", INT, 35)]


def _create_topics(r, v):
    assert [(t.name, t.error_code) for t in r.topics] == [("Name-0", 35)]


def _delete_topics(r, v):  # v0 asks with a plain string array of names
    assert [(t.name, t.error_code) for t in r.responses] == [("TopicNames-0", 35)]


def _top_level(r, v):
    assert r.error_code == 35


def _offset_for_leader_epoch(r, v):
    assert [(t.topic, p.partition, p.error_code) for t in r.topics for p in t.partitions] == \
        [("Topic-0", INT, 35)]


def _describe_configs(r, v):
    assert [(x.resource_type, x.resource_name, x.error_code, x.configs) for x in r.results] == \
        [(1, "ResourceName-0", 35, [])]
    assert "not supported" in r.results[0].error_message


def _describe_log_dirs(r, v):  # v0 has no top-level error and results are per log dir, not per request item
    assert [x.error_code for x in r.results] == [35]


def _share_group_describe(r, v):
    assert [(g.group_id, g.error_code) for g in r.groups] == [("GroupIds-0", 35)]


EXPECTED_ERROR_PLACES = {
    0: _produce, 1: _fetch, 2: _list_offsets, 8: _offset_commit, 9: _offset_fetch, 19: _create_topics,
    20: _delete_topics, 22: _top_level, 23: _offset_for_leader_epoch, 32: _describe_configs,
    35: _describe_log_dirs,
    # share groups: v0 was Kafka 4.0's early access; Kafka 4.1+ serve v1 on
    76: _top_level, 77: _share_group_describe, 78: _top_level, 79: _top_level,
}

UNSUPPORTED_CASES = [pytest.param(key, v, id=f"{spec.name.removesuffix('Request')}-v{v}")
                     for key, spec in sorted(REGISTRY.items()) if key != API_VERSIONS
                     for v in unsupported_defined_versions(spec)]
BEYOND_SPEC_CASES = [pytest.param(key, id=spec.name.removesuffix("Request"))
                     for key, spec in sorted(REGISTRY.items()) if key != API_VERSIONS]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("versions")) as b:
        yield b


@pytest.fixture
def client(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        yield c


def assert_serves_api_versions(client: WireClient, api_key: int) -> None:
    r = client.request(ApiVersionsRequest(), 0)
    assert r.error_code == 0
    assert api_key in {k.api_key for k in r.api_keys}


def test_every_api_with_unsupported_versions_has_an_expectation():
    with_cases = {key for key, spec in REGISTRY.items() if key != API_VERSIONS and unsupported_defined_versions(spec)}
    assert with_cases == set(EXPECTED_ERROR_PLACES)
    assert len(UNSUPPORTED_CASES) >= len(with_cases) > 0


@pytest.mark.parametrize("api_key,version", UNSUPPORTED_CASES)
def test_unsupported_version_answers_error_35_and_keeps_connection(client, api_key, version):
    spec = REGISTRY[api_key]
    r = client.request(sample_request(spec, version), version, spec.response_cls)
    assert r.version == version
    EXPECTED_ERROR_PLACES[api_key](r, version)
    assert_serves_api_versions(client, api_key)


@pytest.mark.parametrize("api_key,version", [(32, 0), (22, 6), (0, 2)])
def test_undecodable_body_at_unsupported_version_still_gets_error_35(client, api_key, version):
    spec = REGISTRY[api_key]
    flexible = spec.request_cls.flexible_version_q(version)
    cid = client.next_correlation_id()
    client.send_raw(encode_request_frame(api_key, version, cid, b"\x00", "garbage", flexible_header=flexible))
    got_cid, body = split_response_frame(client.recv_frame(),
                                         flexible_header=spec.response_cls.flexible_version_q(version))
    assert got_cid == cid
    d = spec.response_cls.decode(body, version=version).to_dict()
    assert UNSUPPORTED_VERSION in error_codes(d)
    assert_serves_api_versions(client, api_key)


def test_acks0_produce_at_unsupported_version_closes_connection(broker, client):
    """acks=0 producers read no response, so (Kafka's rule) an error is told by closing the connection."""
    spec = REGISTRY[0]
    request = sample_request(spec, 2)
    request.acks = 0
    client.send_raw(client.encode(request, 2))
    with pytest.raises(ConnectionError):
        client.recv_frame()
    with WireClient.connect(broker.bootstrap_servers) as other:
        assert_serves_api_versions(other, 0)


@pytest.mark.parametrize("api_key", BEYOND_SPEC_CASES)
def test_version_beyond_spec_closes_only_that_connection_and_logs_why(broker, client, caplog, api_key):
    spec = REGISTRY[api_key]
    version = spec_max(spec) + 1
    flexible = spec.request_cls.flexible_version_q(spec_max(spec))
    with caplog.at_level(logging.WARNING, logger="tidelake.broker"):
        client.send_raw(encode_request_frame(api_key, version, 5, b"\x00" * 8, "future", flexible_header=flexible))
        with pytest.raises((ConnectionError, socket.timeout)) as closed:
            client.recv_frame()
        assert closed.type is ConnectionError  # closed, not left hanging
    assert any(f"{spec.name} v{version} is not defined by its spec" in rec.getMessage() for rec in caplog.records)
    with WireClient.connect(broker.bootstrap_servers) as other:
        assert_serves_api_versions(other, api_key)


@pytest.mark.parametrize("version", [5, 99])
def test_api_versions_beyond_spec_gets_v0_error_and_keeps_connection(client, version):
    client.send_raw(encode_request_frame(API_VERSIONS, version, 42, b"\x00\x00\x00", "future",
                                         flexible_header=True))
    cid, body = split_response_frame(client.recv_frame(), flexible_header=False)
    assert cid == 42
    r = ApiVersionsResponse.decode(body, version=0)
    assert r.error_code == 35 and {k.api_key for k in r.api_keys} == set(REGISTRY)
    assert client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3).error_code == 0


def error_codes(d) -> list[int]:
    """Every ``*error_code`` value in a response's to_dict(), at any depth."""
    found = []
    if isinstance(d, dict):
        for k, v in d.items():
            if k.endswith("error_code"):
                found.append(v)
            else:
                found += error_codes(v)
    elif isinstance(d, list):
        for item in d:
            found += error_codes(item)
    return found


@pytest.mark.parametrize("api_key", [pytest.param(k, id=s.name.removesuffix("Request"))
                                     for k, s in sorted(REGISTRY.items()) if k != API_VERSIONS])
def test_error_response_encodes_at_every_spec_version(api_key):
    """The schema-derived error response (also used when a handler raises a KafkaApiError) is
    well-formed at every version the spec defines, with and without a decodable request."""
    spec = REGISTRY[api_key]
    for version in range(0, spec_max(spec) + 1):
        top_level = any(f._name == "ErrorCode" and f.for_version_q(version) for f in spec.response_cls._struct._fields)
        request = spec.request_cls.decode(sample_request(spec, version).encode(version=version), version=version)
        for req in (request, None):
            resp = error_response(spec, req, version, UNSUPPORTED_VERSION, "m")
            d = spec.response_cls.decode(resp.encode(version=version), version=version).to_dict()
            codes = error_codes(d)
            assert UNSUPPORTED_VERSION in codes, (spec.name, version, d)
            # no item that looks like a success (CreateTopics' tagged per-config code stays at its default)
            assert set(codes) - {0} == {UNSUPPORTED_VERSION} and (0 not in codes or api_key == 19), \
                (spec.name, version, d)
            if top_level:
                assert d["error_code"] == UNSUPPORTED_VERSION
