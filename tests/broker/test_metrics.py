"""The broker's /metrics and /health endpoints (metrics.listen), scraped over HTTP while real clients
(confluent-kafka / librdkafka) produce, consume, commit and run transactions against it."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from clients import poll_messages
from metrics_scrape import health, scrape, value
from tidelake.broker import EmbeddedBroker
from tidelake.broker.config import BrokerConfig
from tidelake.broker.config_definitions import ConfigError


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("metrics"), config={"metrics.listen": "127.0.0.1:0",
                                                                   "num.partitions": "1"}) as b:
        yield b


def produce(bootstrap: str, topic: str, n: int, size: int = 100, **conf) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v" * size)
    assert p.flush(30) == 0


def test_traffic_counters_move_with_produce_and_fetch(broker):
    url = broker.metrics_url
    before = scrape(url)
    produce(broker.bootstrap_servers, "traffic", 250)
    after_produce = scrape(url)
    assert value(after_produce, "tidelake_topic_produced_messages_total", topic="traffic") == 250
    produced_bytes = value(after_produce, "tidelake_topic_produced_bytes_total", topic="traffic")
    assert produced_bytes > 250 * 100  # the values alone are 25,000 bytes; batches add headers
    assert value(after_produce, "tidelake_requests_total", api="Produce") > value(
        before, "tidelake_requests_total", 0, api="Produce")
    assert value(after_produce, "tidelake_log_end_offset", topic="traffic", partition=0) == 250
    assert value(after_produce, "tidelake_log_size_bytes", topic="traffic", partition=0) == produced_bytes

    got = poll_messages(broker.bootstrap_servers, "traffic", [0], 250)
    assert len(got) == 250
    after_fetch = scrape(url)
    assert value(after_fetch, "tidelake_topic_fetched_messages_total", topic="traffic") >= 250
    assert value(after_fetch, "tidelake_topic_fetched_bytes_total", topic="traffic") >= produced_bytes
    # every request is timed: the histogram's count is the request count
    fetches = value(after_fetch, "tidelake_requests_total", api="Fetch")
    assert value(after_fetch, "tidelake_request_duration_seconds_count", api="Fetch") == fetches
    assert value(after_fetch, "tidelake_request_duration_seconds_bucket", api="Fetch", le="+Inf") == fetches


def test_group_lag_follows_commits_and_new_records(broker):
    url = broker.metrics_url
    produce(broker.bootstrap_servers, "lagging", 100)
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lag-group",
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("lagging", 0, 30)], asynchronous=False)
        assert value(scrape(url), "tidelake_group_lag", group="lag-group", topic="lagging", partition=0) == 70
        produce(broker.bootstrap_servers, "lagging", 10)
        samples = scrape(url)
        assert value(samples, "tidelake_group_lag", group="lag-group", topic="lagging", partition=0) == 80
        assert value(samples, "tidelake_group_committed_offset", group="lag-group", topic="lagging",
                     partition=0) == 30
        c.commit(offsets=[TopicPartition("lagging", 0, 110)], asynchronous=False)
        assert value(scrape(url), "tidelake_group_lag", group="lag-group", topic="lagging", partition=0) == 0
    finally:
        c.close()


def test_rebalances_connections_and_error_codes(broker):
    url = broker.metrics_url
    produce(broker.bootstrap_servers, "members", 5)
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rebalancing",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["members"])
        got, deadline = 0, time.monotonic() + 30
        while got < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        assert got == 5
        samples = scrape(url)
        assert value(samples, "tidelake_group_rebalances_total", group="rebalancing") >= 1
        assert value(samples, "tidelake_group_members", group="rebalancing") == 1
        assert value(samples, "tidelake_connections_active") >= 1
        # librdkafka joins without a member id first: Kafka answers MEMBER_ID_REQUIRED (KIP-394)
        assert value(samples, "tidelake_request_errors_total", api="JoinGroup", error="MEMBER_ID_REQUIRED") >= 1
    finally:
        c.close()
    assert value(scrape(url), "tidelake_group_members", group="rebalancing") == 0


def test_transaction_counters(broker):
    url = broker.metrics_url
    before = scrape(url)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "metrics-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txns", value=b"kept")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("txns", value=b"dropped")
    assert p.flush(30) == 0  # sent (and its partition added to the transaction) before the abort
    p.abort_transaction(30)
    after = scrape(url)
    for name, moved in (("begun", 2), ("committed", 1), ("aborted", 1), ("timed_out", 0)):
        total = f"tidelake_transactions_{name}_total"
        assert value(after, total) - value(before, total) == moved, name
    assert value(after, "tidelake_transactions_ongoing") == 0


def test_segments_per_partition(broker):
    broker.run(broker.broker.create_topic, "rolling", 1, {"segment.bytes": "2000"})
    produce(broker.bootstrap_servers, "rolling", 60, size=200, **{"linger.ms": 0, "batch.num.messages": 1})
    samples = scrape(broker.metrics_url)
    assert value(samples, "tidelake_log_segments", topic="rolling", partition=0) > 1
    assert value(samples, "tidelake_topic_partitions", topic="rolling") == 1


def test_health_endpoints(broker):
    status, body = health(broker.metrics_url, "live")
    assert status == 200 and body["status"] == "live"
    status, body = health(broker.metrics_url, "ready")
    assert status == 200 and body["status"] == "ready"
    assert set(body["checks"]) == {"data_dir", "coordinators", "listeners"}


def test_each_broker_has_its_own_registry_and_metrics_are_off_by_default(broker, tmp_path):
    with EmbeddedBroker(tmp_path / "second", config={"metrics.listen": "127.0.0.1:0"}) as second:
        produce(second.bootstrap_servers, "traffic", 7)
        assert value(scrape(second.metrics_url), "tidelake_topic_produced_messages_total", topic="traffic") == 7
        assert value(scrape(broker.metrics_url), "tidelake_topic_produced_messages_total", topic="traffic") == 250
    with EmbeddedBroker(tmp_path / "plain") as plain:
        assert plain.metrics_url is None
        assert plain.broker.context.metrics is None


def test_metrics_listen_is_a_typed_config():
    assert BrokerConfig.from_file(None, {"metrics.listen": "127.0.0.1:9404"}).get("metrics.listen") == "127.0.0.1:9404"
    with pytest.raises(ConfigError, match="--set: metrics.listen='9404' is not a valid value"):
        BrokerConfig.from_file(None, {"metrics.listen": "9404"})
    with pytest.raises(ConfigError, match="did you mean 'metrics.listen'"):
        BrokerConfig.from_file(None, {"metrics.listn": "127.0.0.1:9404"})
