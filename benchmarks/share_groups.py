"""Share-group (KIP-932) consume throughput with 1, 2 and 4 consumers on one partition, against a classic
consumer group reading the same records, in the same run.

The broker runs as its own process (``tidelake broker start`` on a temp dir); each share group is set to
``share.auto.offset.reset=earliest`` (IncrementalAlterConfigs on the group) before its consumers start. One partition holds N records of SIZE bytes. Each consumer is its own process:
  classic      one confluent-kafka ``Consumer`` (a partition has one owner in a classic group)
  share/K      K ``ShareConsumer``s in one share group (implicit acknowledgement: each poll accepts the
               previous one's records), until the group has received every record
Each workload uses a fresh group. We report the time from the consumers' start to their first record
(process start, joining the group: the classic group waits group.initial.rebalance.delay.ms), records/s
(distinct records received / time from the first record to the last), the share/classic ratio, and
redeliveries (records received more than once).

    .venv/bin/python benchmarks/share_groups.py [--records 50000] [--size 100] [--consumers 1,2,4]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   NewTopic, ResourceType)

from conftest import free_port, wait_port  # noqa: E402

TOPIC = "share-bench"
DEADLINE_S = 300


def start_tidelake(data_dir: str, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir", data_dir,
                             "--listen", f"127.0.0.1:{port}", "--log-level", "WARNING"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def load(bootstrap: str, n: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        fut.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20})
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, str(i).encode().ljust(size, b"x"), partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0


def classic_worker(bootstrap: str, group: str, n: int, out) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([TOPIC])
    seen, deadline, first = 0, time.monotonic() + DEADLINE_S, None
    while seen < n and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                first = first or time.monotonic()
                seen += 1
    out.put((first, time.monotonic(), {i: 1 for i in range(seen)}))
    c.close()


def share_worker(bootstrap: str, group: str, total, n: int, out) -> None:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.subscribe([TOPIC])
    got: dict[int, int] = {}
    deadline = time.monotonic() + DEADLINE_S
    first = last = None
    while total.value < n and time.monotonic() < deadline:
        fresh = 0
        for m in c.poll(0.2):
            if m.error() is None:
                first = first or time.monotonic()
                if m.offset() not in got:
                    fresh += 1
                got[m.offset()] = got.get(m.offset(), 0) + 1
                last = time.monotonic()
        if fresh:
            with total.get_lock():
                total.value += fresh
    out.put((first, last or time.monotonic(), got))
    c.close()


def run(bootstrap: str, workload: str, k: int, n: int) -> tuple[float, float, int, int]:
    """(seconds to the first record, records/s from the first record to the last, distinct records,
    redeliveries) of one workload."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    total = ctx.Value("q", 0)
    group = f"{workload}-{k}-{time.monotonic_ns()}"
    if workload == "classic":
        procs = [ctx.Process(target=classic_worker, args=(bootstrap, group, n, out))]
    else:
        earliest = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.incremental_alter_configs([earliest])[earliest].result(30)
        procs = [ctx.Process(target=share_worker, args=(bootstrap, group, total, n, out)) for _ in range(k)]
    began = time.monotonic()
    for p in procs:
        p.start()
    results = [out.get(timeout=DEADLINE_S + 60) for _ in procs]
    for p in procs:
        p.join(30)
    ended = max(r[1] for r in results)
    first = min(r[0] for r in results if r[0] is not None)
    counts: dict[int, int] = {}
    for _tag, _t, got in results:
        for offset, times in got.items():
            counts[offset] = counts.get(offset, 0) + times
    distinct = len(counts)
    return first - began, distinct / (ended - first), distinct, sum(counts.values()) - distinct


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--consumers", default="1,2,4")
    args = ap.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        broker = start_tidelake(data, port)
        try:
            wait_port(port, 60)
            bootstrap = f"127.0.0.1:{port}"
            load(bootstrap, args.records, args.size)
            rows = [("classic", 1, *run(bootstrap, "classic", 1, args.records))]
            for k in (int(x) for x in args.consumers.split(",")):
                rows.append(("share", k, *run(bootstrap, "share", k, args.records)))
        finally:
            os.kill(broker.pid, signal.SIGTERM)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(broker.pid, signal.SIGKILL)
                broker.wait(10)
    classic = rows[0][3]
    print(f"{args.records} records x {args.size} B, 1 partition, librdkafka "
          f"{__import__('confluent_kafka').libversion()[0]}, tidelake broker process")
    print("| group | consumers | first record after (s) | records received | records/s | vs classic | redeliveries |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind, k, start, rate, distinct, again in rows:
        print(f"| {kind} | {k} | {start:.1f} | {distinct:,} | {rate:,.0f} | {rate / classic:.2f} | {again} |")


if __name__ == "__main__":
    main()
