"""Kafka 4.4's own readers over what a tidelake broker writes (issue 36, item 3): the internal topics through Kafka's
formatters (OffsetsMessageFormatter, TransactionLogMessageFormatter, ShareGroupStateMessageFormatter, as
kafka-console-consumer --formatter runs them) and the data directory's files through kafka-dump-log
(--offsets-decoder, --transaction-log-decoder, --share-group-state-decoder, --deep-iteration, --verify-index-only,
--index-sanity-check, producer snapshots). One broker for the module writes every kind of internal record: a
classic group and a KIP-848 group committing offsets, a share group with explicit acknowledgements (ShareClient), a
transaction committed and one aborted by librdkafka (transactions v1) and by Kafka 4.4's Java producer (v2),
idempotent producers. Kafka's tools run in one JVM per phase (tests/java/KafkaFormats.java): the formatters while the
broker runs, kafka-dump-log once it is stopped (its close writes the indexes and the producer snapshots)."""
from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java

BATCHES, PER_BATCH = 20, 5               # the idempotent producer's batches on "plain"
SHARE_RECORDS = 30
OFFSETS_FORMATTER = "org.apache.kafka.tools.consumer.OffsetsMessageFormatter"            # offset commits
GROUP_FORMATTER = "org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter"       # classic groups
SHARE_GROUP_FORMATTER = "org.apache.kafka.tools.consumer.ShareGroupMessageFormatter"    # share groups
TXN_FORMATTER = "org.apache.kafka.tools.consumer.TransactionLogMessageFormatter"
SHARE_STATE_FORMATTER = "org.apache.kafka.tools.consumer.group.share.ShareGroupStateMessageFormatter"
FAILURES = re.compile(r"Could not read|Error at offset|Exception|exception|not found in|Mismatches|failed|corrupt",
                      re.IGNORECASE)


def kafka_tools(bootstrap: str, commands: list[list[str]]) -> list[list[str]]:
    """Each command's output lines from one KafkaFormats JVM."""
    r = subprocess.run(java_command("KafkaFormats", bootstrap), input="".join("\t".join(c) + "\n" for c in commands),
                       capture_output=True, text=True, timeout=300)
    outputs, current = [], []
    for line in r.stdout.splitlines():
        if line == "end":
            outputs.append(current)
            current = []
        else:
            current.append(line)
    assert r.returncode == 0 and len(outputs) == len(commands), r.stdout[-3000:] + r.stderr[-3000:]
    for command, out in zip(commands, outputs):
        assert not (out and out[0].startswith("error\t")), f"{command}: {out[:3]}"
    return outputs


def create_topics(bs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    topics = [NewTopic("plain", 1, 1, config={"index.interval.bytes": "1"}),   # an offset index entry per batch
              NewTopic("txn", 1, 1, config={"index.interval.bytes": "1"}), NewTopic("share", 1, 1)]
    for f in admin.create_topics(topics).values():
        f.result(30)


def idempotent_batches(bs: str) -> None:
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 1000})
    for b in range(BATCHES):
        for i in range(PER_BATCH):
            p.produce("plain", key=f"k{b}-{i}", value=f"v{b}-{i}")
        assert p.flush(30) == 0   # one batch per flush
    p.flush(30)


def librdkafka_transactions(bs: str) -> None:
    t = Producer({"bootstrap.servers": bs, "transactional.id": "tx-v1"})
    t.init_transactions(30)
    t.begin_transaction()
    for i in range(5):
        t.produce("txn", value=f"c{i}")
    t.commit_transaction(30)
    t.begin_transaction()
    for i in range(3):
        t.produce("txn", value=f"a{i}")
    assert t.flush(30) == 0   # written before the abort (else librdkafka aborts an empty transaction locally)
    t.abort_transaction(30)


def java_commands(main: str, *args: str, stdin: str | None = None) -> str:
    r = subprocess.run(java_command(main, *args), input=stdin, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout


def consume_and_commit(bs: str, group: str, protocol: str) -> None:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "group.protocol": protocol})
    c.subscribe(["plain"])
    n = 0
    while n < BATCHES * PER_BATCH:
        m = c.poll(1)
        if m is not None and not m.error():
            n += 1
    c.commit(asynchronous=False)
    c.close()


@dataclass
class Formats:
    data: Path
    offsets: list[str]          # OffsetsMessageFormatter over __consumer_offsets
    groups: list[str]           # GroupMetadataMessageFormatter over __consumer_offsets
    share_groups: list[str]     # ShareGroupMessageFormatter over __consumer_offsets
    txn_log: list[str]          # TransactionLogMessageFormatter over __transaction_state
    share_state: list[str]      # ShareGroupStateMessageFormatter over __share_group_state
    dumps: dict[str, list[str]]  # kafka-dump-log by option


def logs(data: Path, prefix: str) -> list[Path]:
    return sorted(p for p in data.glob(f"{prefix}-*/*.log") if p.stat().st_size)


@pytest.fixture(scope="module")
def formats(tmp_path_factory) -> Formats:
    data = tmp_path_factory.mktemp("kafka-formats") / "data"
    with EmbeddedBroker(data) as broker:
        bs = broker.bootstrap_servers
        create_topics(bs)
        idempotent_batches(bs)
        librdkafka_transactions(bs)
        txn = java_commands("TxnClient", bs, stdin="produce_txn\ttx-v2\ttxn\tc:4,a:2\n")
        ended = [line.split("\t") for line in txn.splitlines() if line.startswith("txn\t")]
        assert [(f[2], f[4]) for f in ended] == [("commit", "true"), ("abort", "true")], txn   # transactions v2
        consume_and_commit(bs, "g-classic", "classic")
        consume_and_commit(bs, "g-848", "consumer")
        share = java_commands("ShareClient", bs, "g-share", "share", str(SHARE_RECORDS), str(SHARE_RECORDS), "explicit")
        assert share.endswith("done\n"), share
        offsets, groups, share_groups, txn_log, share_state = kafka_tools(bs, [
            ["format", OFFSETS_FORMATTER, "__consumer_offsets"], ["format", GROUP_FORMATTER, "__consumer_offsets"],
            ["format", SHARE_GROUP_FORMATTER, "__consumer_offsets"], ["format", TXN_FORMATTER, "__transaction_state"],
            ["format", SHARE_STATE_FORMATTER, "__share_group_state"]])
    data_logs = [data / f"{t}-0" / "00000000000000000000.log" for t in ("plain", "txn", "share")]
    every_log = logs(data, "__consumer_offsets") + logs(data, "__transaction_state") + \
        logs(data, "__share_group_state") + data_logs
    indexes = [p.with_suffix(ext) for p in every_log for ext in (".index", ".timeindex")]
    snapshots = sorted(p for d in ("plain-0", "txn-0", "share-0") for p in (data / d).glob("*.snapshot"))
    options = {
        "offsets": (logs(data, "__consumer_offsets"), ["--offsets-decoder"]),
        "txn": (logs(data, "__transaction_state"), ["--transaction-log-decoder"]),
        "share": (logs(data, "__share_group_state"), ["--share-group-state-decoder"]),
        "deep": (data_logs, ["--deep-iteration", "--print-data-log"]),
        "verify": (indexes, ["--verify-index-only"]),
        "sanity": (indexes, ["--index-sanity-check"]),
        "indexes": (indexes, []),
        "snapshots": (snapshots, []),
    }
    outputs = kafka_tools("-", [["dump", "--files", ",".join(map(str, files)), *opts]
                                for files, opts in options.values()])
    return Formats(data, offsets, groups, share_groups, txn_log, share_state, dict(zip(options, outputs)))


def failures(lines: list[str]) -> list[str]:
    return [line for line in lines if FAILURES.search(line)]


def payloads(lines: list[str]) -> list[tuple[dict, dict | None]]:
    """The (key, payload) JSON of each record kafka-dump-log decoded."""
    out = []
    for line in lines:
        m = re.search(r" key: (\{.*\}) payload: (.*)$", line)
        if m:
            out.append((json.loads(m.group(1)), None if m.group(2) == "<DELETE>" else json.loads(m.group(2))))
    return out


def formatted(lines: list[str]) -> list[dict]:
    return [json.loads(line) for line in lines if line.strip()]


def test_every_consumer_offsets_record_decodes(formats):
    assert not failures(formats.dumps["offsets"]), failures(formats.dumps["offsets"])
    records = payloads(formats.dumps["offsets"])
    assert {int(k["type"]) for k, _v in records} >= {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15}
    commits = {(k["data"]["group"], k["data"]["topic"]): v["data"]["offset"] for k, v in records
               if k["type"] == "1" and v is not None}
    assert commits[("g-classic", "plain")] == commits[("g-848", "plain")] == BATCHES * PER_BATCH
    [state] = [v["data"] for k, v in records if k["type"] == "15" and v is not None][-1:]
    assert [(t["topicName"], t["partitions"]) for t in state["initializedTopics"]] == [("share", [0])]



def test_kafkas_formatters_read_the_consumer_offsets_topic(formats):
    """Read while the broker runs (the dump above is of the files after it stopped: the log cleaner may have
    compacted superseded records in between, so the two are compared by what each holds, not record by record)."""
    for lines in (formats.offsets, formats.groups, formats.share_groups):
        assert not failures(lines), failures(lines)
    offsets = formatted(formats.offsets)
    assert {(r["key"]["data"]["group"], r["value"]["data"]["offset"]) for r in offsets
            if r["key"]["data"]["topic"] == "plain" and r["value"] is not None} >= \
        {("g-classic", BATCHES * PER_BATCH), ("g-848", BATCHES * PER_BATCH)}
    assert {r["key"]["data"]["group"] for r in formatted(formats.groups)} >= {"g-classic"}
    share = formatted(formats.share_groups)
    assert {r["key"]["type"] for r in share} == set(range(10, 16))
    [state] = [r["value"]["data"] for r in share if r["key"]["type"] == 15 and r["value"] is not None][-1:]
    assert [(t["topicName"], t["partitions"]) for t in state["initializedTopics"]] == [("share", [0])]


def test_every_transaction_log_record_decodes_with_its_status(formats):
    assert not failures(formats.dumps["txn"]), failures(formats.dumps["txn"])
    statuses: dict[str, list[str]] = {}
    for k, v in payloads(formats.dumps["txn"]):
        statuses.setdefault(k["data"]["transactionalId"], []).append(v["data"]["transactionStatus"])
    for txn_id in ("tx-v1", "tx-v2"):   # a commit then an abort each
        assert statuses[txn_id] == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort",
                                    "CompleteAbort"], statuses[txn_id]
    versions = {(k["data"]["transactionalId"], v["version"], v["data"].get("clientTransactionVersion"))
                for k, v in payloads(formats.dumps["txn"]) if v["data"]["transactionStatus"] != "Empty"}
    assert versions == {("tx-v1", "0", None), ("tx-v2", "1", 2)}   # v1 values carry the client's version
    assert not failures(formats.txn_log), failures(formats.txn_log)
    by_id: dict[str, list[str]] = {}
    for r in formatted(formats.txn_log):
        by_id.setdefault(r["key"]["data"]["transactionalId"], []).append(r["value"]["data"]["transactionStatus"])
    assert by_id == statuses


def test_every_share_group_state_record_decodes(formats):
    assert not failures(formats.dumps["share"]), failures(formats.dumps["share"])
    records = payloads(formats.dumps["share"])
    assert records and all(k["type"] == "0" for k, _v in records)   # ShareSnapshot
    states = [v["data"] for k, v in records if v is not None]
    assert any(b["deliveryState"] == 4 for s in states for b in s["stateBatches"])   # a REJECT archived a record
    assert any(b["deliveryCount"] == 2 for s in states for b in s["stateBatches"])   # a RELEASE came back
    assert (states[-1]["startOffset"], states[-1]["stateBatches"]) == (SHARE_RECORDS, [])   # every record settled
    assert not failures(formats.share_state), failures(formats.share_state)
    assert len(formatted(formats.share_state)) == len(records)


def test_segments_indexes_and_snapshots_pass_kafkas_checks(formats):
    for option in ("deep", "verify", "sanity", "indexes", "snapshots"):
        assert not failures(formats.dumps[option]), (option, failures(formats.dumps[option]))
    sane = [line for line in formats.dumps["sanity"] if line.endswith(("passed sanity check.", " is empty."))]
    assert len(sane) == sum(1 for line in formats.dumps["sanity"] if line.startswith("Dumping "))
    entries = [line for line in formats.dumps["indexes"] if line.startswith("offset: ")]
    assert len(entries) >= BATCHES - 1   # plain-0 indexes every batch but the first
    producer = [line for line in formats.dumps["snapshots"] if "producerId:" in line]
    assert any(f"lastSequence: {BATCHES * PER_BATCH - 1} " in line for line in producer), producer


# A data directory the tidelake before Kafka's formats wrote (main at 1e7db57), running this module's scenario
# without the Java transaction: create_topics, idempotent_batches, librdkafka_transactions, consume_and_commit of both
# groups and ShareClient explicit on "share"; its non-empty partitions and tidelake-metadata.json kept. Its files are
# the old ones: JSON producer snapshots, indexes naming base offsets, ShareSnapshot and StatePartitionMetadata values
# in the old layouts.
OLD_DATA_DIR = Path(__file__).with_name("tidelake_data_before_kafka_formats.tar.gz")


def test_a_data_directory_of_the_older_tidelake_loads_and_is_rewritten_in_kafkas_formats(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with tarfile.open(OLD_DATA_DIR) as tar:
        tar.extractall(data, filter="data")
    assert (data / "plain-0" / "00000000000000000100.snapshot").read_bytes()[8:9] == b"\n"   # the old JSON
    with EmbeddedBroker(data) as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for group in ("g-classic", "g-848"):
            [result] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
            assert [(tp.topic, tp.partition, tp.offset) for tp in result.result(30).topic_partitions] == \
                [("plain", 0, BATCHES * PER_BATCH)]
        r = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "share-groups", "describe", "g-share",
                            "--json", "-b", bs], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert [(p["topic"], p["partition"], p["start_offset"]) for p in json.loads(r.stdout)["partitions"]] == \
            [("share", 0, SHARE_RECORDS)]   # the old ShareSnapshot and StatePartitionMetadata records replayed
        c = Consumer({"bootstrap.servers": bs, "group.id": "reader", "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "enable.auto.commit": False})
        c.subscribe(["txn"])
        values = []
        while len(values) < 5:
            m = c.poll(1)
            if m is not None and not m.error():
                values.append(m.value().decode())
        c.close()
        assert values == [f"c{i}" for i in range(5)]
    files = [data / d / f"00000000000000000000{ext}" for d in ("plain-0", "txn-0") for ext in (".index", ".timeindex")]
    verify, sanity, snapshot = kafka_tools("-", [
        ["dump", "--files", ",".join(map(str, files)), "--verify-index-only"],
        ["dump", "--files", ",".join(map(str, files)), "--index-sanity-check"],
        ["dump", "--files", str(data / "plain-0" / "00000000000000000100.snapshot")]])
    for lines in (verify, sanity, snapshot):
        assert not failures(lines), failures(lines)
    assert sum(line.endswith(("passed sanity check.", " is empty.")) for line in sanity) == len(files)
    # the old .index (an entry per batch at its base offset: 5, 10, ...) was rebuilt from the .log, with the batches'
    # last offsets (at the default index.interval.bytes: a log loaded at start-up is rebuilt before the broker
    # hands it its topic's configs)
    segment = data / "plain-0" / "00000000000000000000"
    rebuilt = [rel for rel, _pos in struct.iter_unpack(">ii", segment.with_suffix(".index").read_bytes())]
    assert all(rel % PER_BATCH == PER_BATCH - 1 for rel in rebuilt), rebuilt
    times = [rel for _ts, rel in struct.iter_unpack(">qi", segment.with_suffix(".timeindex").read_bytes())]
    assert times and all(rel % PER_BATCH == PER_BATCH - 1 for rel in times), times
    assert any(f"lastSequence: {BATCHES * PER_BATCH - 1} " in line for line in snapshot), snapshot
