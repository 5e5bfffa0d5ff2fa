"""The web console end to end: a real embedded broker with data, a table, pipeline configs, the console as a
``tidelake console`` subprocess, and Debian's chromium driven by playwright."""
from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pytest
from playwright.sync_api import expect

from console_fixtures import (BASE_TS, CHROMIUM, CHROMIUM_ARGS, DLQ_TOPIC, EO_APP_ID, EO_OFFSET, GROUP,
                              OPERATOR_LOGIN, PARTITIONS, RECORDS, TOPIC, VIEWER_LOGIN, ConsoleData, add_console_user,
                              browser_page, console_process, record_key, record_value)
from tidelake.broker import EmbeddedBroker
from tidelake.table import Table


@pytest.fixture(scope="package")
def broker(tmp_path_factory):
    # (metrics.listen: tests read the broker's request counts, e.g. the errors the console's requests caused)
    with EmbeddedBroker(tmp_path_factory.mktemp("console-broker"), port=0,
                        config={"metrics.listen": "127.0.0.1:0"}) as b:
        yield b


@pytest.fixture(scope="package")
def data(broker, tmp_path_factory) -> ConsoleData:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=record_key(i).encode(), value=json.dumps(record_value(i)).encode(),
                         partition=i % PARTITIONS, timestamp=BASE_TS + i * 1000,
                         headers=[("trace-id", f"trace-{i}".encode()), ("source", b"test")])
        producer.flush(30)  # one at a time: offsets in partition p are exactly i // PARTITIONS
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, p, 5) for p in range(PARTITIONS)], asynchronous=False)
    consumer.close()

    root = tmp_path_factory.mktemp("console-data")
    tables_dir, pipelines_dir = root / "tables", root / "pipelines"
    tables_dir.mkdir()
    pipelines_dir.mkdir()
    table_path = tables_dir / "orders"
    t = Table.create(str(table_path), pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("status", pa.string())]),
                     ["id"], {"write.bucket.num": "2"})
    t.upsert(pa.table({"id": list(range(10)), "amount": [1] * 10, "status": ["created"] * 10}))
    t.upsert(pa.table({"id": list(range(5, 15)), "amount": [2] * 10, "status": ["paid"] * 10}))
    t.delete(pa.table({"id": [0, 1]}))
    t.close()
    (pipelines_dir / "orders.yaml").write_text(
        f"source:\n  bootstrap_servers: {bootstrap}\n  topic: {TOPIC}\n  group_id: orders-pipeline\n"
        f"offsets: commit-after\nsink:\n  table: ../tables/orders\n  format: debezium-json\n"
        f"  primary_key: [id]\n  schema: \"id long, amount long, status string\"\n")
    (pipelines_dir / "broken.yaml").write_text("source:\n  topic: orders\nsink:\n  tabel: x\n")
    exactly_once_pipeline(bootstrap, tables_dir, pipelines_dir)
    return ConsoleData(bootstrap, tables_dir, pipelines_dir, table_path)


@pytest.fixture(scope="package")
def console(data):
    """A read-only console (the default)."""
    with console_process(data) as c:
        yield c


@pytest.fixture(scope="package")
def browser():
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `apt-get install -y chromium` (make test does it as root)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield b
        finally:
            b.close()


# The live parts of a page refresh every 3 s from answers cached up to 2 s, on a machine shared with other jobs:
# an expectation waits up to 20 s (bounded) for the page to show it.
expect.set_options(timeout=20_000)


@pytest.fixture
def page(browser):
    with browser_page(browser) as p:
        yield p


@pytest.fixture(scope="package")
def users_file(tmp_path_factory):
    """A console users file with a viewer and an operator (VIEWER_LOGIN, OPERATOR_LOGIN), written by the CLI."""
    path = tmp_path_factory.mktemp("console-users") / "users"
    add_console_user(path, *VIEWER_LOGIN, "viewer")
    add_console_user(path, *OPERATOR_LOGIN, "operator")
    return path


@pytest.fixture
def operator_page(browser):
    name, password = OPERATOR_LOGIN
    with browser_page(browser, http_credentials={"username": name, "password": password}) as p:
        yield p


def exactly_once_pipeline(bootstrap: str, tables_dir, pipelines_dir) -> None:
    """An exactly-once pipeline that committed two batches into its table, as the runner commits them (rows and
    the app state with offsets and bad-record counts in one transaction), with two records dead-lettered."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(DLQ_TOPIC, 1, 1)])[DLQ_TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(2):
        producer.produce(DLQ_TOPIC, key=b"bad", value=b"not json", headers=[("__connect.errors.topic", b"orders")])
    producer.flush(30)
    (pipelines_dir / "eo.yaml").write_text(
        f"source:\n  bootstrap_servers: {bootstrap}\n  topic: {TOPIC}\n  group_id: eo-pipeline\n"
        f"offsets: exactly-once\non_error: dead-letter\ndead_letter_topic: {DLQ_TOPIC}\n"
        f"sink:\n  table: ../tables/eo\n  format: debezium-json\n  primary_key: [id]\n  schema: \"id long\"\n")
    t = Table.create(str(tables_dir / "eo"), pa.schema([("id", pa.int64())]), ["id"])
    for batch, offset in ((0, 10), (1, EO_OFFSET)):
        with t.transaction() as tx:
            tx.upsert(pa.table({"id": list(range(batch * 10, batch * 10 + 10))}))
            tx.set_app_state(EO_APP_ID, batch, {"offsets": {str(p): offset for p in range(PARTITIONS)},
                                                "topic": TOPIC, "skipped_total": 2 * batch,
                                                "dead_lettered_total": 2 * batch})
    t.close()
