"""DescribeTopicPartitions (API 75, KIP-966) as Kafka's DescribeTopicPartitionsRequestHandler answers it: cursor
paging, the cursor's checks (INVALID_REQUEST), the broker's max.request.partition.size.limit, invalid names,
and a page that ends before a missing topic."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeTopicPartitionsRequest as DTP

from tidelake.broker import EmbeddedBroker
from tidelake.protocol.wire_client import WireClient

INVALID_REQUEST, UNKNOWN_TOPIC, INVALID_TOPIC = 42, 3, 17


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("dtp"), config={"max.request.partition.size.limit": "3"}) as b:
        for name, n in (("dtp-a", 2), ("dtp-b", 4), ("dtp-c", 1)):
            b.run(b.broker.create_topic, name, n, {})
        yield b


@pytest.fixture
def client(broker):
    with WireClient.connect(broker.bootstrap_servers) as c:
        yield c


def describe(client, names, limit=2000, cursor=None):
    topics = None if names is None else [DTP.TopicRequest(name=n) for n in names]
    return client.request(DTP(topics=topics or [], response_partition_limit=limit, cursor=cursor), 0)


def summary(response):
    return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in response.topics]


def test_the_broker_limit_caps_a_larger_client_limit_and_pages_through_every_topic(client):
    pages, cursor = [], DTP.Cursor(topic_name="dtp-a", partition_index=0)  # after the internal topics
    for _ in range(10):
        r = describe(client, [], limit=100, cursor=cursor)
        pages.append(summary(r))
        cursor = r.next_cursor
        if cursor is None:
            break
    assert pages == [[("dtp-a", 0, [0, 1]), ("dtp-b", 0, [0])],  # 3 partitions a page: the broker's limit
                     [("dtp-b", 0, [1, 2, 3])],
                     [("dtp-c", 0, [0])]]


def test_a_cursor_topic_outside_the_requested_topics_is_an_invalid_request(client):
    r = describe(client, ["dtp-a", "dtp-c"], cursor=DTP.Cursor(topic_name="dtp-b", partition_index=0))
    assert summary(r) == [("dtp-a", INVALID_REQUEST, []), ("dtp-c", INVALID_REQUEST, [])]


def test_a_negative_cursor_partition_is_an_invalid_request(client):
    r = describe(client, ["dtp-b"], cursor=DTP.Cursor(topic_name="dtp-b", partition_index=-1))
    assert summary(r) == [("dtp-b", INVALID_REQUEST, [])]


def test_an_invalid_name_is_invalid_topic_and_a_missing_one_unknown(client):
    r = describe(client, ["dtp-c", "no such topic!", "dtp-missing"])
    assert summary(r) == [("dtp-c", 0, [0]), ("dtp-missing", UNKNOWN_TOPIC, []), ("no such topic!", INVALID_TOPIC, [])]


def test_a_full_page_ends_at_the_next_topic_even_a_missing_one(client):
    r = describe(client, ["dtp-b", "dtp-bz"], limit=2, cursor=DTP.Cursor(topic_name="dtp-b", partition_index=2))
    assert summary(r) == [("dtp-b", 0, [2, 3])]
    assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("dtp-bz", 0)
