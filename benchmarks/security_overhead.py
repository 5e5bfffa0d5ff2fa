"""What security costs on tidelake: produce and consume throughput over SASL_SSL (SCRAM-SHA-256, TLS)
against PLAINTEXT on the same broker, at 1 KB and 10 KB, and the authorizer's cost on the produce
path with 1,000 ACLs (goal: <= 5 % at 1 KB), in one run.

    .venv/bin/python benchmarks/security_overhead.py            # full run, writes benchmarks/RESULTS.md
    .venv/bin/python benchmarks/security_overhead.py --quick    # short smoke run (results not written)

Brokers are `tidelake broker start` subprocesses (one listening on PLAINTEXT and SASL_SSL; one more with
`authorizer.class.name` and 1,000 ACLs). Clients: one confluent-kafka producer process and one consumer
process per row (linger 5 ms, 1 MB batches, acks=1); for the authorizer, the lean wire-level producer of
benchmarks/wire_load.py (3 processes, one per partition) so the broker, not the client, is the busy
side. A/B rows alternate, repeated, the best kept; broker CPU per GB (from /proc) is reported next to
throughput because the 2-core machine is shared.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

import broker_throughput as bt  # benchmarks/broker_throughput.py, beside this script
from results_file import replace_marked  # noqa: E402  (beside this script)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from tls_certs import make_pki  # noqa: E402  (the tests' throwaway CA)

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION_START, SECTION_END = "<!-- security:start -->", "<!-- security:end -->"
PARTITIONS = 3
COUNTS = {1024: 200_000, 10 * 1024: 20_000}  # ~200 MB per row
ACLS = 1000
USER, PASSWORD = "bench", "bench-secret"


def server_properties(d: Path, pki, plain_port: int, sasl_port: int, authorizer: bool) -> Path:
    lines = [f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{sasl_port}",
             f"log.dirs={d / 'data'}", "ssl.keystore.type=PEM", f"ssl.keystore.location={pki.server_keystore}",
             "sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN",
             "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
             'required user_admin="admin-secret";']
    if authorizer:
        lines += ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "super.users=User:admin"]
    path = d / "server.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def start(d: Path, pki, authorizer: bool) -> tuple[bt.BrokerProcess, int]:
    d.mkdir(parents=True, exist_ok=True)
    plain, sasl = bt._free_port(), bt._free_port()
    props = server_properties(d, pki, plain, sasl, authorizer)
    argv = [sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--config", str(props), "--log-level",
            "WARNING"]
    broker = bt.BrokerProcess("tidelake" + (" +ACLs" if authorizer else ""), argv, plain, cwd=ROOT)
    bt._wait_port(sasl, broker.proc)
    return broker, sasl


def admin_config(sasl_port: int, pki) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca), "sasl.mechanism": "PLAIN", "sasl.username": "admin",
            "sasl.password": "admin-secret"}


def setup(broker: bt.BrokerProcess, sasl_port: int, pki, topics: list[str], acls: bool) -> None:
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                       ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient(admin_config(sasl_port, pki))
    # the authorizer runs' topics keep small segments and delete them soon, so those produce-only runs stay in the
    # page cache instead of waiting on disk writeback (the transport runs read everything back: default topics)
    small = {"segment.bytes": str(8 << 20), "retention.bytes": str(32 << 20)}
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1, config=small if t.startswith("acl-") else {})
                                  for t in topics]).values():
        f.result(60)
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode())]).values():
        f.result(60)
    if acls:
        # 1,000 ACLs: the anonymous producer's own grants plus 997 for other users, topics and prefixes
        lit, pre, allow = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED, AclPermissionType.ALLOW
        bindings = [AclBinding(ResourceType.TOPIC, "acl-", pre, "User:ANONYMOUS", "*", op, allow)
                    for op in (AclOperation.WRITE, AclOperation.READ)]
        bindings.append(AclBinding(ResourceType.GROUP, "bench", pre, "User:ANONYMOUS", "*", AclOperation.READ, allow))
        for i in range(ACLS - len(bindings)):
            kind = i % 3
            bindings.append(AclBinding(ResourceType.TOPIC, f"team{i}-topic" if kind else f"team{i}-",
                                       lit if kind else pre, f"User:user{i}", "*",
                                       AclOperation.WRITE if kind == 1 else AclOperation.READ,
                                       AclPermissionType.DENY if i % 10 == 0 else allow))
        for f in admin.create_acls(bindings).values():
            f.result(60)


def client_config(broker: bt.BrokerProcess, sasl_port: int, pki, secured: bool) -> dict:
    if not secured:
        return {"bootstrap.servers": broker.bootstrap}
    return {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca), "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER,
            "sasl.password": PASSWORD}


def producer_worker(conf: dict, topic: str, partition: int, size: int, count: int, ready, go, results) -> None:
    from confluent_kafka import Producer
    producer = Producer({**conf, "acks": "1", **bt.PRODUCER_CONFIG})
    payload = os.urandom(size)
    failed = [0]

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed[0] += 1
    producer.list_topics(topic, timeout=30)
    ready.put(partition)
    go.wait()
    cpu0, t0 = bt._cpu(), time.monotonic()
    left = count
    while left:
        n = min(bt.PRODUCE_CHUNK, left)
        queued = producer.produce_batch(topic, [{"value": payload}] * n, partition=partition, on_delivery=on_delivery)
        left -= queued
        if queued < n:
            producer.poll(0.05)
        producer.poll(0)
    unflushed = producer.flush(300)
    t1, cpu1 = time.monotonic(), bt._cpu()
    delivered = count - unflushed - failed[0]
    results.put({"t0": t0, "t1": t1, "count": delivered, "bytes": delivered * size, "cpu": cpu1 - cpu0,
                 "unflushed": count - delivered})


def consumer_worker(conf: dict, topic: str, partition: int, count: int, size: int, ready, go, results) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({**conf, "group.id": f"bench-{topic}-{partition}", **bt.CONSUMER_CONFIG})
    consumer.list_topics(topic, timeout=30)
    ready.put(partition)
    go.wait()
    cpu0, t0 = bt._cpu(), time.monotonic()
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    got, deadline = 0, time.monotonic() + 600
    while got < count and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(min(10_000, count - got), 0.5) if m.error() is None)
    t1, cpu1 = time.monotonic(), bt._cpu()
    consumer.close()
    results.put({"t0": t0, "t1": t1, "count": got, "bytes": got * size, "cpu": cpu1 - cpu0, "unflushed": count - got})


def _gb_cpu(r: dict) -> float:
    return (r["broker_cpu_pct"] / 100 * r["wall"]) / max(r["bytes"] / 1e9, 1e-12)


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _best(runs: list[dict]) -> dict:
    return max(runs, key=lambda r: r["count"] / r["wall"])


def transport_rows(broker, sasl_port, pki, counts: dict[int, int], repeats: int) -> list[str]:
    rows = []
    for size, count in counts.items():
        per_partition = count // PARTITIONS
        best: dict[tuple[str, bool], list[dict]] = {}
        for rep in range(repeats):
            for secured in (False, True):  # interleaved A/B
                topic = f"tr-{size}-{rep}-{'sasl' if secured else 'plain'}"
                conf = client_config(broker, sasl_port, pki, secured)
                p = bt.run_phase(broker, producer_worker,
                                 [(conf, topic, i, size, per_partition) for i in range(PARTITIONS)])
                c = bt.run_phase(broker, consumer_worker,
                                 [(conf, topic, i, per_partition, size) for i in range(PARTITIONS)])
                best.setdefault(("produce", secured), []).append(p)
                best.setdefault(("consume", secured), []).append(c)
                print(f"  {size} B rep {rep} {'SASL_SSL ' if secured else 'PLAINTEXT'}: produce "
                      f"{p['count'] / p['wall']:,.0f} msg/s, consume {c['count'] / c['wall']:,.0f} msg/s", flush=True)
        for phase in ("produce", "consume"):
            plain_runs, sasl_runs = best[(phase, False)], best[(phase, True)]
            a, b = _best(plain_runs), _best(sasl_runs)
            ra, rb = a["count"] / a["wall"], b["count"] / b["wall"]
            paired = _median([(y["count"] / y["wall"]) / (x["count"] / x["wall"]) for x, y in zip(plain_runs, sasl_runs)])
            cpu = _median([_gb_cpu(y) / _gb_cpu(x) for x, y in zip(plain_runs, sasl_runs)])
            missing = sum(r["missing"] for r in plain_runs + sasl_runs)
            short = "" if missing == 0 else f" (missing {missing})"
            rows.append(f"| {phase} | {size} B | {a['count']:,} | {ra:,.0f} | {ra * size / 1e6:.1f} | {rb:,.0f} | "
                        f"{rb * size / 1e6:.1f} | **{paired:.2f}×**{short} | {_gb_cpu(a):.2f} / {_gb_cpu(b):.2f} "
                        f"(×{cpu:.2f}) |")
    return rows


def authorizer_rows(plain: bt.BrokerProcess, guarded: bt.BrokerProcess, count: int, repeats: int) -> list[str]:
    size = 1024
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    for rep in range(repeats):
        order = (("off", plain), ("on", guarded)) if rep % 2 == 0 else (("on", guarded), ("off", plain))
        for label, broker in order:
            topic = f"acl-{rep}"
            r = bt.run_phase(broker, bt.wire_producer_worker,
                             [(broker.bootstrap, topic, i, "1", size, count // PARTITIONS) for i in range(PARTITIONS)])
            runs[label].append(r)
            print(f"  authorizer {label} rep {rep}: {r['count'] / r['wall']:,.0f} msg/s, "
                  f"{_gb_cpu(r):.2f} CPU-s/GB", flush=True)
    a, b = _best(runs["off"]), _best(runs["on"])
    ra, rb = a["count"] / a["wall"], b["count"] / b["wall"]
    paired = _median([(y["count"] / y["wall"]) / (x["count"] / x["wall"]) for x, y in zip(runs["off"], runs["on"])])
    cpu = _median([_gb_cpu(y) / _gb_cpu(x) for x, y in zip(runs["off"], runs["on"])])
    return [f"| produce, acks=1 | {size} B | {a['count']:,} | {ra:,.0f} | {rb:,.0f} | **{paired:.3f}×** | "
            f"{_gb_cpu(a):.2f} / {_gb_cpu(b):.2f} (×{cpu:.2f}) |"]


def _acl_bindings():
    """1,000 ACLs: the anonymous producer's prefixed WRITE plus 999 literal/prefixed, allow/deny ones for
    333 other users (the same mix as the brokers above)."""
    from tidelake.security.acl.model import AclBinding, AclEntry, Operation, PatternType, Permission, ResourcePattern
    from tidelake.security.acl.model import ResourceType as RT
    out = [AclBinding(ResourcePattern(RT.TOPIC, "acl-", PatternType.PREFIXED),
                      AclEntry("User:ANONYMOUS", "*", Operation.WRITE, Permission.ALLOW))]
    for i in range(ACLS - 1):
        kind = i % 3
        out.append(AclBinding(ResourcePattern(RT.TOPIC, f"team{i}-topic" if kind else f"team{i}-",
                                              PatternType.LITERAL if kind else PatternType.PREFIXED),
                              AclEntry(f"User:user{i}", "*", Operation.WRITE if kind == 1 else Operation.READ,
                                       Permission.DENY if i % 10 == 0 else Permission.ALLOW)))
    return out


def authorizer_cpu_rows(rounds: int, requests: int) -> list[str]:
    """CPU per Produce request in the broker's dispatcher (no sockets, no other process: the number the
    busy machine cannot blur), without an authorizer and with 1,000 ACLs, interleaved."""
    import asyncio

    from kafka.protocol.producer import ProduceRequest as PR

    from tidelake.broker.server import Broker
    from tidelake.protocol.framing import encode_request_frame
    from tidelake.protocol.records import Record, build_batch
    from tidelake.security.session import Session

    async def run() -> list[str]:
        rows = []
        with tempfile.TemporaryDirectory() as d:
            brokers = {}
            for label, conf in (("off", {}), ("on", {"authorizer.class.name":
                                                     "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})):
                b = Broker(Path(d) / label, {"log.retention.bytes": str(64 << 20), "log.segment.bytes": str(16 << 20),
                                             **conf}, host="127.0.0.1", port=0)
                await b.start()
                b.create_topic("acl-bench", 1)
                if label == "on":
                    b.context.security.authorizer.add(_acl_bindings())
                brokers[label] = b
            session = Session.plaintext("127.0.0.1")
            try:
                for per_request in (10, 1000):
                    value = os.urandom(1024)
                    batch = build_batch([Record(i, i, None, value) for i in range(per_request)])
                    req = PR(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[PR.TopicProduceData(
                        name="acl-bench", partition_data=[PR.TopicProduceData.PartitionProduceData(index=0,
                                                                                                   records=batch)])])
                    frame = encode_request_frame(0, 9, 1, bytes(req.encode(version=9)), "bench",
                                                 flexible_header=True)[4:]
                    n = max(50, requests // per_request)
                    best = {"off": float("inf"), "on": float("inf")}
                    ratios = []
                    for round_ in range(rounds):
                        took = {}
                        for label in (("off", "on") if round_ % 2 == 0 else ("on", "off")):
                            b = brokers[label]
                            t0 = time.thread_time()  # this thread only: not the logs' maintenance threads
                            for _ in range(n):
                                await b.handle_frame(bytearray(frame), session)
                            took[label] = (time.thread_time() - t0) / n
                            best[label] = min(best[label], took[label])
                        ratios.append(took["on"] / took["off"])
                    off, on = best["off"] * 1e6, best["on"] * 1e6
                    rows.append(f"| produce v9, {per_request} x 1 KB per request | {off:,.1f} µs | {on:,.1f} µs | "
                                f"**{(on / off - 1) * 100:+.1f} %** | {(_median(ratios) - 1) * 100:+.1f} % |")
                    print(f"  CPU per request, {per_request} x 1 KB: {off:.1f} us off, {on:.1f} us with 1,000 ACLs",
                          flush=True)
            finally:
                for b in brokers.values():
                    await b.stop()
        return rows

    return asyncio.run(run())


def write_results(body_lines: list[str]) -> None:
    replace_marked(SECTION_START, SECTION_END, body_lines, RESULTS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu-only", action="store_true", help="only the in-process authorizer CPU comparison")
    args = ap.parse_args()
    if args.cpu_only:
        print("\n".join(authorizer_cpu_rows(10, 100_000)))
        return
    counts = {s: c // 10 for s, c in COUNTS.items()} if args.quick else dict(COUNTS)
    repeats = 1 if args.quick else args.repeats
    acl_count = 60_000 if args.quick else 300_000
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tidelake-security-bench-") as tmp:
        tmp = Path(tmp)
        pki = make_pki(tmp / "pki")
        plain, plain_sasl = start(tmp / "plain", pki, authorizer=False)
        guarded, guarded_sasl = start(tmp / "guarded", pki, authorizer=True)
        try:
            tr_topics = [f"tr-{s}-{r}-{k}" for s in counts for r in range(repeats) for k in ("sasl", "plain")]
            acl_topics = [f"acl-{r}" for r in range(max(repeats, 5))]
            setup(plain, plain_sasl, pki, tr_topics + acl_topics, acls=False)
            setup(guarded, guarded_sasl, pki, acl_topics, acls=True)
            print("SASL_SSL vs PLAINTEXT (confluent-kafka):", flush=True)
            transport = transport_rows(plain, plain_sasl, pki, counts, repeats)
            print("authorizer with 1,000 ACLs (wire-level producers):", flush=True)
            authz = authorizer_rows(plain, guarded, acl_count, 1 if args.quick else max(repeats, 5))
        finally:
            for b in (plain, guarded):
                b.stop()
        print("authorizer with 1,000 ACLs (CPU per request, in process):", flush=True)
        authz_cpu = authorizer_cpu_rows(2 if args.quick else 10, 20_000 if args.quick else 100_000)
    load_after = os.getloadavg()
    command = ".venv/bin/python benchmarks/security_overhead.py" + (f" --repeats {args.repeats}"
                                                                    if args.repeats != 3 else "")
    lines = [
        "## Security (TLS + SASL, ACLs)", "", f"Command: `{command}`", "",
        "### SASL_SSL (SCRAM-SHA-256, TLS 1.3) against PLAINTEXT, same broker, confluent-kafka clients", "",
        f"3 producer processes and then 3 consumer processes (one per partition, confluent-kafka "
        f"{bt._client_version()}, linger 5 ms, 1 MB batches, acks=1); rows alternate PLAINTEXT / SASL_SSL, "
        f"{repeats} repetitions: msg/s the best run of each, the ratio the median of the paired (same repetition) "
        "ratios, CPU per GB of the best runs with the median paired ratio.", "",
        "| phase | size | msgs per run | PLAINTEXT msg/s | PLAINTEXT MB/s | SASL_SSL msg/s | SASL_SSL MB/s | "
        "SASL_SSL/PLAINTEXT | broker CPU-s per GB P / S (S/P) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *transport, "",
        "### The authorizer on the produce path: 1,000 ACLs against no authorizer", "",
        "Two brokers side by side (one without `authorizer.class.name`, one with "
        "`kafka.security.authorizer.AclAuthorizer` and 1,000 ACLs: literal, prefixed, allow and deny for 333 "
        "other users, plus the producer's own prefixed WRITE); 3 wire-level producer processes (benchmarks/"
        "wire_load.py, 1000 x 1 KB per request, 5 in flight) over PLAINTEXT as User:ANONYMOUS; runs alternate, "
        f"{1 if args.quick else max(repeats, 5)} repetitions (order swapped every repetition; segments of 8 MB, "
        "32 MB retained per partition, so runs do not wait on disk writeback); msg/s the best run of each, the "
        "ratio the median "
        "of the paired ratios. Goal: <= 5 % at 1 KB.",
        "",
        "| phase | size | msgs per run | no authorizer msg/s | 1,000 ACLs msg/s | with/without | "
        "broker CPU-s per GB off / on (on/off) |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *authz, "",
        "The same comparison without sockets or other processes: the CPU time of the thread answering Produce "
        "requests (the logs' background maintenance threads excluded) "
        "(`Broker.handle_frame`, acks=1, decode + authorize + append + encode), the two brokers in one process, "
        "10 rounds alternating which goes first; CPU per request the lowest round of each, the cost from those "
        "(and, for the spread, the median of the paired rounds). This is the figure the goal is read from: the "
        "throughput rows above move by more than the effect between rounds on a shared machine.", "",
        "| request | no authorizer | 1,000 ACLs | authorizer cost (lowest vs lowest) | median of paired rounds |",
        "|---|---:|---:|---:|---:|",
        *authz_cpu, "",
        f"Machine: 2 cores shared with other sessions. Load average (1/5/15 min) before the run "
        f"{' '.join(f'{x:.2f}' for x in load_before)}, after {' '.join(f'{x:.2f}' for x in load_after)}. "
        "Decisions are cached per (principal, host, operation, resource) until the ACLs change, so the produce "
        "path pays one dict lookup per topic and request whatever the number of ACLs; the TLS cost is Python's "
        "ssl (OpenSSL) inside the broker's event loop.",
    ]
    print("\n".join(lines))
    if not args.quick:
        write_results(lines)


if __name__ == "__main__":
    mp.set_start_method("spawn")
    main()
