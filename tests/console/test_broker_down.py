"""A broker that stops answering: pages say so in one line (HTTP 503), the console keeps serving, and it
logs no traceback."""
from __future__ import annotations

from playwright.sync_api import expect

from console_fixtures import ConsoleProcess
from tidelake.broker import EmbeddedBroker


def test_pages_report_a_broker_that_went_away(tmp_path, page) -> None:
    broker = EmbeddedBroker(tmp_path / "broker", port=0).start()
    bootstrap = broker.bootstrap_servers
    console = ConsoleProcess(["-b", bootstrap, "--timeout", "2", "--sample-interval", "0.5"])
    try:
        page.goto(f"{console.url}/topics")
        expect(page.locator("h1")).to_have_text("Topics")
        broker.stop()
        statuses = []
        for _ in range(20):   # the answers cached before the stop expire within seconds
            statuses.append(page.goto(f"{console.url}/topics").status)
            if statuses[-1] != 200:
                break
            page.wait_for_timeout(500)
        assert statuses[-1] == 503, statuses
        expect(page.locator("#error-message")).to_contain_text(f"no Kafka broker answered at {bootstrap}")
        assert page.goto(f"{console.url}/healthz").status == 200   # the console itself still serves
    finally:
        stderr = console.stop()
        broker.stop()
    assert "Traceback" not in stderr, stderr
