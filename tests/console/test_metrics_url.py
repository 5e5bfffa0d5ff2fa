"""--metrics-url: the console scrapes a Prometheus endpoint (prometheus_client's own HTTP exporter here) and
charts each metric family, counters as rates."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from conftest import free_port
from console_fixtures import console_process


@pytest.fixture
def exporter():
    registry = CollectorRegistry()
    requests = Counter("tl_test_requests", "Requests handled", ["api"], registry=registry)
    connections = Gauge("tl_test_connections", "Open connections", registry=registry)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics", requests, connections
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_metrics_of_the_endpoint_are_charted(data, page, exporter) -> None:
    url, requests, connections = exporter
    requests.labels("produce").inc(10)
    requests.labels("fetch").inc(5)
    connections.set(7)
    with console_process(data, "--metrics-url", url) as c:
        page.goto(f"{c.url}/metrics")
        gauge = page.locator("section[data-metric='tl_test_connections']")
        counter = page.locator("section[data-metric='tl_test_requests']")
        expect(gauge).to_contain_text("Open connections")
        expect(counter).to_contain_text("counter, per second")
        # the chart boxes refresh themselves; the gauge's line shows its value, the counter's line appears
        # once two samples give a rate
        expect(gauge.locator("polyline")).to_have_attribute("data-last", "7")
        connections.set(3)
        expect(gauge.locator("polyline")).to_have_attribute("data-last", "3")
        # a labelled family: a line per series (not one line summing them), named by its labels
        expect(counter.locator("polyline")).to_have_count(2)
        expect(counter.locator("polyline[data-label='api=produce /s']")).to_have_count(1)
        expect(counter.locator("polyline[data-label='api=fetch /s']")).to_have_count(1)
        expect(counter).to_contain_text("2 series, 15 in all")


def test_a_family_with_many_series_charts_its_largest(data, page, exporter) -> None:
    url, requests, _ = exporter
    for i in range(10):
        requests.labels(f"api{i}").inc(i + 1)
    with console_process(data, "--metrics-url", url) as c:
        page.goto(f"{c.url}/metrics")
        counter = page.locator("section[data-metric='tl_test_requests']")
        expect(counter).to_contain_text("the 6 largest of 10 series")
        expect(counter.locator("polyline")).to_have_count(6)
        for i in range(4, 10):
            expect(counter.locator(f"polyline[data-label='api=api{i} /s']")).to_have_count(1)


def test_an_unreachable_metrics_url_is_reported_on_the_page(data, page) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    with console_process(data, "--metrics-url", url) as c:
        page.goto(f"{c.url}/metrics")
        expect(page.locator("p.muted .error")).to_contain_text(f"--metrics-url {url}")
