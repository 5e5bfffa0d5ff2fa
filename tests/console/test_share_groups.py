"""Share groups (KIP-932) on the console: listed with their type, and a group's page shows its members and its
share-partitions' start offsets and lag (librdkafka's admin API neither lists nor describes them)."""
from __future__ import annotations

import re
import time

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
import pytest
from playwright.sync_api import expect

from console_fixtures import console_process

SHARE_TOPIC = "console-queue"
SHARE_GROUP = "console-share"
IDLE_SHARE_GROUP = "console-share-idle"
SHARE_CLIENT = "console-share-reader"
SHARE_RECORDS = 6
DEADLINE_S = 60
POSITIVE_INT = re.compile(r"^[1-9]\d*$")


@pytest.fixture(scope="module")
def queue(data) -> str:
    """SHARE_TOPIC (one partition) with SHARE_RECORDS records, which the share groups read from the earliest."""
    bootstrap = data.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(SHARE_TOPIC, 1, 1)])[SHARE_TOPIC].result(30)
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for group in (SHARE_GROUP, IDLE_SHARE_GROUP):
        for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                 incremental_configs=[earliest])]).values():
            f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(SHARE_RECORDS):
        producer.produce(SHARE_TOPIC, value=b"job-%d" % i, partition=0)
    assert producer.flush(30) == 0
    return bootstrap


def _reader(bootstrap: str, group: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": SHARE_CLIENT})
    consumer.subscribe([SHARE_TOPIC])
    return consumer


def _read_all(consumer: ShareConsumer) -> list[int]:
    """Poll (each record acknowledged as accepted when the next poll or commit comes) until every record came."""
    offsets: set[int] = set()
    deadline = time.monotonic() + DEADLINE_S
    while len(offsets) < SHARE_RECORDS:
        assert time.monotonic() < deadline, f"{SHARE_GROUP} read only {sorted(offsets)} in {DEADLINE_S} s"
        offsets |= {m.offset() for m in consumer.poll(0.3) if m.error() is None}
    consumer.commit_sync(10)
    return sorted(offsets)


def test_a_share_group_is_listed_with_its_members_start_offsets_and_lag(console, queue, page) -> None:
    """Before: /groups listed classic and consumer groups only, and /groups/<share group> was a 404."""
    consumer = _reader(queue, SHARE_GROUP)
    try:
        assert _read_all(consumer) == list(range(SHARE_RECORDS))
        page.goto(f"{console.url}/groups/{SHARE_GROUP}")
        expect(page.locator("h1")).to_have_text(f"Share group {SHARE_GROUP}")
        expect(page.locator("#group-state")).to_have_text("STABLE")
        member = page.locator("#members tr").nth(1).locator("td")
        expect(member.nth(0)).to_have_text(SHARE_CLIENT)
        expect(member.nth(3)).to_have_text(f"{SHARE_TOPIC}-0")
        expect(member.nth(4)).to_have_text(POSITIVE_INT)
        # every record acknowledged: the share-partition starts after the last one, nothing left to read
        partition = page.locator(f"#lag tr[data-topic='{SHARE_TOPIC}'][data-partition='0']")
        expect(partition.locator("td.start-offset")).to_have_text(str(SHARE_RECORDS))
        expect(partition.locator("td.lag")).to_have_text("0")
        expect(partition.locator("td").nth(5)).to_have_text(SHARE_CLIENT)
        # (after the group's page: the console's list, cached up to 2 s, was asked again for the group it lacked)
        page.goto(f"{console.url}/groups")
        row = page.locator(f"#groups tr[data-group='{SHARE_GROUP}']")
        expect(row.locator("td").nth(2)).to_have_text("SHARE")
        expect(row.locator("td").nth(1)).to_have_text("STABLE")
    finally:
        consumer.close()
    # the member gone: the group is empty, and its start offset stays
    page.goto(f"{console.url}/groups/{SHARE_GROUP}")
    expect(page.locator("#members")).to_contain_text("no active members")
    expect(page.locator("#group-state")).to_have_text("EMPTY")
    expect(page.locator(f"#lag tr[data-topic='{SHARE_TOPIC}'] td.start-offset")).to_have_text(str(SHARE_RECORDS))



def test_a_share_group_has_no_reset_action(data, queue, users_file, operator_page) -> None:
    """Committed offsets are not a share group's: the console offers no reset for one and refuses a hand-made
    request (before: the confirmation page offered to commit offsets the group would never read)."""
    consumer = _reader(queue, IDLE_SHARE_GROUP)
    try:
        _read_all(consumer)
    finally:
        consumer.close()
    page = operator_page
    with console_process(data, "--allow-actions", "--users-file", str(users_file)) as actions_console:
        page.goto(f"{actions_console.url}/groups/{IDLE_SHARE_GROUP}")
        expect(page.locator(f"#lag tr[data-topic='{SHARE_TOPIC}'] td.start-offset")).to_have_text(str(SHARE_RECORDS))
        expect(page.locator("a.button")).to_have_count(0)
        answer = page.goto(f"{actions_console.url}/actions/reset-offsets?group={IDLE_SHARE_GROUP}"
                           f"&topic={SHARE_TOPIC}&to=earliest")
        assert answer is not None and answer.status == 400
        expect(page.locator("main")).to_contain_text("is a share group")
