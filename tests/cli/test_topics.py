"""`tidelake topics ...` driven through click against an EmbeddedBroker, checked with AdminClient."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from clients import Rec, produce_confluent, running_broker
from tidelake.cli.main import cli


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with running_broker("tidelake", tmp_path_factory.mktemp("cli-topics")) as bs:
        yield bs


def tl(bootstrap: str, *args: str, ok: bool = True):
    result = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap], catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, f"tidelake {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return result


def _configs(bootstrap: str, topic: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: v.value for k, v in admin.describe_configs([resource])[resource].result(30).items()}


def _partitions(bootstrap: str, topic: str) -> int:
    return len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30).topics[topic].partitions)


def _table_rows(output: str) -> list[list[str]]:
    """Cells of each data row of the plain (not a terminal) tables in `output`: titles and header rows left out."""
    rows = []
    for line in output.splitlines():
        if line.startswith(("Topic:", "Configs of", "PARTITION ", "CONFIG ")):
            continue
        rows.append(line.split())
    return rows


def test_create_list_and_duplicates(bootstrap: str) -> None:
    out = tl(bootstrap, "topics", "create", "cli-a", "--partitions", "3", "--config", "retention.ms=3600000").output
    assert "Created topic cli-a" in out
    assert _partitions(bootstrap, "cli-a") == 3
    assert _configs(bootstrap, "cli-a")["retention.ms"] == "3600000"

    dup = tl(bootstrap, "topics", "create", "cli-a", "--partitions", "3", ok=False)
    assert dup.exit_code == 1 and "TOPIC_ALREADY_EXISTS" in dup.output
    assert "already exists" in tl(bootstrap, "topics", "create", "cli-a", "--if-not-exists").output

    bad = tl(bootstrap, "topics", "create", "cli-bad", "--replication-factor", "3", ok=False)
    assert bad.exit_code == 1 and "INVALID_REPLICATION_FACTOR" in bad.output
    bad_config = tl(bootstrap, "topics", "create", "cli-bad", "--config", "retention.ms", ok=False)
    assert bad_config.exit_code == 2 and "KEY=VALUE" in bad_config.output

    tl(bootstrap, "topics", "create", "cli-b")  # the broker's num.partitions
    assert _partitions(bootstrap, "cli-b") >= 1
    listed = tl(bootstrap, "topics", "list", "--exclude-internal").output.split()
    assert {"cli-a", "cli-b"} <= set(listed) and "cli-bad" not in listed
    assert not [t for t in listed if t.startswith("__")]


def test_describe_shows_partitions_offsets_and_configs(bootstrap: str) -> None:
    tl(bootstrap, "topics", "create", "cli-d", "--partitions", "2", "--config", "segment.bytes=1048576")
    produce_confluent(bootstrap, "cli-d", [Rec(i % 2, None, b"v%d" % i, 1_700_000_000_000 + i) for i in range(7)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (trim,) = admin.delete_records([TopicPartition("cli-d", 0, 2)]).values()
    trim.result(30)

    out = tl(bootstrap, "topics", "describe", "cli-d").output
    assert "Topic: cli-d" in out and "partitions: 2" in out
    leader = str(next(iter(admin.list_topics(timeout=30).brokers)))
    rows = _table_rows(out)
    # Partition, Leader, Replicas, ISR, Log start, High watermark
    assert [r for r in rows if len(r) == 6] == [["0", leader, leader, leader, "2", "4"],
                                                ["1", leader, leader, leader, "0", "3"]]
    config_rows = {r[0]: r for r in rows if len(r) == 4}
    assert config_rows == {"segment.bytes": ["segment.bytes", "1048576", "DYNAMIC_TOPIC_CONFIG", "no"]}
    (doc,) = json.loads(tl(bootstrap, "topics", "describe", "cli-d", "--json").stdout)
    assert [(p["partition"], p["log_start_offset"], p["high_watermark"]) for p in doc["partitions"]] == \
        [(0, 2, 4), (1, 0, 3)]
    assert doc["configs"] == [{"name": "segment.bytes", "value": "1048576", "source": "DYNAMIC_TOPIC_CONFIG",
                               "read_only": False}]

    full = {r[0]: r for r in _table_rows(tl(bootstrap, "topics", "describe", "cli-d", "--all-configs").output)
            if len(r) == 4}
    assert full["retention.ms"][1:3] == ["604800000", "DEFAULT_CONFIG"]
    assert full["cleanup.policy"][1] == "delete"
    assert full["segment.bytes"][1:3] == ["1048576", "DYNAMIC_TOPIC_CONFIG"]

    missing = tl(bootstrap, "topics", "describe", "cli-nope", ok=False)
    assert missing.exit_code == 1 and "cli-nope" in missing.output


def test_describe_all_topics(bootstrap: str) -> None:
    tl(bootstrap, "topics", "create", "cli-all-1", "--partitions", "1")
    out = tl(bootstrap, "topics", "describe").output
    assert re.search(r"Topic: cli-all-1\s+partitions: 1", out)


def test_alter_partitions_and_configs(bootstrap: str) -> None:
    tl(bootstrap, "topics", "create", "cli-alt", "--partitions", "2", "--config", "retention.ms=3600000")
    out = tl(bootstrap, "topics", "alter", "cli-alt", "--partitions", "5", "--set", "retention.bytes=1048576",
             "--set", "cleanup.policy=compact", "--delete-config", "retention.ms").output
    assert "now has 5 partitions" in out
    assert _partitions(bootstrap, "cli-alt") == 5
    configs = _configs(bootstrap, "cli-alt")
    assert (configs["retention.bytes"], configs["cleanup.policy"], configs["retention.ms"]) == \
        ("1048576", "compact", "604800000")

    shrink = tl(bootstrap, "topics", "alter", "cli-alt", "--partitions", "3", ok=False)
    assert shrink.exit_code == 1 and "INVALID_PARTITIONS" in shrink.output
    assert _partitions(bootstrap, "cli-alt") == 5
    unknown = tl(bootstrap, "topics", "alter", "cli-alt", "--set", "no.such.config=1", ok=False)
    assert unknown.exit_code == 1 and "INVALID_CONFIG" in unknown.output
    nothing = tl(bootstrap, "topics", "alter", "cli-alt", ok=False)
    assert nothing.exit_code == 2


def test_delete(bootstrap: str) -> None:
    tl(bootstrap, "topics", "create", "cli-del-1", "--partitions", "1")
    tl(bootstrap, "topics", "create", "cli-del-2", "--partitions", "1")
    out = tl(bootstrap, "topics", "delete", "cli-del-1", "cli-del-2").output
    assert "Deleted topic cli-del-1" in out and "Deleted topic cli-del-2" in out
    listed = tl(bootstrap, "topics", "list").output.split()
    assert "cli-del-1" not in listed and "cli-del-2" not in listed
    again = tl(bootstrap, "topics", "delete", "cli-del-1", ok=False)
    assert again.exit_code == 1 and "UNKNOWN_TOPIC_OR_PART" in again.output
    assert "does not exist" in tl(bootstrap, "topics", "delete", "cli-del-1", "--if-exists").output
