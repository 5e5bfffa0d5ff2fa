"""Failover of a partition leader on a three-broker cluster, with real processes and real clients:
kill -9 trials and planned moves (controlled shutdown), every record checked.

    .venv/bin/python benchmarks/replication_failover.py [--trials 20] [--planned 5] [--session-timeout-ms 4000]

ZooKeeper and three `tidelake broker start` processes (`LocalCluster`); one topic of 3 partitions,
replication factor 3, min.insync.replicas=2. A confluent-kafka idempotent producer (acks=all) writes
numbered records at a fixed rate the whole time; a consumer at read_uncommitted reads along and notes
what it saw at every offset. Each kill trial waits a random 0.5-2 s, kill -9s the leader of one partition,
waits for the controller's new leader and for writes to that partition to go on, then restarts the
killed broker and waits until it is back in every ISR (so each trial starts with three brokers). Each
planned move stops the leader with SIGTERM (controlled shutdown moves its leaderships first) and
restarts it the same way.

At the end every record is read back and compared with what the producer was told:
lost (acknowledged, not at its offset), duplicated (a numbered record stored twice), out of order (per
partition), visible then disappeared (the read_uncommitted consumer saw a record at an offset that
later holds something else or nothing). Failover time = from the kill (or SIGTERM) to the first
acknowledgement of a record the new leader wrote (an offset at or past the start of the leader epoch
that followed the kill, read from the replicas' leader-epoch caches), reported as p50/max beside
zookeeper.session.timeout.ms (kill) and the 1 s goal (planned moves).

--no-results leaves RESULTS.md as it is; --json prints the summary as one JSON line (the fault tests
run it so).
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tidelake.cluster.local_cluster import LocalCluster  # noqa: E402
from tidelake.log import LogConfig, PartitionLog  # noqa: E402

TOPIC = "failover"
PARTITIONS = 3
START_MARK = "<!-- replication_failover.py: start -->"
END_MARK = "<!-- replication_failover.py: end -->"


def wait_until(what: str, check, timeout_s: float, interval_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception:  # the cluster may be mid-change: ask again
            pass
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")


class NumberedProducer:
    """An idempotent acks=all producer writing numbered records round robin over the partitions at
    ``rate`` records a second, in a thread; notes the time each acknowledgement arrived."""

    def __init__(self, bootstrap: str, rate: int):
        self.rate = rate
        self.acked: dict[tuple[int, int], bytes] = {}
        self.ack_times: dict[int, list[tuple[float, int]]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 2, "message.timeout.ms": 300000, "log_level": 2})
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err, m) -> None:
        if err is not None:
            self.failed.append(str(err))
            return
        self.acked[(m.partition(), m.offset())] = m.value()
        self.ack_times[m.partition()].append((time.monotonic(), m.offset()))

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            if self.sent >= self.rate * (time.monotonic() - start):
                self._producer.poll(0.002)
                continue
            try:
                self._producer.produce(TOPIC, partition=self.sent % PARTITIONS, value=b"%09d" % self.sent,
                                       on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                self._producer.poll(0.01)
            self._producer.poll(0)

    def acks_after(self, partition: int, t: float) -> int:
        return sum(1 for at, _o in self.ack_times[partition] if at > t)

    def stop(self) -> int:
        """Stop producing; the number of records still unacknowledged after the final flush."""
        self._stop.set()
        self._thread.join(30)
        return self._producer.flush(120)


class WatchingConsumer:
    """Reads the topic at read_uncommitted while the trials run, noting the value seen at each offset
    (what consumers were shown; it must still be there at the end)."""

    def __init__(self, bootstrap: str):
        self.seen: dict[tuple[int, int], bytes] = {}
        self.changed: list[tuple[int, int]] = []  # an offset read twice with different values
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-watch",
                                   "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                                   "auto.offset.reset": "earliest", "enable.partition.eof": False, "log_level": 2})
        self._consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self._consumer.consume(1000, 0.2):
                if m.error() is not None:
                    continue
                key = (m.partition(), m.offset())
                before = self.seen.setdefault(key, m.value())
                if before != m.value():
                    self.changed.append(key)

    def caught_up_to(self, ends: dict[int, int]) -> bool:
        return all(e == 0 or (p, e - 1) in self.seen for p, e in ends.items())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


@dataclass
class Trial:
    kind: str  # "kill" or "planned"
    partition: int
    victim: int
    epoch_before: int
    at: float  # monotonic time of the kill / SIGTERM
    new_leader: int = -1
    elected_s: float = 0.0  # until ZooKeeper names another leader
    failover_s: float | None = None  # until the first acknowledgement of a record the new leader wrote


@dataclass
class Outcome:
    trials: list[Trial] = field(default_factory=list)
    acked: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    vanished: int = 0
    unacknowledged: int = 0
    failed: int = 0


def _zk_state(zk: KazooClient, partition: int) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")[0])


def _back_in_every_isr(zk: KazooClient, broker_id: int) -> bool:
    return all(broker_id in _zk_state(zk, p)["isr"] for p in range(PARTITIONS))


def _run_trial(cluster: LocalCluster, zk: KazooClient, producer: NumberedProducer, kind: str, partition: int,
               rng: random.Random) -> Trial:
    time.sleep(rng.uniform(0.5, 2.0))
    st = _zk_state(zk, partition)
    trial = Trial(kind, partition, st["leader"], st["leader_epoch"], time.monotonic())
    if kind == "kill":
        cluster.kill_broker(trial.victim)
    else:
        stopper = threading.Thread(target=cluster.stop_broker, args=(trial.victim,), daemon=True)
        stopper.start()
    trial.new_leader = wait_until(f"a new leader of {TOPIC}-{partition}", lambda: (
        (s := _zk_state(zk, partition))["leader"] not in (trial.victim, -1) and s["leader"]), 120)
    trial.elected_s = time.monotonic() - trial.at
    wait_until(f"acknowledged writes to {TOPIC}-{partition} after the failover",
               lambda: producer.acks_after(partition, trial.at) >= 100, 120)
    if kind == "planned":
        stopper.join(60)
    cluster.start_broker(trial.victim, timeout_s=120)
    wait_until(f"broker {trial.victim} back in every ISR", lambda: _back_in_every_isr(zk, trial.victim), 120)
    return trial


def _read_all(bootstrap: str, ends: dict[int, int]) -> dict[tuple[int, int], bytes]:
    """Every record below the high watermarks ``ends``, by (partition, offset)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-check", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": False})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out: dict[tuple[int, int], bytes] = {}

    def more() -> bool:
        for m in c.consume(5000, 0.5):
            if m.error() is None:
                out[(m.partition(), m.offset())] = m.value()
        return all(e == 0 or (p, e - 1) in out for p, e in ends.items())
    try:
        wait_until("every record read back", more, 300, interval_s=0)
    finally:
        c.close()
    return out


def _high_watermarks(bootstrap: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-ends"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def _epoch_starts(cluster: LocalCluster) -> dict[int, list[tuple[int, int]]]:
    """(epoch, start offset) of each partition, from broker 1's replica (all replicas agree at the end)."""
    out = {}
    for p in range(PARTITIONS):
        plog = PartitionLog.open(cluster.brokers[1].data_dir / f"{TOPIC}-{p}", LogConfig())
        try:
            out[p] = list(plog.leader_epoch_cache.entries)
        finally:
            plog.close()
    return out


def _failover_times(outcome: Outcome, producer: NumberedProducer, epochs: dict[int, list[tuple[int, int]]]) -> None:
    for t in outcome.trials:
        start = next((off for epoch, off in epochs[t.partition] if epoch > t.epoch_before), None)
        if start is None:
            continue
        first = min((at for at, off in producer.ack_times[t.partition] if off >= start and at > t.at), default=None)
        t.failover_s = None if first is None else first - t.at


def run(trials: int, planned: int, session_timeout_ms: int, rate: int, seed: int, root: Path) -> Outcome:
    rng = random.Random(seed)
    cluster = LocalCluster(root / "cluster", 3, configs={
        "zookeeper.session.timeout.ms": str(session_timeout_ms), "offsets.topic.num.partitions": "3",
        "replica.lag.time.max.ms": "10000", "controlled.shutdown.retry.backoff.ms": "500"})
    cluster.start()
    outcome = Outcome()
    zk = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    producer = watcher = None
    try:
        zk.start(30)
        wait_until("three registered brokers", lambda: len(zk.get_children("/brokers/ids")) == 3, 120)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                     request_timeout=30).values():
            f.result(60)
        wait_until("leaders with full ISRs", lambda: all(len(_zk_state(zk, p)["isr"]) == 3
                                                         for p in range(PARTITIONS)), 60)
        producer = NumberedProducer(cluster.bootstrap_servers, rate)
        watcher = WatchingConsumer(cluster.bootstrap_servers)
        wait_until("the first acknowledgements", lambda: len(producer.acked) >= 500, 60)
        kinds = ["kill"] * trials + ["planned"] * planned
        for i, kind in enumerate(kinds):
            t = _run_trial(cluster, zk, producer, kind, i % PARTITIONS, rng)
            outcome.trials.append(t)
            print(f"trial {i + 1}/{len(kinds)} {kind}: {TOPIC}-{t.partition} leader {t.victim} -> {t.new_leader}, "
                  f"elected after {t.elected_s:.2f} s", file=sys.stderr, flush=True)
        outcome.unacknowledged = producer.stop()
        ends = _high_watermarks(cluster.bootstrap_servers)
        wait_until("the watching consumer at the end", lambda: watcher.caught_up_to(ends), 120)
        watcher.stop()
        final = _read_all(cluster.bootstrap_servers, ends)
    finally:
        if producer is not None and not producer._stop.is_set():
            producer.stop()
        if watcher is not None and not watcher._stop.is_set():
            watcher.stop()
        zk.stop()
        zk.close()
        cluster.stop()
    _failover_times(outcome, producer, _epoch_starts(cluster))
    outcome.acked = len(producer.acked)
    outcome.failed = len(producer.failed)
    outcome.lost = sum(1 for k, v in producer.acked.items() if final.get(k) != v)
    values = list(final.values())
    outcome.duplicated = len(values) - len(set(values))
    for p in range(PARTITIONS):
        seq = [final[k] for k in sorted(k for k in final if k[0] == p)]
        outcome.out_of_order += sum(1 for a, b in zip(seq, seq[1:]) if b <= a)
    outcome.vanished = len(watcher.changed) + sum(1 for k, v in watcher.seen.items() if final.get(k) != v)
    return outcome


def _percentiles(values: list[float]) -> tuple[float, float]:
    return (statistics.median(values), max(values)) if values else (float("nan"), float("nan"))


def summary(o: Outcome, session_timeout_ms: int) -> dict:
    kill = [t.failover_s for t in o.trials if t.kind == "kill" and t.failover_s is not None]
    planned = [t.failover_s for t in o.trials if t.kind == "planned" and t.failover_s is not None]
    elected = [t.elected_s for t in o.trials if t.kind == "kill"]
    kp50, kmax = _percentiles(kill)
    pp50, pmax = _percentiles(planned)
    ep50, emax = _percentiles(elected)
    return {"kill_trials": sum(t.kind == "kill" for t in o.trials),
            "planned_trials": sum(t.kind == "planned" for t in o.trials),
            "kill_measured": len(kill), "planned_measured": len(planned),
            "acked": o.acked, "lost": o.lost, "duplicated": o.duplicated, "out_of_order": o.out_of_order,
            "visible_then_disappeared": o.vanished, "unacknowledged": o.unacknowledged, "failed": o.failed,
            "session_timeout_ms": session_timeout_ms,
            "failover_p50_s": kp50, "failover_max_s": kmax, "elected_p50_s": ep50, "elected_max_s": emax,
            "planned_p50_s": pp50, "planned_max_s": pmax}


def report(s: dict, command: str) -> list[str]:
    st = s["session_timeout_ms"] / 1000
    return [
        f"Command: `{command}`",
        "",
        f"{s['kill_trials']} kill -9 trials and {s['planned_trials']} planned moves (SIGTERM: controlled shutdown) "
        "of a partition leader, 3 brokers, RF 3, min.insync.replicas 2, idempotent acks=all producer",
        "",
        "| records acknowledged | lost | duplicated | out of order | visible then disappeared | delivery errors |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {s['acked']:,} | {s['lost']} | {s['duplicated']} | {s['out_of_order']} | "
        f"{s['visible_then_disappeared']} | {s['failed']} |",
        "",
        "| move | p50 | max | goal | p50 / goal |",
        "|---|---:|---:|---:|---:|",
        f"| kill -9: new leader in ZooKeeper | {s['elected_p50_s']:.2f} s | {s['elected_max_s']:.2f} s | | |",
        f"| kill -9: next acknowledged write | {s['failover_p50_s']:.2f} s | {s['failover_max_s']:.2f} s | "
        f"session timeout + 1 s = {st + 1:g} s | {s['failover_p50_s'] / (st + 1):.2f} |",
        f"| controlled shutdown: next acknowledged write | {s['planned_p50_s']:.2f} s | {s['planned_max_s']:.2f} s | "
        f"1 s | {s['planned_p50_s'] / 1:.2f} |",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20, help="kill -9 trials")
    ap.add_argument("--planned", type=int, default=5, help="controlled-shutdown moves")
    ap.add_argument("--session-timeout-ms", type=int, default=4000, help="zookeeper.session.timeout.ms")
    ap.add_argument("--rate", type=int, default=1000, help="records a second")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-results", action="store_true", help="do not write benchmarks/RESULTS.md")
    ap.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    args = ap.parse_args()
    try:
        with tempfile.TemporaryDirectory(prefix="tidelake-failover-") as tmp:
            outcome = run(args.trials, args.planned, args.session_timeout_ms, args.rate, args.seed, Path(tmp))
    except (TimeoutError, RuntimeError) as e:  # the cluster did not do what a trial waits for
        sys.exit(f"replication_failover: {e}")
    s = summary(outcome, args.session_timeout_ms)
    shown = [a for a in sys.argv[1:] if a not in ("--json", "--no-results")]
    command = ".venv/bin/python benchmarks/replication_failover.py " + " ".join(shown)
    lines = report(s, command.strip())
    print("\n".join(lines))
    if args.json:
        print(json.dumps(s))
    if not args.no_results:
        from results_file import replace_marked  # beside this script
        replace_marked(START_MARK, END_MARK, ["", "### Failover (kill -9 and controlled shutdown of a leader)", "",
                                              *lines, ""])
    bad = s["lost"] + s["duplicated"] + s["out_of_order"] + s["visible_then_disappeared"] + s["failed"]
    sys.exit(1 if bad or s["unacknowledged"] else 0)


if __name__ == "__main__":
    main()
