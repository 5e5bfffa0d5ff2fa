"""kill -9 of a real ``tidelake broker start`` process while a producer runs transactions: after a
restart every transaction is either complete or absent in read_committed, never partial, and every
transaction whose commit was acknowledged is there."""
from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap
import time

from conftest import ROOT, free_port, wait_port
from txn_helpers import create_topics, end_offsets, raw_request, read_all, wait_for

RECORDS_PER_TXN = 6
PARTITIONS = 3

PRODUCER_SCRIPT = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer
    bootstrap, topic, txn_id, first, k, parts, pause_at = sys.argv[1:8]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 3000,
                  "linger.ms": 2, "message.timeout.ms": 3000})
    p.init_transactions(30)
    j = int(first)
    while True:
        p.begin_transaction()
        for i in range(int(k)):
            p.produce(topic, f"{j}-{i}".encode(), partition=i % int(parts))
        p.flush(30)
        print(f"flushed {j}", flush=True)
        if j == int(pause_at):  # records of every partition are in the log; the outcome is not decided
            sys.stdin.readline()
        p.commit_transaction(30)
        print(f"committed {j}", flush=True)
        j += 1
""")


def start_broker(data_dir, port):
    cmd = [sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir", str(data_dir),
           "--listen", f"127.0.0.1:{port}", "--log-level", "WARNING",
           "--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(port, timeout=60)
    except TimeoutError:
        proc.kill()
        raise AssertionError(proc.communicate(timeout=10)[1].decode()[-3000:])
    return proc


def kill9(proc) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


def no_unfinished_transactions(bootstrap: str) -> bool:
    from kafka.protocol.admin import ListTransactionsRequest
    resp = raw_request(bootstrap, ListTransactionsRequest(
        state_filters=["Ongoing", "PrepareCommit", "PrepareAbort"], producer_id_filters=[]), 0)
    return resp.error_code == 0 and not resp.transaction_states


def test_kill9_mid_transaction_never_exposes_a_partial_one(tmp_path):
    data, port = tmp_path / "data", free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = start_broker(data, port)
    acknowledged: set[int] = set()
    first_txn = 0
    try:
        create_topics(bootstrap, {"crash": PARTITIONS})
        for round_ in range(2):
            # round 0 kills the broker while transaction `pause_at` is open (records written, no
            # EndTxn yet); round 1 kills it at whatever point the free-running producer is at
            pause_at = first_txn + 5 if round_ == 0 else -1
            producer = subprocess.Popen(
                [sys.executable, "-c", PRODUCER_SCRIPT, bootstrap, "crash", "crash-tx", str(first_txn),
                 str(RECORDS_PER_TXN), str(PARTITIONS), str(pause_at)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                commits = 0
                while True:
                    line = producer.stdout.readline()
                    assert line, "producer stopped"
                    kind, j = line.split()
                    if kind == "committed":
                        acknowledged.add(int(j))
                        commits += 1
                    if (round_ == 0 and kind == "flushed" and int(j) == pause_at) or (round_ == 1 and commits == 8):
                        break
                kill9(broker)
            finally:
                kill9(producer)
                rest = producer.stdout.read()
                acknowledged.update(int(x.split()[1]) for x in rest.splitlines() if x.startswith("committed"))
            first_txn = max(acknowledged) + 100

            broker = start_broker(data, port)
            # the open transaction is aborted by its timeout (or completed if it was past PrepareCommit)
            wait_for(lambda: no_unfinished_transactions(bootstrap), timeout=60, what="transactions finished")
            values = read_all(bootstrap, "crash", PARTITIONS, "read_committed")
            per_txn = collections.Counter(int(v.split("-")[0]) for v in values)
            partial = {j: c for j, c in per_txn.items() if c != RECORDS_PER_TXN}
            assert not partial, f"round {round_}: partial transactions visible: {partial}"
            assert acknowledged <= set(per_txn), f"acknowledged commits missing: {acknowledged - set(per_txn)}"
            if round_ == 0:  # the open transaction was aborted: in the log, not in read_committed
                assert pause_at not in per_txn
                raw = read_all(bootstrap, "crash", PARTITIONS, "read_uncommitted")
                assert sum(1 for v in raw if v.startswith(f"{pause_at}-")) == RECORDS_PER_TXN
            lso = end_offsets(bootstrap, "crash", PARTITIONS, "read_committed")
            assert lso == end_offsets(bootstrap, "crash", PARTITIONS, "read_uncommitted")
    finally:
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            kill9(broker)
