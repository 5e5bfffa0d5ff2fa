"""The console's pages in a real headless chromium, against a real broker, table and pipeline configs."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition
from playwright.sync_api import expect

from console_fixtures import BASE_TS, DLQ_TOPIC, EO_OFFSET, GROUP, PARTITIONS, RECORDS, TOPIC, record_key
from tidelake.table import Table


def test_every_page_loads_with_its_content(console, page) -> None:
    page.goto(f"{console.url}/")
    expect(page.locator("h1")).to_contain_text("Cluster")
    expect(page.locator(".cards")).to_contain_text("3 pipelines")  # orders.yaml, eo.yaml, broken.yaml

    page.goto(f"{console.url}/topics")
    row = page.locator(f"#topics tr[data-topic='{TOPIC}']")
    expect(row.locator("td").nth(1)).to_have_text(str(PARTITIONS))
    expect(row.locator("td").nth(2)).to_have_text(str(RECORDS))

    page.goto(f"{console.url}/topics/{TOPIC}")
    expect(page.locator("#partitions tr")).to_have_count(PARTITIONS + 1)
    expect(page.locator("#configs")).to_contain_text("cleanup.policy")

    page.goto(f"{console.url}/groups")
    expect(page.locator(f"#groups tr[data-group='{GROUP}']")).to_contain_text(TOPIC)

    page.goto(f"{console.url}/pipelines")
    expect(page.locator("#pipelines tr[data-pipeline='orders']")).to_contain_text("commit-after (in the group)")
    # a config that is not a pipeline is shown with its file:line error, not a failed page
    expect(page.locator("#pipelines tr[data-pipeline='broken']")).to_contain_text("broken.yaml:")

    page.goto(f"{console.url}/pipelines/orders")
    expect(page.locator("#offsets tr")).to_have_count(PARTITIONS + 1)
    # the pipeline's group never committed: its lag is every record of the topic
    expect(page.locator("#pipeline-lag")).to_have_text(str(RECORDS))

    page.goto(f"{console.url}/pipelines/eo")
    # exactly-once: the progress is the table's, 20 of 30 records per partition; the group has none
    expect(page.locator("#mode")).to_contain_text("progress kept in the table")
    expect(page.locator("#pipeline-lag")).to_have_text(str(RECORDS - PARTITIONS * EO_OFFSET))
    expect(page.locator("#offsets tr").nth(1).locator("td.mode")).to_have_text(str(EO_OFFSET))
    expect(page.locator("#freshness")).to_contain_text("last batch 1 committed")
    expect(page.locator("#batches tr")).to_have_count(3)
    expect(page.locator("#bad-records")).to_contain_text(f"2 dead-lettered to {DLQ_TOPIC} (2 records there)")

    page.goto(f"{console.url}/tables")
    expect(page.locator("#tables tr[data-table='orders']")).to_be_visible()

    page.goto(f"{console.url}/tables/orders")
    expect(page.locator("#schema")).to_contain_text("status")
    expect(page.locator("#files")).to_contain_text("delta")
    expect(page.locator("#history tr[data-version='3'] .operation")).to_contain_text("delete")

    page.goto(f"{console.url}/metrics")
    expect(page.locator("h1")).to_have_text("Metrics")

    page.goto(f"{console.url}/topics/no-such-topic")
    expect(page.locator("#error-message")).to_have_text("no topic no-such-topic")


def test_message_browser_finds_a_record_by_offset(console, page) -> None:
    i = 2 * PARTITIONS + 1            # record 7: partition 1, offset 2
    page.goto(f"{console.url}/topics/{TOPIC}/messages")
    page.select_option("select[name=partition]", "1")
    page.fill("input[name=offset]", "2")
    page.fill("input[name=limit]", "3")
    page.click("#browse button[type=submit]")
    first = page.locator("article.record").first
    expect(first).to_have_attribute("data-offset", "2")
    expect(page.locator("article.record")).to_have_count(3)
    expect(first.locator(".key-text")).to_have_text(record_key(i))
    expect(first.locator("table.headers")).to_contain_text(f"trace-{i}")
    # a Debezium create: its operation and the row's fields, and the raw value pretty-printed
    expect(first.locator(".change .op")).to_have_text("create")
    expect(first.locator(".change")).to_contain_text("shop.orders")
    expect(first.locator("table.diff")).to_contain_text(str(10 * i))
    first.locator("details summary").click()
    expect(first.locator("pre.value")).to_contain_text('"amount": 70')


def test_message_browser_finds_a_record_by_timestamp(console, page) -> None:
    i = 8 * PARTITIONS + 2            # record 26: partition 2, offset 8, an update
    when = dt.datetime.fromtimestamp((BASE_TS + i * 1000 - 500) / 1000, dt.timezone.utc)
    page.goto(f"{console.url}/topics/{TOPIC}/messages")
    page.select_option("select[name=partition]", "2")
    page.fill("input[name=timestamp]", when.isoformat().replace("+00:00", "Z"))
    page.click("#browse button[type=submit]")
    first = page.locator("article.record").first
    expect(first).to_have_attribute("data-offset", "8")
    expect(first.locator(".key-text")).to_have_text(record_key(i))
    expect(first.locator(".change .op")).to_have_text("update")
    # the fields an update changed are marked
    expect(first.locator("table.diff tr.changed")).to_have_count(2)  # amount, status

    page.fill("input[name=timestamp]", str(BASE_TS + RECORDS * 1000 + 1))
    page.fill("input[name=offset]", "")
    page.click("#browse button[type=submit]")
    expect(page.locator("#range")).to_contain_text("no record at or after that time")


def test_group_lag_follows_a_commit(console, data, page) -> None:
    page.goto(f"{console.url}/groups/{GROUP}")
    end = RECORDS // PARTITIONS
    lag_p0 = page.locator(f"#lag tr[data-topic='{TOPIC}'][data-partition='0'] .lag")
    expect(lag_p0).to_have_text(str(end - 5))
    expect(page.locator("#total-lag")).to_have_text(str(PARTITIONS * (end - 5)))
    # the sampler keeps lag history: the chart has the group's line at the current lag
    expect(page.locator("#lag-chart polyline")).to_have_attribute("data-last", str(PARTITIONS * (end - 5)))

    consumer = Consumer({"bootstrap.servers": data.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, end - 1)], asynchronous=False)
    finally:
        consumer.close()
    # no reload: the page re-fetches its lag table and chart while open
    expect(lag_p0).to_have_text("1")
    new_total = 1 + (PARTITIONS - 1) * (end - 5)
    expect(page.locator("#total-lag")).to_have_text(str(new_total))
    expect(page.locator("#lag-chart polyline")).to_have_attribute("data-last", str(new_total))


def test_table_history_shows_a_new_commit(console, data, page) -> None:
    page.goto(f"{console.url}/tables/orders")
    before = Table.open(str(data.table_path))
    version = before.version
    expect(page.locator("#history tr[data-version]").first).to_have_attribute("data-version", str(version))

    with before.transaction() as tx:
        tx.upsert(pa.table({"id": [100, 101], "amount": [7, 8], "status": ["new", "new"]}))
    before.close()
    page.reload()
    newest = page.locator("#history tr[data-version]").first
    expect(newest).to_have_attribute("data-version", str(version + 1))
    expect(newest.locator(".operation")).to_contain_text("upsert")

    # the changes that commit made, from its history row
    newest.locator("a", has_text="changes").click()
    expect(page.locator("#changes-caption")).to_contain_text(f"2 changes in versions ({version}, {version + 1}]")
    expect(page.locator("#change-rows")).to_contain_text("100")

    # time travel to the first data version: 10 rows, none of the later ones
    page.fill("#time-travel input[name=version]", "1")
    page.click("#time-travel button")
    expect(page.locator("#preview-caption")).to_contain_text("version 1: 10 rows")
    expect(page.locator("#preview-rows tr")).to_have_count(11)


def test_actions_are_off_unless_allowed(console, page) -> None:
    page.goto(f"{console.url}/tables/orders")
    expect(page.locator("a", has_text="Compact")).to_have_count(0)
    answer = page.request.post(f"{console.url}/actions/compact", form={"table": "orders", "confirm": "yes"})
    assert answer.status == 403
    assert "--allow-actions" in answer.text()
    answer = page.request.get(f"{console.url}/actions/reset-offsets?group={GROUP}&topic={TOPIC}")
    assert answer.status == 403


def test_topic_config_sources_have_kafkas_names(console, data, page) -> None:
    """(DescribeConfigs gives each config's source as a number: shown as Kafka's admin client names it)"""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": data.bootstrap})
    admin.create_topics([NewTopic("configured", 1, 1, config={"retention.ms": "123456"})])["configured"].result(30)
    page.goto(f"{console.url}/topics/configured")
    source = page.locator("#configs tr", has=page.locator("td:text-is('retention.ms')")).locator("td").nth(2)
    expect(source).to_have_text("DYNAMIC_TOPIC_CONFIG")
    default = page.locator("#configs tr", has=page.locator("td:text-is('cleanup.policy')")).locator("td").nth(2)
    expect(default).to_have_text("DEFAULT_CONFIG")


def test_only_the_seo_mode_names_a_gtoffset_file(console, data, page) -> None:
    """An exactly-once pipeline keeps its progress in the table: a seo_dir left in its file (from an earlier
    seo run) is neither shown nor read as its progress."""
    eo = (data.pipelines_dir / "eo.yaml").read_text()
    with_dir = data.pipelines_dir / "eo-with-seo-dir.yaml"
    seo = data.pipelines_dir / "seo.yaml"
    with_dir.write_text(eo + "seo_dir: ../gtoffsets\n")
    seo.write_text(eo.replace("offsets: exactly-once", "offsets: seo") + "seo_dir: ../gtoffsets\n")
    try:
        page.goto(f"{console.url}/pipelines/eo-with-seo-dir")
        expect(page.locator("#mode")).to_have_text("exactly-once: progress kept in the table")
        expect(page.locator("#offsets tr").first).not_to_contain_text("gtoffset")
        expect(page.locator("#offsets tr").nth(1).locator("td.mode")).to_have_text(str(EO_OFFSET))
        page.goto(f"{console.url}/pipelines/seo")
        gtoffsets = (data.pipelines_dir / ".." / "gtoffsets").resolve()
        expect(page.locator("#mode")).to_contain_text(f"seo: progress kept in the gtoffset ({gtoffsets})")
        expect(page.locator("#offsets tr").first).to_contain_text("gtoffset")
    finally:
        with_dir.unlink()
        seo.unlink()


def test_tables_show_the_row_count_and_why_stored_rows_differ(console, data, page) -> None:
    t = Table.open(str(data.table_path))
    rows, stored = t.scan().num_rows, sum(f.rows for f in t.plan())
    assert stored > rows   # the deltas hold the updated rows' older images and the deletes
    page.goto(f"{console.url}/tables")
    row = page.locator("#tables tr[data-table='orders']")
    expect(row.locator("td.rows")).to_have_text(str(rows))
    expect(row.locator("td.stored")).to_have_text(str(stored))
    expect(page.locator("#rows-note")).to_contain_text("compaction drops them")
    page.goto(f"{console.url}/tables/orders")
    expect(page.locator("#rows")).to_contain_text(f"{rows} ({stored} stored in the live files")


def test_nulls_show_as_null(console, data, page) -> None:
    t = Table.create(str(data.tables_dir / "with-nulls"), pa.schema([("id", pa.int64()), ("note", pa.string())]),
                     ["id"])
    t.upsert(pa.table({"id": [1, 2], "note": ["kept", None]}))
    t.close()
    page.goto(f"{console.url}/tables/with-nulls?version=1")
    expect(page.locator("#preview-rows tr").nth(2).locator("td").nth(1)).to_have_text("null")
    expect(page.locator("#preview-rows")).not_to_contain_text("None")
    page.goto(f"{console.url}/tables/with-nulls?start=0&end=1")
    expect(page.locator("#change-rows .null")).to_have_count(1)
    expect(page.locator("#change-rows")).not_to_contain_text("None")
