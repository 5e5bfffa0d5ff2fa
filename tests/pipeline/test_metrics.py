"""The pipeline's /metrics and /health endpoints (metrics.listen), scraped over HTTP while it runs with
real Spark against tidelake's broker: counters move with traffic, freshness and lag are reported, the
sink table's files and versions are exposed, and the listener is gone when the run ends."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from metrics_scrape import health, scrape, value
from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.broker import EmbeddedBroker
from tidelake.spark.runner import Pipeline

pytestmark = pytest.mark.spark

PARTITIONS = 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b.bootstrap_servers


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % PARTITIONS)
    assert p.flush(30) == 0


def rows(ids) -> list[bytes]:
    return [json.dumps({"id": i, "amount": i * 10}).encode() for i in ids]


def wait_for(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_pipeline_metrics_move_with_traffic(spark, broker, tmp_path):  # noqa: F811
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic("pm", PARTITIONS, 1), NewTopic("pm-dlq", 1, 1)]).values():
        f.result(30)
    produce(broker, "pm", rows(range(40)) + [b"not json"])
    config = {"source": {"bootstrap_servers": broker, "topic": "pm", "group_id": "g-pm", "batch_interval": 0.5},
              "sink": {"table": str(tmp_path / "table"), "format": "json", "primary_key": ["id"],
                       "schema": "id long, amount long", "buckets": 2},
              "on_error": "dead-letter", "dead_letter_topic": "pm-dlq",
              "metrics": {"listen": "127.0.0.1:0", "ready_intervals": 1000}}
    p = Pipeline(config, spark=spark)
    failure: list[BaseException] = []

    def run():
        try:
            p.run()
        except BaseException as e:  # reported by the test below
            failure.append(e)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        url = wait_for(lambda: p.metrics_url or failure, "the metrics listener")
        assert not failure, failure
        app = p.config.app_id
        samples = wait_for(lambda: (s := scrape(url)) and value(s, "tidelake_pipeline_records_total", 0,
                                                                 pipeline=app) >= 41 and s, "the first batch")
        assert value(samples, "tidelake_pipeline_records_total", pipeline=app) == 41
        assert value(samples, "tidelake_pipeline_upserts_total", pipeline=app) == 40
        assert value(samples, "tidelake_pipeline_dead_lettered_records_total", pipeline=app) == 1
        batches = value(samples, "tidelake_pipeline_batches_total", pipeline=app)
        assert batches >= 1
        assert value(samples, "tidelake_pipeline_batch_duration_seconds_count", pipeline=app) == batches
        assert value(samples, "tidelake_pipeline_freshness_seconds_count", pipeline=app) == batches
        assert value(samples, "tidelake_pipeline_last_batch_oldest_record_age_seconds", pipeline=app) >= \
            value(samples, "tidelake_pipeline_last_batch_newest_record_age_seconds", pipeline=app) >= 0
        for partition in range(PARTITIONS):
            assert value(samples, "tidelake_pipeline_lag_records", pipeline=app, topic="pm",
                         partition=partition) == 0
        table = "table"
        version = value(samples, "tidelake_table_version", table=table)
        assert version >= 1
        files = sum(v for (name, labels), v in samples.items() if name == "tidelake_table_files")
        assert files >= 1
        assert value(samples, "tidelake_table_commit_conflicts_total", table=table) == 0
        status, body = health(url, "ready")
        assert status == 200 and body["status"] == "ready"

        produce(broker, "pm", rows(range(40, 70)))
        samples = wait_for(lambda: (s := scrape(url)) and value(s, "tidelake_pipeline_records_total",
                                                                 pipeline=app) >= 71 and s, "the new records")
        assert value(samples, "tidelake_pipeline_records_total", pipeline=app) == 71
        assert value(samples, "tidelake_pipeline_upserts_total", pipeline=app) == 70
        assert value(samples, "tidelake_table_version", table=table) > version
    finally:
        p.stop()
        thread.join(120)
    assert not thread.is_alive() and not failure, failure
    with pytest.raises(urllib.error.URLError):  # the listener lives as long as the run
        urllib.request.urlopen(f"{url}/health/live", timeout=5)
