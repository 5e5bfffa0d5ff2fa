"""Rebalance benchmark (issue 4 item 9).

1. Time to a stable assignment as members join one by one (1 -> N) and then leave one by one
   (N -> 1), with real librdkafka consumers against an embedded tidelake broker: classic eager
   (range), classic cooperative-sticky, and KIP-848 (group.protocol=consumer, server-side uniform).
   "Stable" = every current member has at least one partition, no partition has two owners, and
   together they own every partition. Time is measured from the membership change (subscribe /
   close) to that state, polling every consumer in turn.
2. Failure detection: a consumer process is killed with SIGKILL; time until the survivor owns all
   partitions (bounded below by the session timeout).
3. Partitions moved per membership change for each server-side assignor (pure functions, no
   broker): 1 -> N joins then N -> 1 leaves on P partitions; a "move" is a partition that changes
   from one surviving member to another (partitions of a member that left are not counted).

Usage: .venv/bin/python benchmarks/rebalance.py [--members 16] [--partitions 32] [--heartbeat-ms 500]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tidelake.coordinator.assignors import ASSIGNORS, Subscription, partitions_moved  # noqa: E402

TOPIC = "bench"


def stable(consumers: list, partitions: int) -> bool:
    owned = []
    for c in consumers:
        mine = [tp.partition for tp in c.assignment()]
        if not mine:
            return False
        owned.extend(mine)
    return sorted(owned) == list(range(partitions))


def wait_stable(consumers: list, partitions: int, timeout: float = 120) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        for c in consumers:
            c.poll(0.01)
        if stable(consumers, partitions):
            return time.perf_counter() - t0
    raise TimeoutError(f"no stable assignment after {timeout}s")


def consumer_conf(bootstrap: str, group: str, variant: str, heartbeat_ms: int) -> dict:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "log_level": 3}
    if variant == "kip848-uniform":
        conf.update({"group.protocol": "consumer", "group.remote.assignor": "uniform"})
    else:
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": heartbeat_ms,
                     "partition.assignment.strategy": "range" if variant == "classic-range" else "cooperative-sticky"})
    return conf


def run_join_leave(bootstrap: str, variant: str, members: int, partitions: int, heartbeat_ms: int) -> dict:
    from confluent_kafka import Consumer
    group = f"bench-{variant}"
    consumers = []
    joins, leaves = [], []
    try:
        for i in range(members):
            c = Consumer({**consumer_conf(bootstrap, group, variant, heartbeat_ms), "client.id": f"m{i:02d}"})
            c.subscribe([TOPIC])
            consumers.append(c)
            joins.append(wait_stable(consumers, partitions))
        while len(consumers) > 1:
            consumers.pop(0).close()
            leaves.append(wait_stable(consumers, partitions))
    finally:
        for c in consumers:
            c.close()
    return {"variant": variant, "join_total_s": sum(joins), "join_median_s": statistics.median(joins),
            "leave_total_s": sum(leaves), "leave_median_s": statistics.median(leaves)}


CHILD = r"""
import json, sys
from confluent_kafka import Consumer
c = Consumer(json.loads(sys.argv[1])); c.subscribe([sys.argv[2]])
last = None
while True:
    c.poll(0.05)
    now = sorted(tp.partition for tp in c.assignment())
    if now != last:
        print(json.dumps(now), flush=True); last = now
"""


def run_failure(bootstrap: str, variant: str, partitions: int, heartbeat_ms: int, session_ms: int) -> dict:
    from confluent_kafka import Consumer
    conf = consumer_conf(bootstrap, f"fail-{variant}", variant, heartbeat_ms)
    if variant != "kip848-uniform":
        conf["session.timeout.ms"] = session_ms
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(conf), TOPIC], stdout=subprocess.PIPE, text=True)
    survivor = Consumer(conf)
    survivor.subscribe([TOPIC])
    try:
        os.set_blocking(child.stdout.fileno(), False)
        child_parts: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            survivor.poll(0.02)
            line = child.stdout.readline()
            if line:
                child_parts = json.loads(line)
            mine = [tp.partition for tp in survivor.assignment()]
            if child_parts and mine and sorted(child_parts + mine) == list(range(partitions)):
                break
        else:
            raise TimeoutError("group never split between the two members")
        t0 = time.perf_counter()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        while time.perf_counter() - t0 < 120:
            survivor.poll(0.02)
            if sorted(tp.partition for tp in survivor.assignment()) == list(range(partitions)):
                return {"variant": variant, "session_ms": session_ms, "takeover_s": time.perf_counter() - t0}
        raise TimeoutError("partitions of the killed consumer never moved")
    finally:
        survivor.close()
        if child.poll() is None:
            child.kill()
            child.wait(10)


def partitions_moved_per_change(members: int, partitions: int) -> dict[str, dict]:
    out = {}
    parts = {TOPIC: partitions}
    for name in ("range", "roundrobin", "sticky"):
        assign = ASSIGNORS[name]
        current: dict = {}
        moved = []
        ids = [f"m{i:02d}" for i in range(members)]
        sequence = [ids[:k] for k in range(1, members + 1)] + [ids[k:] for k in range(1, members)]
        for group in sequence:
            subs = {m: Subscription((TOPIC,), tuple(current.get(m, ()))) for m in group}
            new = assign(subs, parts)
            survivors = {m: current[m] for m in group if m in current}
            moved.append(partitions_moved(survivors, new))
            current = new
        out[name] = {"total": sum(moved), "mean": sum(moved) / len(moved), "max": max(moved),
                     "changes": len(moved)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=16)
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    ap.add_argument("--session-ms", type=int, default=3000)
    args = ap.parse_args()

    from confluent_kafka.admin import AdminClient, NewTopic
    from tidelake.broker.embedded import EmbeddedBroker

    moved = partitions_moved_per_change(args.members, args.partitions)
    config = {"group.min.session.timeout.ms": "1000",
              "group.consumer.heartbeat.interval.ms": str(args.heartbeat_ms),
              "group.consumer.session.timeout.ms": str(args.session_ms)}
    with tempfile.TemporaryDirectory() as d, EmbeddedBroker(Path(d), config=config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for f in admin.create_topics([NewTopic(TOPIC, args.partitions, 1)]).values():
            f.result(15)
        timings = [run_join_leave(broker.bootstrap_servers, v, args.members, args.partitions, args.heartbeat_ms)
                   for v in ("classic-range", "classic-cooperative-sticky", "kip848-uniform")]
        failures = [run_failure(broker.bootstrap_servers, v, args.partitions, args.heartbeat_ms, args.session_ms)
                    for v in ("classic-range", "kip848-uniform")]

    print(f"\n{args.partitions} partitions, 1 -> {args.members} -> 1 members, heartbeat {args.heartbeat_ms} ms\n")
    print("| protocol | join 1->N total s | median s per join | leave N->1 total s | median s per leave |")
    print("|---|---:|---:|---:|---:|")
    for t in timings:
        print(f"| {t['variant']} | {t['join_total_s']:.2f} | {t['join_median_s']:.2f} | "
              f"{t['leave_total_s']:.2f} | {t['leave_median_s']:.2f} |")
    print("\n| protocol | session timeout ms | SIGKILL -> survivor owns all partitions, s |")
    print("|---|---:|---:|")
    for f in failures:
        print(f"| {f['variant']} | {f['session_ms']} | {f['takeover_s']:.2f} |")
    print("\n| assignor | partitions moved, total | mean per change | max per change | changes |")
    print("|---|---:|---:|---:|---:|")
    for name, m in moved.items():
        print(f"| {name} | {m['total']} | {m['mean']:.2f} | {m['max']} | {m['changes']} |")


if __name__ == "__main__":
    main()
