"""Exactly-once with real clients: the reference Java client (one JVM for several scenarios) and
confluent-kafka consume-transform-produce with sendOffsetsToTransaction across a crashed instance."""
from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_peer import java_command
from txn_helpers import create_topics, read_all
from tidelake.broker.embedded import EmbeddedBroker

BROKER_CONFIG = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
                 "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", port=0, config=BROKER_CONFIG) as b:
        yield b


def produce_plain(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), key=f"k{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def run_java(bootstrap: str, script: list[list[str]], timeout: float = 300) -> list[list[list[str]]]:
    """Run TxnClient with one command per entry; returns each command's output lines (split by TAB)."""
    proc = subprocess.run(java_command("TxnClient", bootstrap),
                          input="".join("\t".join(c) + "\n" for c in script), capture_output=True, text=True,
                          timeout=timeout)
    outputs, current = [], []
    for line in proc.stdout.splitlines():
        if line == "end":
            outputs.append(current)
            current = []
        else:
            current.append(line.split("\t"))
    assert len(outputs) == len(script), f"java exited early (rc {proc.returncode}): {proc.stderr[-3000:]}"
    for cmd, out in zip(script, outputs):
        assert not (out and out[0][0] == "error"), f"{cmd}: {out}"
    return outputs


@pytest.mark.java
def test_java_transactions_commit_abort_fence_and_consume_transform_produce(broker):
    bs = broker.bootstrap_servers
    n_in = 40
    create_topics(bs, {"jt": 2, "jfence": 1, "jin": 3, "jout": 3})
    inputs = [f"rec-{i:03d}" for i in range(n_in)]
    produce_plain(bs, "jin", inputs, 3)
    out = run_java(bs, [
        ["produce_txn", "java-tx", "jt", "c:5,a:3,c:4,a:2"],
        ["read", "jt", "read_committed", "30000"],
        ["read", "jt", "read_uncommitted", "30000"],
        ["fence", "java-fence", "jfence"],
        ["read", "jfence", "read_committed", "30000"],
        # 40 records in poll batches of <= 7; the 2nd batch is aborted and re-processed
        ["ctp", "jin", "jout", "java-ctp-group", "java-ctp-tx", str(n_in), "2", "subscribe"],
        ["read", "jout", "read_committed", "30000"],
        ["committed", "java-ctp-group", "jin", "3"],
    ])
    committed_values = sorted(r[3] for r in out[1] if r[0] == "rec")
    expected = sorted([f"java-tx/t0/{i}" for i in range(5)] + [f"java-tx/t2/{i}" for i in range(4)])
    assert committed_values == expected
    all_values = sorted(r[3] for r in out[2] if r[0] == "rec")
    assert all_values == sorted(expected + [f"java-tx/t1/{i}" for i in range(3)] + [f"java-tx/t3/{i}" for i in range(2)])

    # Transactions v2 (the 4.4 client's default on a broker finalizing transaction.version 2): every EndTxn, commit
    # or abort, bumps the producer's epoch, with one producer id throughout.
    txns = [r for r in out[0] if r[0] == "txn"]
    assert [(r[2], r[4]) for r in txns] == [("commit", "true"), ("abort", "true"), ("commit", "true"), ("abort", "true")]
    assert len({r[5] for r in txns}) == 1
    epochs = [int(r[6]) for r in txns]
    assert epochs == list(range(epochs[0], epochs[0] + 4)), epochs

    fence_lines = out[3]
    assert fence_lines[0][0] == "fenced"
    assert fence_lines[0][1] == "org.apache.kafka.common.errors.ProducerFencedException"
    assert [r[3] for r in out[4] if r[0] == "rec"] == ["fresh"]  # the zombie's record was aborted

    ctp = out[5][0]
    assert ctp[:3] == ["ctp", "processed", str(n_in)] and ctp[6] == "1"  # one aborted batch
    outputs = [r[3] for r in out[6] if r[0] == "rec"]
    assert sorted(outputs) == sorted(v.upper() for v in inputs)  # each input exactly once
    committed = {int(r[1]): int(r[2]) for r in out[7] if r[0] == "committed"}
    assert committed == {p: len(range(p, n_in, 3)) for p in range(3)}
    # the read_uncommitted view does contain the aborted batch's duplicates
    assert len(read_all(bs, "jout", 3, "read_uncommitted")) > n_in


def test_confluent_consume_transform_produce_survives_a_crashed_instance(broker):
    bs = broker.bootstrap_servers
    n = 60
    create_topics(bs, {"cin": 3, "cout": 3})
    inputs = [f"v{i:03d}" for i in range(n)]
    produce_plain(bs, "cin", inputs, 3)

    def instance():
        producer = Producer({"bootstrap.servers": bs, "transactional.id": "ctp-tx", "linger.ms": 5})
        producer.init_transactions(30)  # fences a previous instance and aborts its open transaction
        consumer = Consumer({"bootstrap.servers": bs, "group.id": "ctp-group", "isolation.level": "read_committed",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 6000})
        consumer.subscribe(["cin"])
        return producer, consumer

    def process_batch(producer, consumer, commit: bool) -> int:
        msgs = [m for m in consumer.consume(num_messages=7, timeout=0.5) if not m.error()]
        if not msgs:
            return 0
        producer.begin_transaction()
        for m in msgs:
            producer.produce("cout", m.value().upper(), key=m.key(), partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # outputs and offsets are in the logs, the transaction stays open
        return len(msgs)

    # instance A commits a few batches, then "crashes" in the middle of a transaction
    producer, consumer = instance()
    done = 0
    deadline = time.monotonic() + 60
    while done < n // 3 and time.monotonic() < deadline:
        done += process_batch(producer, consumer, commit=True)
    assert done >= n // 3
    in_flight = 0
    while in_flight == 0 and time.monotonic() < deadline:
        in_flight = process_batch(producer, consumer, commit=False)
    assert in_flight > 0
    consumer.close()  # leaves the group without committing anything
    del producer  # never commits: instance B's init_transactions must abort it

    # instance B picks up from the committed offsets and finishes
    producer, consumer = instance()
    deadline = time.monotonic() + 90
    while done < n and time.monotonic() < deadline:
        done += process_batch(producer, consumer, commit=True)
    assert done == n  # exactly the records A did not commit were processed again
    committed = consumer.committed([TopicPartition("cin", p) for p in range(3)], timeout=30)
    assert {tp.partition: tp.offset for tp in committed} == {p: len(range(p, n, 3)) for p in range(3)}
    consumer.close()

    assert read_all(bs, "cout", 3, "read_committed") == sorted(v.upper() for v in inputs)
    assert len(read_all(bs, "cout", 3, "read_uncommitted")) == n + in_flight  # the aborted outputs are there
