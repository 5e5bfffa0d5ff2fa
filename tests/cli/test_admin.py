"""The Kafka-tool commands against one EmbeddedBroker per module, each checked with a real client:
reset-offsets scenarios (a consumer then starts at the new offsets), delete-offsets, configs describe/alter
for topics and brokers, records delete (the low watermark moves), transactions abort, the console
consumer's formatters and isolation level, tombstones and headers from the console producer, --json of
listing commands."""
from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition

from clients import Rec, create_topics, produce_confluent, running_broker
from tidelake.cli.main import cli

BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with running_broker("tidelake", tmp_path_factory.mktemp("cli-admin")) as bs:
        yield bs


def tl(bootstrap: str, *args: str, input: str | bytes | None = None, ok: bool = True):
    result = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap], input=input)
    if ok:
        assert result.exit_code == 0, f"tidelake {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return result


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)}
    finally:
        c.close()


def first_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Where a real group member starts: the offset of the first record it receives per partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    seen: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 30
        while len(seen) < partitions and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                seen.setdefault(msg.partition(), msg.offset())
    finally:
        c.close()
    return seen


@pytest.fixture(scope="module")
def filled(bootstrap: str) -> str:
    """reset-t: 2 partitions x 10 records, record i of a partition at BASE_TS + i seconds."""
    create_topics(bootstrap, ["reset-t"], 2)
    produce_confluent(bootstrap, "reset-t", [Rec(p, None, b"v", BASE_TS + i * 1000) for p in range(2)
                                             for i in range(10)])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rg"})
    c.commit(offsets=[TopicPartition("reset-t", 0, 5), TopicPartition("reset-t", 1, 8)], asynchronous=False)
    c.close()
    return "reset-t"


def test_reset_offsets_dry_run_is_the_default(bootstrap: str, filled: str) -> None:
    out = tl(bootstrap, "groups", "reset-offsets", "rg", "--topic", filled, "--to-earliest", "--json").stdout
    assert json.loads(out) == {"executed": False, "offsets": [
        {"group": "rg", "topic": filled, "partition": 0, "current_offset": 5, "new_offset": 0},
        {"group": "rg", "topic": filled, "partition": 1, "current_offset": 8, "new_offset": 0}]}
    assert committed(bootstrap, "rg", filled, 2) == {0: 5, 1: 8}


@pytest.mark.parametrize("args, expected", [
    (["--shift-by", "-3"], {0: 2, 1: 5}),
    (["--shift-by", "100"], {0: 10, 1: 10}),        # clamped to the log end
    (["--to-current"], {0: 5, 1: 8}),
    (["--to-offset", "7"], {0: 7, 1: 7}),
    (["--to-datetime", str(BASE_TS + 4000)], {0: 4, 1: 4}),
    (["--to-datetime", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((BASE_TS + 6000) / 1000)) + "Z"],
     {0: 6, 1: 6}),
    (["--by-duration", "PT1H"], {0: 10, 1: 10}),     # the records are years old: nothing that recent
])
def test_reset_offsets_scenarios_move_a_real_consumer(bootstrap: str, filled: str, args, expected) -> None:
    group = "rg" + "".join(a for a in args if a.isalnum() or a.startswith("--"))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(filled, 0, 5), TopicPartition(filled, 1, 8)], asynchronous=False)
    c.close()
    tl(bootstrap, "groups", "reset-offsets", group, "--topic", filled, *args, "--execute")
    assert committed(bootstrap, group, filled, 2) == expected
    starts = {p: o for p, o in expected.items() if o < 10}
    if starts:  # a consumer of the group resumes exactly there
        assert first_offsets(bootstrap, group, filled, len(starts)) == starts


def test_reset_offsets_all_topics_and_partition_lists(bootstrap: str, filled: str) -> None:
    create_topics(bootstrap, ["reset-u"], 3)
    produce_confluent(bootstrap, "reset-u", [Rec(p, None, b"v", BASE_TS) for p in range(3) for _ in range(4)])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rg-all"})
    c.commit(offsets=[TopicPartition(filled, 0, 3), TopicPartition("reset-u", 2, 1)], asynchronous=False)
    c.close()
    tl(bootstrap, "groups", "reset-offsets", "rg-all", "--all-topics", "--to-latest", "--execute")
    assert committed(bootstrap, "rg-all", filled, 2) == {0: 10, 1: -1001}  # only the committed partitions
    assert committed(bootstrap, "rg-all", "reset-u", 3)[2] == 4
    tl(bootstrap, "groups", "reset-offsets", "rg-all", "--topic", "reset-u:0,1", "--to-offset", "2", "--execute")
    assert committed(bootstrap, "rg-all", "reset-u", 3) == {0: 2, 1: 2, 2: 4}
    bad = tl(bootstrap, "groups", "reset-offsets", "rg-all", "--topic", "reset-u:7", "--to-earliest", ok=False)
    assert bad.exit_code == 1 and "no partition 7" in bad.stderr
    none = tl(bootstrap, "groups", "reset-offsets", "nobody", "--all-topics", "--to-earliest", ok=False)
    assert none.exit_code == 1 and "no committed offsets" in none.stderr


def test_delete_offsets(bootstrap: str, filled: str) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dg"})
    c.commit(offsets=[TopicPartition(filled, 0, 3), TopicPartition(filled, 1, 4)], asynchronous=False)
    c.close()
    out = json.loads(tl(bootstrap, "groups", "delete-offsets", "dg", "--topic", f"{filled}:1", "--json").stdout)
    assert out == [{"topic": filled, "partition": 1, "error": None}]
    assert committed(bootstrap, "dg", filled, 2) == {0: 3, 1: -1001}
    missing = tl(bootstrap, "groups", "delete-offsets", "no-such-group", "--topic", filled, ok=False)
    assert missing.exit_code == 1 and "does not exist" in missing.stderr


def test_groups_describe_and_list_json(bootstrap: str, filled: str) -> None:
    doc = json.loads(tl(bootstrap, "groups", "describe", "rg", "--json").stdout)
    assert doc["group"] == "rg" and doc["state"] == "EMPTY"
    assert [(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in doc["partitions"]] == \
        [(0, 5, 10, 5), (1, 8, 10, 2)]
    listed = {g["group"]: g for g in json.loads(tl(bootstrap, "groups", "list", "--json").stdout)}
    assert listed["rg"]["state"] == "Empty"
    missing = tl(bootstrap, "groups", "describe", "no-such-group", ok=False)
    assert missing.exit_code == 1 and "does not exist" in missing.stderr


def test_configs_describe_and_alter_topic(bootstrap: str) -> None:
    create_topics(bootstrap, ["cfg-t"], 1)
    tl(bootstrap, "configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-t",
       "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]")
    doc = json.loads(tl(bootstrap, "configs", "describe", "--entity-type", "topics", "--entity-name", "cfg-t",
                        "--json").stdout)
    values = {c["name"]: (c["value"], c["source"]) for c in doc["configs"]}
    assert values == {"retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"),
                      "cleanup.policy": ("compact,delete", "DYNAMIC_TOPIC_CONFIG")}
    tl(bootstrap, "configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-t",
       "--delete-config", "retention.ms")
    plain = tl(bootstrap, "configs", "describe", "--entity-type", "topics", "--entity-name", "cfg-t").stdout
    assert "cleanup.policy" in plain and "retention.ms" not in plain


def test_configs_describe_and_alter_broker(bootstrap: str) -> None:
    every = json.loads(tl(bootstrap, "configs", "describe", "--entity-type", "brokers", "--all", "--json").stdout)
    names = {c["name"] for c in every["configs"]}
    assert "log.retention.hours" in names and every["entity_type"] == "broker"
    tl(bootstrap, "configs", "alter", "--entity-type", "brokers", "--entity-name", every["entity_name"],
       "--add-config", "log.retention.ms=7200000")
    doc = json.loads(tl(bootstrap, "configs", "describe", "--entity-type", "brokers", "--json").stdout)
    assert {c["name"]: c["value"] for c in doc["configs"]}["log.retention.ms"] == "7200000"
    tl(bootstrap, "configs", "alter", "--entity-type", "brokers", "--delete-config", "log.retention.ms")


def test_configs_describe_and_alter_group(bootstrap: str) -> None:
    """kafka-configs --entity-type groups: a KIP-848 group's consumer.* configs and a share group's share.* ones."""
    tl(bootstrap, "configs", "alter", "--entity-type", "groups", "--entity-name", "cfg-g",
       "--add-config", "consumer.heartbeat.interval.ms=6000,share.auto.offset.reset=earliest")
    doc = json.loads(tl(bootstrap, "configs", "describe", "--entity-type", "groups", "--entity-name", "cfg-g",
                        "--json").stdout)
    assert {c["name"]: (c["value"], c["source"]) for c in doc["configs"]} == {
        "consumer.heartbeat.interval.ms": ("6000", "GROUP_CONFIG"),
        "share.auto.offset.reset": ("earliest", "GROUP_CONFIG")}
    refused = tl(bootstrap, "configs", "alter", "--entity-type", "groups", "--entity-name", "cfg-g",
                 "--add-config", "consumer.heartbeat.interval.ms=1", ok=False)
    assert refused.exit_code != 0
    assert "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms" \
        in refused.output
    assert tl(bootstrap, "configs", "describe", "--entity-type", "groups", ok=False).exit_code != 0


def test_records_delete_moves_the_low_watermark(bootstrap: str, tmp_path) -> None:
    create_topics(bootstrap, ["del-t"], 2)
    produce_confluent(bootstrap, "del-t", [Rec(p, None, b"v", BASE_TS) for p in range(2) for _ in range(6)])
    out = json.loads(tl(bootstrap, "records", "delete", "--topic", "del-t", "--partition", "0", "--offset", "4",
                        "--json").stdout)
    assert out == [{"topic": "del-t", "partition": 0, "low_watermark": 4}]
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "del-t", "partition": 1, "offset": -1}], "version": 1}))
    tl(bootstrap, "records", "delete", "--offset-json-file", str(spec))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        assert c.get_watermark_offsets(TopicPartition("del-t", 0), timeout=10, cached=False) == (4, 6)
        assert c.get_watermark_offsets(TopicPartition("del-t", 1), timeout=10, cached=False) == (6, 6)
    finally:
        c.close()
    beyond = tl(bootstrap, "records", "delete", "--topic", "del-t", "--offset", "99", ok=False)
    assert beyond.exit_code == 1 and "OFFSET_OUT_OF_RANGE" in beyond.stderr


def test_transactions_abort(bootstrap: str) -> None:
    create_topics(bootstrap, ["txn-t"], 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cli-abort", "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-t", b"never", partition=0)
    p.flush(30)
    assert json.loads(tl(bootstrap, "transactions", "describe", "cli-abort", "--json").stdout)["state"] == "Ongoing"
    doc = json.loads(tl(bootstrap, "transactions", "abort", "--transactional-id", "cli-abort", "--json").stdout)
    assert doc["aborted"]["state"] == "Ongoing" and doc["aborted"]["partitions"] == ["txn-t-0"]
    assert doc["now"]["producer_epoch"] > doc["aborted"]["producer_epoch"]
    assert doc["now"]["state"] in ("CompleteAbort", "Empty")
    # the old producer is fenced, and read_committed readers never see its record
    with pytest.raises(Exception):
        p.commit_transaction(10)
    out = tl(bootstrap, "consume", "txn-t", "--from-beginning", "--isolation-level", "read_committed",
             "--timeout-ms", "1500").stdout
    assert out == ""
    again = tl(bootstrap, "transactions", "abort", "--transactional-id", "cli-abort", ok=False)
    assert again.exit_code == 1 and "no open transaction" in again.stderr


def test_consume_isolation_level_read_committed(bootstrap: str) -> None:
    create_topics(bootstrap, ["iso-t"], 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cli-iso", "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("iso-t", b"committed", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("iso-t", b"open", partition=0)
    p.flush(30)
    try:
        uncommitted = tl(bootstrap, "consume", "iso-t", "--from-beginning", "--timeout-ms", "1500").stdout
        assert uncommitted.splitlines() == ["committed", "open"]
        read_committed = tl(bootstrap, "consume", "iso-t", "--from-beginning", "--timeout-ms", "1500",
                            "--isolation-level", "read_committed").stdout
        assert read_committed.splitlines() == ["committed"]
    finally:
        p.abort_transaction(30)


def test_produce_tombstones_and_headers_then_consume_json(bootstrap: str) -> None:
    create_topics(bootstrap, ["fmt-t"], 1)
    lines = "h1:a,h2:NULL\tk1=v1\n\tk2=NULL\nh3:c\tno-key\n"
    tl(bootstrap, "produce", "fmt-t", "--property", "parse.headers=true", "--property", "parse.key=true",
       "--property", "key.separator==", "--property", "null.marker=NULL", input=lines)
    out = tl(bootstrap, "consume", "fmt-t", "--from-beginning", "--max-messages", "3", "--formatter", "json").stdout
    docs = [json.loads(line) for line in out.splitlines()]
    assert [(d["key"], d["value"], d["headers"]) for d in docs] == [
        ("k1", "v1", [{"key": "h1", "value": "a"}, {"key": "h2", "value": None}]),
        ("k2", None, []),                                        # a tombstone
        (None, "no-key", [{"key": "h3", "value": "c"}])]
    assert [(d["topic"], d["partition"], d["offset"], d["timestamp_type"]) for d in docs] == \
        [("fmt-t", 0, i, "CreateTime") for i in range(3)]
    assert all(d["timestamp"] > BASE_TS for d in docs)

    printed = tl(bootstrap, "consume", "fmt-t", "--from-beginning", "--max-messages", "3",
                 "--property", "print.key=true", "--property", "print.headers=true",
                 "--property", "print.timestamp=true", "--property", "key.separator=|",
                 "--property", "null.literal=<null>").stdout.splitlines()
    stamps = [str(d["timestamp"]) for d in docs]
    assert printed == [f"CreateTime:{stamps[0]}|h1:a,h2:<null>|k1|v1",
                       f"CreateTime:{stamps[1]}|NO_HEADERS|k2|<null>",
                       f"CreateTime:{stamps[2]}|h3:c|<null>|no-key"]


def test_binary_values_in_json_are_base64(bootstrap: str) -> None:
    create_topics(bootstrap, ["bin-t"], 1)
    produce_confluent(bootstrap, "bin-t", [Rec(0, b"\xff\x00", b"\x80abc", BASE_TS)])
    (doc,) = [json.loads(x) for x in tl(bootstrap, "consume", "bin-t", "--from-beginning", "--max-messages", "1",
                                         "--formatter", "json").stdout.splitlines()]
    assert doc["key_base64"] == "/wA=" and doc["value_base64"] == "gGFiYw==" and "value" not in doc


def test_listing_json_and_plain(bootstrap: str) -> None:
    create_topics(bootstrap, ["list-t"], 1)
    assert "list-t" in json.loads(tl(bootstrap, "topics", "list", "--json").stdout)
    tx = json.loads(tl(bootstrap, "transactions", "list", "--json").stdout)
    assert isinstance(tx, list)
    plain = tl(bootstrap, "topics", "describe", "list-t").stdout.splitlines()
    assert plain[0].startswith("Topic: list-t") and plain[1].split()[:2] == ["PARTITION", "LEADER"]
    assert "│" not in "\n".join(plain)  # no box drawing when not on a terminal


def test_missing_topic_is_an_error_not_a_hang(bootstrap: str) -> None:
    for args in (["consume", "no-such-topic", "--timeout-ms", "1000"],
                 ["records", "delete", "--topic", "no-such-topic", "--offset", "1"],
                 ["configs", "alter", "--entity-type", "topics", "--entity-name", "no-such-topic",
                  "--add-config", "retention.ms=1"],
                 ["groups", "reset-offsets", "g", "--topic", "no-such-topic", "--to-earliest"]):
        result = tl(bootstrap, *args, input="x\n", ok=False)
        assert result.exit_code == 1 and "no-such-topic" in result.stderr, result.output
