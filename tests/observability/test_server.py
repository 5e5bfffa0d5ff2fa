"""The metrics listener's routes and the broker's readiness conditions, over real HTTP."""
from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from metrics_scrape import health, scrape, value
from tidelake.observability.broker_observer import BrokerObserver
from tidelake.observability.broker_stats import BrokerStats
from tidelake.observability.histogram import FastHistogram


@pytest.fixture
def observer():
    stats = BrokerStats()
    obs = BrokerObserver("127.0.0.1", 0, stats=stats, read_state=lambda: None, ping=lambda: None,
                         api_names={0: "Produce"}).start()
    try:
        yield obs, stats
    finally:
        obs.stop()


def test_broker_ready_only_once_everything_is_loaded(observer):
    obs, _stats = observer
    status, body = health(obs.url, "ready")
    assert status == 503 and body["status"] == "not ready"
    assert body["checks"]["data_dir"] == {"ok": False, "detail": "loading the data directory"}
    assert health(obs.url, "live") == (200, {"status": "live", "checks": {
        "event_loop": {"ok": True, "detail": "starting"}}})
    obs.logs_loaded.set()
    obs.coordinators_loaded.set()
    assert health(obs.url, "ready")[0] == 503  # listeners not serving yet
    obs.serving.set()
    status, body = health(obs.url, "ready")
    assert status == 200 and body["status"] == "ready"


def test_counters_before_the_state_is_loaded_and_unknown_paths(observer):
    obs, stats = observer
    stats.produced("t", 100, 3)
    stats.request(0, 0.0003)
    stats.error(0, 3)
    samples = scrape(obs.url)
    assert value(samples, "tidelake_topic_produced_messages_total", topic="t") == 3
    assert value(samples, "tidelake_request_duration_seconds_bucket", api="Produce", le="0.00025") == 0
    assert value(samples, "tidelake_request_duration_seconds_bucket", api="Produce", le="0.0005") == 1
    assert value(samples, "tidelake_request_errors_total", api="Produce", error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert not any(name == "tidelake_connections_active" for name, _ in samples)  # still loading: not read
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{obs.url}/nothing", timeout=10)
    assert e.value.code == 404


def test_histogram_buckets_are_cumulative_and_inclusive():
    h = FastHistogram((1.0, 2.0))
    for v in (0.5, 1.0, 1.5, 3.0):
        h.observe(v)
    assert h.cumulative() == [("1.0", 2), ("2.0", 3), ("+Inf", 4)]
    assert h.total == 6.0 and h.count == 4
