"""Consumer groups of both kinds on the console: each described with the request its kind answers, so the
console's own page views and samples cause no error in the broker's request metrics."""
from __future__ import annotations

import time

from confluent_kafka import Consumer
from playwright.sync_api import expect

from console_fixtures import GROUP, PARTITIONS, TOPIC
from metrics_scrape import scrape


def _member(bootstrap: str, group: str, protocol: str) -> Consumer:
    """The group's one member, subscribed, once it owns every partition (polled until it does: a KIP-848
    assignment may arrive in steps)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                  "enable.auto.commit": False, "auto.offset.reset": "latest"})
    c.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    while len(c.assignment()) < PARTITIONS and time.monotonic() < deadline:
        c.poll(0.2)
    assert len(c.assignment()) == PARTITIONS, f"{group}: assigned {c.assignment()} after 60 s"
    return c


def _group_errors(broker) -> dict:
    return {labels: n for (name, labels), n in scrape(broker.metrics_url).items()
            if name == "tidelake_request_errors_total" and dict(labels)["api"] in ("ConsumerGroupDescribe",
                                                                                   "DescribeGroups")}


def test_each_kind_of_group_is_described_by_its_own_request(broker, console, data, page) -> None:
    """Before: librdkafka's describe sent ConsumerGroupDescribe for every group, and Kafka (like tidelake's
    broker) answers GROUP_ID_NOT_FOUND for a classic group: every view and every sample was a request error."""
    members = [_member(data.bootstrap, "live-classic", "classic"), _member(data.bootstrap, "live-consumer", "consumer")]
    try:
        for group, kind, member_count in (("live-classic", "CLASSIC", 1), ("live-consumer", "CONSUMER", 1),
                                          (GROUP, "CLASSIC", 0)):
            page.goto(f"{console.url}/groups/{group}")
            expect(page.locator("#group-state")).to_have_text("STABLE" if member_count else "EMPTY")
            expect(page.locator("p", has=page.locator("#group-state"))).to_contain_text(kind)
            if member_count:
                assigned = page.locator("#members tr").nth(1).locator("td").nth(3)
                expect(assigned).to_have_text(", ".join(f"{TOPIC}-{p}" for p in range(PARTITIONS)))
        page.goto(f"{console.url}/groups")
        expect(page.locator("#groups tr[data-group='live-consumer']")).to_contain_text("CONSUMER")
    finally:
        for m in members:
            m.close()
    assert _group_errors(broker) == {}


def test_members_table_follows_the_group_without_a_reload(broker, console, data, page) -> None:
    """The members table refreshes as the state does: a page opened before (or during) a rebalance shows the
    assignment once the group is stable, not the members as they were when it was opened."""
    member = _member(data.bootstrap, "late-classic", "classic")
    member.close()  # the group now exists, empty
    page.goto(f"{console.url}/groups/late-classic")
    expect(page.locator("#members")).to_contain_text("no active members")
    member = _member(data.bootstrap, "late-classic", "classic")
    try:
        assigned = page.locator("#members tr").nth(1).locator("td").nth(3)
        expect(assigned).to_have_text(", ".join(f"{TOPIC}-{p}" for p in range(PARTITIONS)))
    finally:
        member.close()
