"""What replication costs: one confluent-kafka producer (acks=all, idempotent) writing to a
3-partition topic on a single broker (the baseline) and on a three-broker cluster (replication factor 3,
min.insync.replicas=2), every broker a separate `tidelake broker start` process on this machine; then one
confluent-kafka consumer reading every record back from the partitions' leaders (assign, no group).

    .venv/bin/python benchmarks/replication_throughput.py [--records 100000] [--size 1024] [--no-results]

Prints records/s and MB/s of each and the cluster's figure as a ratio of the single broker's, and writes
them into benchmarks/RESULTS.md (its Replication section) unless --no-results.
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

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tidelake.cluster.local_cluster import LocalCluster  # noqa: E402
from tidelake.cluster.zookeeper_server import free_port  # noqa: E402


def _create(bootstrap: str, rf: int, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("bench", 3, rf, config=configs)], request_timeout=30).values():
        f.result(60)
    time.sleep(2)  # leaders known to every broker and client


def _produce(bootstrap: str, records: int, size: int) -> float:
    """Seconds to produce and acknowledge ``records`` records of ``size`` bytes."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.kbytes": 512_000})
    value = os.urandom(size)
    failed = []
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce("bench", value=value, key=str(i % 1000).encode(),
                          on_delivery=lambda err, _m: err is not None and failed.append(err))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(300):
        raise RuntimeError("records left unacknowledged")
    elapsed = time.perf_counter() - start
    if failed:
        raise RuntimeError(f"{len(failed)} records failed, e.g. {failed[0]}")
    return elapsed


def _consume(bootstrap: str, records: int) -> float:
    """Seconds to read ``records`` records back from the start of the topic's three partitions."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-read", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 10_485_760})
    c.assign([TopicPartition("bench", p, 0) for p in range(3)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 300
    try:
        while got < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read {got} of {records} records in 300 s")
            got += sum(1 for m in c.consume(10_000, 1.0) if m.error() is None)
        return time.perf_counter() - start
    finally:
        c.close()


def _single_broker(root: Path, records: int, size: int) -> tuple[float, float]:
    port = free_port()
    log = open(root / "single.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir",
                             str(root / "single"), "--listen", f"127.0.0.1:{port}", "--log-level", "WARNING"],
                            cwd=ROOT, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=1)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        _create(f"127.0.0.1:{port}", 1, {})
        return _produce(f"127.0.0.1:{port}", records, size), _consume(f"127.0.0.1:{port}", records)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(60)


def _cluster(root: Path, records: int, size: int) -> tuple[float, float]:
    cluster = LocalCluster(root / "cluster", 3, configs={"offsets.topic.num.partitions": "3"},
                           log_level="WARNING")
    cluster.start()
    try:
        time.sleep(3)  # the controller's first metadata reaches every broker
        _create(cluster.bootstrap_servers, 3, {"min.insync.replicas": "2"})
        return _produce(cluster.bootstrap_servers, records, size), _consume(cluster.bootstrap_servers, records)
    finally:
        cluster.stop()


START_MARK = "<!-- replication_throughput.py: start -->"
END_MARK = "<!-- replication_throughput.py: end -->"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--no-results", action="store_true", help="do not write benchmarks/RESULTS.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidelake-repl-bench-") as tmp:
        root = Path(tmp)
        single, single_read = _single_broker(root, args.records, args.size)
        replicated, replicated_read = _cluster(root, args.records, args.size)
    mb = args.records * args.size / 1e6
    lines = [
        f"Command: `.venv/bin/python benchmarks/replication_throughput.py --records {args.records} --size {args.size}`",
        "",
        f"{args.records} records x {args.size} B, 3 partitions, acks=all, idempotent producer; then one consumer "
        "reading them all back from the leaders",
        "",
        "| setup | produce records/s | produce MB/s | vs single broker | consume records/s | consume MB/s | "
        "vs single broker |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| single broker, RF 1 (baseline) | {args.records / single:,.0f} | {mb / single:.1f} | 1.00 | "
        f"{args.records / single_read:,.0f} | {mb / single_read:.1f} | 1.00 |",
        f"| 3 brokers, RF 3, min.insync.replicas 2 | {args.records / replicated:,.0f} | {mb / replicated:.1f} | "
        f"{single / replicated:.2f} | {args.records / replicated_read:,.0f} | {mb / replicated_read:.1f} | "
        f"{single_read / replicated_read:.2f} |",
    ]
    print("\n".join(lines))
    if not args.no_results:
        from results_file import replace_marked  # beside this script
        replace_marked(START_MARK, END_MARK, ["", *lines, ""])


if __name__ == "__main__":
    main()
