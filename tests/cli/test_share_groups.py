"""`tidelake share-groups list|describe|reset-offsets|delete-offsets|delete` against a real broker with
confluent-kafka ShareConsumers."""
from __future__ import annotations

import json
import re
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from security_fixtures import PLAIN_JAAS, secured_broker
from tidelake.broker.embedded import EmbeddedBroker
from tidelake.cli.main import cli
from tls_certs import make_pki

CONFIG = {"group.share.heartbeat.interval.ms": "300", "group.share.session.timeout.ms": "6000"}
DEADLINE_S = 30
RECORDS = 10


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", config=CONFIG) as b:
        yield b


def invoke(*args: str):
    return CliRunner().invoke(cli, ["share-groups", *args])


def run(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.stdout


def describe_rows(stdout: str, group: str) -> dict[int, list[str]]:
    """PARTITION -> [LEADER-EPOCH, START-OFFSET, LAG] of `describe`'s rows for topic q."""
    return {int(cols[2]): cols[3:6] for cols in (line.split() for line in stdout.splitlines())
            if len(cols) == 6 and cols[0] == group and cols[1] == "q"}


def offsets(bs: str, group: str) -> dict[int, list[str]]:
    return describe_rows(run("describe", group, "-b", bs), group)


def start_offset_once_joined(bs: str, group: str) -> str | None:
    """q-0's START-OFFSET, None while the group does not exist yet (its first member still joining)."""
    res = invoke("describe", group, "-b", bs)
    if res.exit_code == 1 and f"share group {group} does not exist" in res.stderr:
        return None
    assert res.exit_code == 0, res.output
    row = describe_rows(res.stdout, group).get(0)
    return row[1] if row else None


def share_consumer(bs: str, group: str, client_id: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "client.id": client_id})
    c.subscribe(["q"])
    return c


def consume_all(c: ShareConsumer, bs: str, group: str, want_start: str) -> list[int]:
    """Poll (acknowledging implicitly) until `describe` shows start offset ``want_start`` for q-0."""
    got = []
    deadline = time.monotonic() + DEADLINE_S
    while start_offset_once_joined(bs, group) != want_start:
        assert time.monotonic() < deadline, f"start offset of {group} never reached {want_start}"
        got += [m.offset() for m in c.poll(0.3) if m.error() is None]
        c.commit_sync(10)
    return got


def wait_members(bs: str, group: str, n: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not re.search(rf"^{group}\s+\S+\s+\S+\s+\d+\s+\d+\s+{n}$", run("describe", group, "--state", "-b", bs), re.M):
        assert time.monotonic() < deadline, f"share group {group} never had {n} members"
        time.sleep(0.2)


def test_share_groups_cli_list_describe_reset_delete(broker):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("q", 1, 1)]).values():
        f.result(15)
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, "sg",
                                                             incremental_configs=[earliest])]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": bs})
    for i in range(RECORDS):
        p.produce("q", value=b"v%d" % i, partition=0)
    assert p.flush(15) == 0

    c = share_consumer(bs, "sg", "share-cli-consumer")
    try:
        assert sorted(consume_all(c, bs, "sg", str(RECORDS))) == list(range(RECORDS))
        assert re.search(r"^sg\s+Stable\s+share$", run("list", "-b", bs), re.M)
        assert re.search(r"^sg\s+Stable\s+share$", run("list", "--state", "Stable", "-b", bs), re.M)
        assert not re.search(r"^sg\s", run("list", "--state", "Empty", "-b", bs), re.M)
        assert offsets(bs, "sg") == {0: ["0", str(RECORDS), "0"]}
        members = run("describe", "sg", "--members", "-b", bs)
        assert re.search(r"^sg\s+\S+\s+\S+\s+share-cli-consumer\s+1\s+\d+\s+q:0$", members, re.M), members
        wait_members(bs, "sg", 1)
        # a group with members cannot be reset
        res = invoke("reset-offsets", "sg", "--topic", "q", "--to-earliest", "--execute", "-b", bs)
        assert res.exit_code == 1 and res.stdout == ""
        assert res.stderr.count("\n") == 1 and "has no members, but it has 1" in res.stderr, res.stderr
    finally:
        c.close()
    wait_members(bs, "sg", 0)

    dry = run("reset-offsets", "sg", "--topic", "q", "--to-earliest", "-b", bs)
    assert re.search(r"^sg\s+q\s+0\s+10\s+0$", dry, re.M), dry
    assert offsets(bs, "sg") == {0: ["0", "10", "0"]}  # the dry run changed nothing
    run("reset-offsets", "sg", "--all-topics", "--to-offset", "4", "--execute", "-b", bs)
    assert offsets(bs, "sg") == {0: ["0", "4", "6"]}
    assert json.loads(run("describe", "sg", "--json", "-b", bs))["partitions"] == [
        {"group": "sg", "topic": "q", "partition": 0, "leader_epoch": 0, "start_offset": 4, "lag": 6}]

    c = share_consumer(bs, "sg", "share-cli-consumer-2")
    try:
        assert sorted(consume_all(c, bs, "sg", str(RECORDS))) == list(range(4, RECORDS))  # started at 4
    finally:
        c.close()
    wait_members(bs, "sg", 0)

    assert re.search(r"^q\s+Successful$", run("delete-offsets", "sg", "--topic", "q", "-b", bs), re.M)
    assert offsets(bs, "sg") == {}
    assert "deleted share group sg" in run("delete", "sg", "-b", bs)
    assert not re.search(r"^sg\s", run("list", "-b", bs), re.M)
    res = invoke("describe", "sg", "-b", bs)
    assert res.exit_code == 1 and "share group sg does not exist" in res.stderr


def test_share_groups_cli_unknown_group_and_down_broker_are_one_line(broker):
    bs = broker.bootstrap_servers
    for args in (("describe", "nope", "-b", bs), ("delete-offsets", "nope", "--topic", "q", "-b", bs),
                 ("delete", "nope", "-b", bs)):
        res = invoke(*args)
        assert res.exit_code == 1, res.output
        assert res.stderr == f"tidelake: error: share group nope does not exist (tidelake share-groups {args[0]})\n"
    down = invoke("describe", "g", "-b", "127.0.0.1:1", "--timeout", "1")
    assert down.exit_code == 1 and down.stderr.count("\n") == 1
    assert down.stderr.startswith("tidelake: error: no Kafka broker answered at 127.0.0.1:1 within 1s")


def test_share_groups_cli_over_sasl_ssl(tmp_path):
    """The share-group requests go over the listener --command-config names (here SASL_SSL, PLAIN) and a refused
    login is one line."""
    pki = make_pki(tmp_path / "pki")
    with secured_broker(tmp_path / "data", pki) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for f in admin.create_topics([NewTopic("q", 1, 1)]).values():
            f.result(15)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(5):
            p.produce("q", value=b"v%d" % i)
        assert p.flush(15) == 0
        bs = b.bootstrap_for("SASL_SSL")
        props = tmp_path / "client.properties"
        props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                         f"sasl.jaas.config={PLAIN_JAAS.split(' user_')[0]};\n"
                         f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n")
        secured = ("-b", bs, "--command-config", str(props))
        run("reset-offsets", "sg", "--topic", "q", "--to-offset", "2", "--execute", *secured)
        out = run("describe", "sg", *secured)
        assert re.search(r"^sg\s+q\s+0\s+0\s+2\s+3$", out, re.M), out
        assert re.search(r"^sg\s+\d+\s+Empty\s+", run("describe", "sg", "--state", *secured), re.M)
        wrong = tmp_path / "wrong.properties"
        wrong.write_text(props.read_text().replace('password="admin-secret"', 'password="nope"'))
        res = invoke("describe", "sg", "-b", bs, "--command-config", str(wrong))
        assert res.exit_code == 1 and res.stderr.count("\n") == 1 and "authentication failed" in res.stderr, res.stderr
