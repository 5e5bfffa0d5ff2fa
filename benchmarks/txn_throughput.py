"""Transactional vs plain produce throughput, on tidelake and on Tansu.

Each broker runs as its own process (tidelake: ``tidelake broker start`` on a temp dir; Tansu: its
binary with memory storage). One confluent-kafka producer writes N records of SIZE bytes to a
3-partition topic:
  plain        acks=all, enable.idempotence=true (what a transactional producer builds on)
  txn/T        the same records in transactions of T records (begin, produce T, commit)
and we report records/s, MB/s, and the transactional / plain ratio per broker.

    .venv/bin/python benchmarks/txn_throughput.py [--records 20000] [--size 1024] [--txn-sizes 10,100,1000]
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conftest import free_port, tansu_binary, wait_port  # noqa: E402

PARTITIONS = 3


def start_tidelake(data_dir: str, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir", data_dir,
                             "--listen", f"127.0.0.1:{port}", "--log-level", "WARNING"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_tansu(port: int) -> subprocess.Popen:
    return subprocess.Popen([str(tansu_binary()), "broker", "--storage-engine", "memory://tansu/",
                             "--listener-url", f"tcp://127.0.0.1:{port}",
                             "--advertised-listener-url", f"tcp://127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        fut.result(30)


def _produce(p: Producer, topic: str, payload: bytes, partition: int) -> None:
    """One produce, waiting for room in librdkafka's queue when it is full."""
    while True:
        try:
            p.produce(topic, payload, partition=partition)
            break
        except BufferError:
            p.poll(0.01)
    p.poll(0)


def run_plain(bootstrap: str, topic: str, n: int, payload: bytes) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "log_level": 3})
    p.produce(topic, payload, partition=0)  # producer id, metadata and connections before the clock starts
    p.flush(30)
    t0 = time.perf_counter()
    for i in range(n):
        _produce(p, topic, payload, i % PARTITIONS)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - t0
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered")
    return elapsed


def run_txn(bootstrap: str, topic: str, n: int, payload: bytes, txn_size: int, txn_id: str) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, "log_level": 3})
    p.init_transactions(30)
    t0 = time.perf_counter()
    for start in range(0, n, txn_size):
        p.begin_transaction()
        for i in range(start, min(n, start + txn_size)):
            _produce(p, topic, payload, i % PARTITIONS)
        p.commit_transaction(60)
    return time.perf_counter() - t0


def bench_broker(kind: str, n: int, size: int, txn_sizes: list[int]) -> dict[str, float]:
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="txnbench-")
    proc = start_tidelake(tmp, port) if kind == "tidelake" else start_tansu(port)
    bootstrap = f"127.0.0.1:{port}"
    payload = os.urandom(size)
    results: dict[str, float] = {}
    try:
        wait_port(port, 60)
        create_topic(bootstrap, "warmup")
        run_plain(bootstrap, "warmup", min(n, 2000), payload)  # connections, metadata, JIT-free warm-up
        create_topic(bootstrap, "plain")
        results["plain"] = n / run_plain(bootstrap, "plain", n, payload)
        for t in txn_sizes:
            create_topic(bootstrap, f"txn{t}")
            results[f"txn/{t}"] = n / run_txn(bootstrap, f"txn{t}", n, payload, t, f"bench-{t}")
    finally:
        stop(proc)
    return results


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if the broker has not exited within 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--txn-sizes", default="10,100,1000")
    ap.add_argument("--brokers", default="tidelake,tansu")
    args = ap.parse_args()
    txn_sizes = [int(x) for x in args.txn_sizes.split(",")]
    table = {}
    for kind in args.brokers.split(","):
        table[kind] = bench_broker(kind, args.records, args.size, txn_sizes)
    mb = args.size / 1e6
    print(f"{args.records} records x {args.size} B, {PARTITIONS} partitions, librdkafka {__import__('confluent_kafka').libversion()[0]}")
    print("| broker | workload | records/s | MB/s | vs plain (same broker) | tidelake / Tansu |")
    print("|---|---|---:|---:|---:|---:|")
    for kind, res in table.items():
        for name, rate in res.items():
            vs_tansu = ""
            if kind == "tidelake" and "tansu" in table and name in table["tansu"]:
                vs_tansu = f"{rate / table['tansu'][name]:.2f}"
            print(f"| {kind} | {name} | {rate:,.0f} | {rate * mb:.1f} | {rate / res['plain']:.2f} | {vs_tansu} |")


if __name__ == "__main__":
    main()
