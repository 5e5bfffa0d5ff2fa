"""`tidelake groups list|describe|reset-offsets|delete` against a real broker."""
from __future__ import annotations

import re
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelake.broker.embedded import EmbeddedBroker
from tidelake.cli.main import cli

BASE_TS = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        yield b


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, ["groups", *args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def rows(output: str, group: str) -> dict[int, list[str]]:
    """PARTITION -> the describe row's columns."""
    out = {}
    for line in output.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[2].isdigit():
            out[int(cols[2])] = cols
    return out


def committed(admin_bs: str, group: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": admin_bs, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition("t", p) for p in range(3)], timeout=10)}
    finally:
        c.close()


def test_groups_cli_list_describe_reset_delete(broker):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("t", 3, 1)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": bs})
    for part in range(3):
        for i in range(10):  # timestamps BASE_TS + i seconds in every partition
            p.produce("t", value=b"v", partition=part, timestamp=BASE_TS + i * 1000)
    assert p.flush(15) == 0

    c = Consumer({"bootstrap.servers": bs, "group.id": "g", "client.id": "cli-consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["t"])
    deadline = time.monotonic() + 30
    while len(c.assignment()) < 3 and time.monotonic() < deadline:
        c.poll(0.1)
    c.commit(offsets=[TopicPartition("t", 0, 3), TopicPartition("t", 1, 7), TopicPartition("t", 2, 10)],
             asynchronous=False)
    try:
        assert re.search(r"^g\s+Stable\s+classic\s+consumer", run("list", "--bootstrap-server", bs), re.M)
        out = run("describe", "g", "--bootstrap-server", bs)
        assert "STATE STABLE" in out and "MEMBERS 1" in out and "ASSIGNOR range" in out
        table = rows(out, "g")
        # CURRENT-OFFSET, LOG-END-OFFSET, LAG, and the owning member
        assert {p: table[p][3:6] for p in table} == {0: ["3", "10", "7"], 1: ["7", "10", "3"], 2: ["10", "10", "0"]}
        assert all(table[p][-1] == "cli-consumer" for p in table)
        # an active group's offsets cannot be reset
        res = CliRunner().invoke(cli, ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute",
                                       "--bootstrap-server", bs])
        assert res.exit_code == 1 and "inactive" in res.stderr and "Stable" in res.stderr.title()
    finally:
        c.close()

    run("reset-offsets", "g", "--topic", "t", "--execute", "--to-earliest", "--bootstrap-server", bs)
    assert committed(bs, "g") == {0: 0, 1: 0, 2: 0}
    run("reset-offsets", "g", "--topic", "t", "--execute", "--to-offset", "4", "--bootstrap-server", bs)
    assert committed(bs, "g") == {0: 4, 1: 4, 2: 4}
    run("reset-offsets", "g", "--topic", "t", "--execute", "--to-latest", "--bootstrap-server", bs)
    assert committed(bs, "g") == {0: 10, 1: 10, 2: 10}
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((BASE_TS + 6000) / 1000)) + "Z"
    run("reset-offsets", "g", "--topic", "t", "--execute", "--to-datetime", when, "--bootstrap-server", bs)
    assert committed(bs, "g") == {0: 6, 1: 6, 2: 6}
    dry = run("reset-offsets", "g", "--topic", "t", "--to-earliest", "--dry-run", "--bootstrap-server", bs)
    assert "NEW-OFFSET" in dry and committed(bs, "g") == {0: 6, 1: 6, 2: 6}

    out = run("describe", "g", "--bootstrap-server", bs)
    assert "STATE EMPTY" in out and {p: r[3:6] for p, r in rows(out, "g").items()} == \
        {0: ["6", "10", "4"], 1: ["6", "10", "4"], 2: ["6", "10", "4"]}
    assert "deleted group g" in run("delete", "g", "--bootstrap-server", bs)
    assert not re.search(r"^g\s", run("list", "--bootstrap-server", bs), re.M)


def test_groups_cli_describes_a_kip848_group(broker):
    """librdkafka describes consumer-protocol groups with ConsumerGroupDescribe (DescribeGroups
    answers Dead for them, as Kafka does), so the CLI shows the live group and its assignment."""
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("t", 3, 1)]).values():
        f.result(15)
    c = Consumer({"bootstrap.servers": bs, "group.id": "kg", "client.id": "kip848-consumer",
                  "group.protocol": "consumer", "group.remote.assignor": "range"})
    c.subscribe(["t"])
    try:
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 3 and time.monotonic() < deadline:
            c.poll(0.1)
        c.commit(offsets=[TopicPartition("t", p, 0) for p in range(3)], asynchronous=False)
        out = run("describe", "kg", "--bootstrap-server", bs)
        assert "STATE STABLE" in out and "TYPE consumer" in out and "ASSIGNOR range" in out and "MEMBERS 1" in out
        table = rows(out, "kg")
        assert sorted(table) == [0, 1, 2] and all(table[p][-1] == "kip848-consumer" for p in table)
    finally:
        c.close()
