"""Actions of a console started with --allow-actions: each asks for confirmation, then changes the table or the
group; a form without this console's token is refused."""
from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition
from playwright.sync_api import expect

from console_fixtures import PARTITIONS, RECORDS, TOPIC, console_process
from tidelake.table import Table

RESET_GROUP = "reset-me"


@pytest.fixture(scope="module")
def compact_me(data):
    """A table of its own (the other tests read 'orders' and must not see it compacted)."""
    path = data.tables_dir / "compact-me"
    t = Table.create(str(path), pa.schema([("id", pa.int64()), ("v", pa.int64())]), ["id"], {"write.bucket.num": "2"})
    t.upsert(pa.table({"id": [1, 2, 3], "v": [1, 1, 1]}))
    t.upsert(pa.table({"id": [2, 3, 4], "v": [2, 2, 2]}))
    t.close()
    return path


@pytest.fixture(scope="module")
def actions_console(data, compact_me, users_file):
    with console_process(data, "--allow-actions", "--users-file", str(users_file)) as c:
        yield c


@pytest.fixture
def page(operator_page):
    """Actions are an operator's (test_login.py: a viewer's are refused)."""
    return operator_page


def test_compact_asks_for_confirmation_then_commits(actions_console, compact_me, page) -> None:
    version = Table.open(str(compact_me)).version
    page.goto(f"{actions_console.url}/tables/compact-me")
    expect(page.locator("#files")).not_to_contain_text("base")
    page.click("a.button:has-text('Compact')")
    expect(page.locator("h1")).to_have_text("Compact table compact-me?")
    assert Table.open(str(compact_me)).version == version   # nothing happens before the confirmation
    page.click("#confirm")
    expect(page.locator("#message")).to_have_text(f"compact: committed version {version + 1}")
    newest = page.locator("#history tr[data-version]").first
    expect(newest).to_have_attribute("data-version", str(version + 1))
    expect(newest.locator(".operation")).to_contain_text("compact")
    expect(page.locator("#files")).to_contain_text("base")


def test_a_form_without_the_console_token_is_refused(actions_console, data, page) -> None:
    version = Table.open(str(data.table_path)).version
    answer = page.request.post(f"{actions_console.url}/actions/compact",
                               form={"table": "orders", "confirm": "yes", "token": "forged"})
    assert answer.status == 403
    assert Table.open(str(data.table_path)).version == version


def test_reset_offsets_asks_for_confirmation_then_moves_the_group(actions_console, data, page) -> None:
    consumer = Consumer({"bootstrap.servers": data.bootstrap, "group.id": RESET_GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, p, 3) for p in range(PARTITIONS)], asynchronous=False)
    consumer.close()
    page.goto(f"{actions_console.url}/groups/{RESET_GROUP}")
    expect(page.locator("#total-lag")).to_have_text(str(RECORDS - 3 * PARTITIONS))
    page.click(f"a.button:has-text('reset {TOPIC} to latest')")
    expect(page.locator("h1")).to_contain_text(f"Reset {RESET_GROUP}'s offsets of {TOPIC} to latest?")
    page.click("#confirm")
    expect(page.locator("#total-lag")).to_have_text("0")
