"""`tidelake produce` / `tidelake consume` against an EmbeddedBroker: stdin lines to records, keys
partitioned exactly like the Java client's default partitioner, and the consumer's start positions,
limits, printed fields and consumer-group offsets."""
from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner
from kafka.partitioner.default import murmur2

from clients import JavaScript, Rec, consume, create_topics, produce_confluent, running_broker
from tidelake.cli.main import cli

PARTITIONS = 6
KEYS = [f"user-{i}" for i in range(60)] + ["", "ключ", "a:b"]


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with running_broker("tidelake", tmp_path_factory.mktemp("cli-console")) as bs:
        yield bs


def tl(bootstrap: str, *args: str, input: bytes | None = None, ok: bool = True):
    result = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap], input=input, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, f"tidelake {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return result


def tl_process(bootstrap: str, *args: str, input: bytes = b"") -> subprocess.CompletedProcess:
    """The real command in its own process, stdin piped."""
    proc = subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args, "--bootstrap-server", bootstrap],
                          input=input, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return proc


def _read_all(bootstrap: str, topic: str, counts: dict[int, int]) -> list[Rec]:
    got = consume("confluent", bootstrap, {(topic, p): n for p, n in counts.items() if n})
    return [r for p in sorted(counts) for r in got.get((topic, p), [])]


@pytest.mark.java
def test_keyed_records_land_where_java_puts_them(bootstrap: str) -> None:
    create_topics(bootstrap, ["cli-keys", "java-keys"], PARTITIONS)
    lines = b"".join(k.encode() + b"=" + b"value of " + k.encode() + b"\n" for k in KEYS)
    proc = tl_process(bootstrap, "produce", "cli-keys", "--key-separator", "=", input=lines)
    assert f"Produced {len(KEYS)} records".encode() in proc.stderr

    # The Java producer with its defaults picks the partition from the key alone.
    java_recs = [Rec(0, k.encode(), b"x", 1_700_000_000_000) for k in KEYS]
    script = JavaScript().produce("java-keys", "default", java_recs, explicit_partition=False)
    java_partition = {k: a.partition for k, a in zip(KEYS, script.run(bootstrap).acks(0, java_recs))}

    admin_counts = {p: 0 for p in range(PARTITIONS)}
    for p in java_partition.values():
        admin_counts[p] += 1
    records = _read_all(bootstrap, "cli-keys", admin_counts)
    assert len(records) == len(KEYS)
    cli_partition = {r.key.decode(): r.partition for r in records}
    assert cli_partition == java_partition
    # and both agree with murmur2 as Kafka defines it (toPositive(murmur2(key)) % n)
    assert cli_partition == {k: (murmur2(k.encode()) & 0x7FFFFFFF) % PARTITIONS for k in KEYS}
    assert len(set(cli_partition.values())) == PARTITIONS  # keys actually spread
    assert all(r.value == b"value of " + r.key for r in records)


def test_produce_lines_without_separator_and_options(bootstrap: str) -> None:
    create_topics(bootstrap, ["cli-lines"], 2)
    text = "first line\nsecond: has a colon\n\nlast line without newline"
    tl(bootstrap, "produce", "cli-lines", "--partition", "1", "--compression-codec", "zstd",
       "--header", "source=cli", "--header", "n=2", input=text.encode())
    (records,) = consume("confluent", bootstrap, {("cli-lines", 1): 4}).values()
    assert [r.value for r in records] == [b"first line", b"second: has a colon", b"", b"last line without newline"]
    assert {r.key for r in records} == {None}
    assert {r.headers for r in records} == {(("source", b"cli"), ("n", b"2"))}

    tl(bootstrap, "produce", "cli-lines", "--partition", "0", "--key-separator", ":",
       input=b"k1:v:1\nno key here\n:empty key\n")
    (records,) = consume("confluent", bootstrap, {("cli-lines", 0): 3}).values()
    assert [(r.key, r.value) for r in records] == [(b"k1", b"v:1"), (None, b"no key here"), (b"", b"empty key")]


def test_produce_to_missing_partition_fails(bootstrap: str) -> None:
    create_topics(bootstrap, ["cli-one"], 1)
    result = tl(bootstrap, "produce", "cli-one", "--partition", "7", input=b"x\n", ok=False)
    assert result.exit_code == 1 and "no partition 7" in result.stderr and result.stdout == ""


@pytest.fixture(scope="module")
def filled(bootstrap: str) -> str:
    """cli-read: 2 partitions, 5 records each, known keys, headers and timestamps."""
    create_topics(bootstrap, ["cli-read"], 2)
    produce_confluent(bootstrap, "cli-read", [
        Rec(i % 2, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i, (("h", f"{i}".encode()),))
        for i in range(10)])
    return "cli-read"


def test_consume_from_beginning_max_messages(bootstrap: str, filled: str) -> None:
    out = tl(bootstrap, "consume", filled, "--from-beginning", "--max-messages", "10").output
    lines = out.splitlines()
    assert sorted(lines[:10]) == sorted(f"v{i}" for i in range(10))
    assert lines[10] == "Processed a total of 10 messages"

    out = tl(bootstrap, "consume", filled, "--from-beginning", "--max-messages", "3").output
    assert out.splitlines()[-1] == "Processed a total of 3 messages" and len(out.splitlines()) == 4


def test_consume_partition_offset_and_printed_fields(bootstrap: str, filled: str) -> None:
    out = tl(bootstrap, "consume", filled, "--partition", "1", "--offset", "2", "--timeout-ms", "1500",
             "--print-timestamp", "--print-partition", "--print-offset", "--print-headers", "--print-key").output
    lines = out.splitlines()
    # partition 1 holds records 1,3,5,7,9 at offsets 0..4
    assert lines[:-1] == [f"CreateTime:{1_700_000_000_000 + i}\tPartition:1\tOffset:{o}\th:{i}\tk{i}\tv{i}"
                          for o, i in ((2, 5), (3, 7), (4, 9))]
    assert lines[-1] == "Processed a total of 3 messages"
    earliest = tl(bootstrap, "consume", filled, "--partition", "0", "--offset", "earliest", "--max-messages", "5").output
    assert earliest.splitlines()[:5] == ["v0", "v2", "v4", "v6", "v8"]
    usage = tl(bootstrap, "consume", filled, "--offset", "2", ok=False)
    assert usage.exit_code == 2 and "--partition" in usage.output


def test_consume_without_from_beginning_starts_at_end(bootstrap: str, filled: str) -> None:
    out = tl(bootstrap, "consume", filled, "--timeout-ms", "1500").output
    assert out.splitlines() == ["Processed a total of 0 messages"]


def test_consume_with_group_commits_offsets(bootstrap: str, filled: str) -> None:
    first = tl(bootstrap, "consume", filled, "--group", "cli-g", "--from-beginning", "--max-messages", "4").output
    second = tl(bootstrap, "consume", filled, "--group", "cli-g", "--from-beginning", "--timeout-ms", "3000").output
    values_first, values_second = first.splitlines()[:-1], second.splitlines()[:-1]
    assert len(values_first) == 4
    # the group resumes at its committed offsets: together exactly the ten records, none twice
    assert sorted(values_first + values_second) == sorted(f"v{i}" for i in range(10))


def test_a_true_false_property_refuses_any_other_word_before_connecting() -> None:
    # Kafka's rule for booleans: "yes" is an error, not false (the broker address is never tried)
    for command, prop in (("produce", "parse.key=yes"), ("produce", "parse.headers=1"), ("consume", "print.key=on")):
        result = CliRunner().invoke(cli, [command, "t", "--property", prop, "--bootstrap-server", "127.0.0.1:1"])
        name, _, value = prop.partition("=")
        assert result.exit_code == 2 and f"{name} must be true or false, got '{value}'" in result.output, result.output
