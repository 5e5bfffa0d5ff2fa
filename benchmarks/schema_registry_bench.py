"""Schema registry figures (issue 25, item 8): lookups by id with 10,000 subjects (p50/p99), and registering
1,000 schemas, for tidelake's registry beside baselines measured in the same run.

Every server is its own process on this machine: tidelake's broker (`tidelake broker start`), tidelake's
registry (`tidelake schema-registry start`, its state rebuilt from a `_schemas` topic preloaded with 10,000
subjects in Confluent's record format), and the baseline, the same REST calls answered from a Python dict by the
same web stack (Starlette on uvicorn) with no storage behind it. The client is this process, one
keep-alive HTTP connection (requests), calls one after the other.

Register baselines: the dict endpoint, and the Kafka round trips a registration costs at least: a plain produce
of the same record waited for (acks=all), and a transactional one (begin, produce, commit), which is what each
of our writes is (the writer's producer is transactional so that a deposed primary is fenced).

    .venv/bin/python benchmarks/schema_registry_bench.py            # writes its section of RESULTS.md
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from results_file import replace_marked  # noqa: E402  (beside this script)

START, END = "<!-- schema-registry:start -->", "<!-- schema-registry:end -->"


def avro(i: int) -> str:
    return json.dumps({"type": "record", "name": f"Rec{i}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string"}]},
                      separators=(",", ":"))


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_line(proc: subprocess.Popen, pattern: str, timeout_s: float = 120) -> str:
    deadline = time.monotonic() + timeout_s
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m.group(1)
    raise RuntimeError(f"no line matching {pattern!r}: {''.join(seen)[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


# -- the baseline: the same endpoints from a dict ----------------------------------------------------------------
def serve_baseline(port: int, subjects: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    by_id = {i + 1: avro(i) for i in range(subjects)}
    ids_of: dict[str, int] = {}

    async def get_by_id(request: Request):
        schema = by_id.get(int(request.path_params["id"]))
        if schema is None:
            return JSONResponse({"error_code": 40403, "message": "Schema not found"}, 404)
        return JSONResponse({"schema": schema})

    async def register(request: Request):
        body = await request.json()
        key = body["schema"]
        if key not in ids_of:
            ids_of[key] = len(by_id) + 1
            by_id[ids_of[key]] = key
        return JSONResponse({"id": ids_of[key]})

    app = Starlette(routes=[Route("/schemas/ids/{id}", get_by_id),
                            Route("/subjects/{subject}/versions", register, methods=["POST"])])
    print(f"baseline on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- measuring ---------------------------------------------------------------------------------------------------
def preload(bootstrap: str, subjects: int) -> None:
    """10,000 subjects in `_schemas`, in Confluent's record format, before the registry starts."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from tidelake.schema_registry.records import SchemaValue, StoreKey
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("_schemas", 1, 1, config={"cleanup.policy": "compact"})])["_schemas"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    from tidelake.schema_registry.avro_type import AvroType
    for i in range(subjects):
        canonical = AvroType().parse(avro(i), {}).canonical
        value = SchemaValue(f"subject-{i}", 1, i + 1, canonical)
        producer.produce("_schemas", key=StoreKey("SCHEMA", f"subject-{i}", 1).encode(),
                         value=json.dumps(value.to_json()).encode(), partition=0)
        if i % 1000 == 999:
            producer.poll(0)
    assert producer.flush(60) == 0


def lookups(url: str, ids: list[int]) -> list[float]:
    import requests
    session = requests.Session()
    for schema_id in ids[:200]:        # warm the connection and caches
        session.get(f"{url}/schemas/ids/{schema_id}", timeout=10).raise_for_status()
    out = []
    for schema_id in ids:
        started = time.perf_counter()
        r = session.get(f"{url}/schemas/ids/{schema_id}", timeout=10)
        out.append(time.perf_counter() - started)
        r.raise_for_status()
    return out


def registers(url: str, first: int, count: int) -> float:
    import requests
    session = requests.Session()
    started = time.perf_counter()
    for i in range(first, first + count):
        r = session.post(f"{url}/subjects/new-{i}/versions", json={"schema": avro(i)}, timeout=30)
        r.raise_for_status()
    return time.perf_counter() - started


def kafka_round_trips(bootstrap: str, count: int, transactional: bool) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = "bench-txn" if transactional else "bench-plain"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0}
    if transactional:
        conf["transactional.id"] = "bench"
    producer = Producer(conf)
    if transactional:
        producer.init_transactions(30)
    value = json.dumps({"subject": "s", "version": 1, "id": 1, "schema": avro(0), "deleted": False}).encode()
    started = time.perf_counter()
    for i in range(count):
        if transactional:
            producer.begin_transaction()
        producer.produce(topic, key=b'{"keytype":"SCHEMA"}', value=value, partition=0)
        if transactional:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
    return time.perf_counter() - started


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subjects", type=int, default=10_000)
    parser.add_argument("--lookups", type=int, default=5_000)
    parser.add_argument("--registers", type=int, default=1_000)
    parser.add_argument("--serve-baseline", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()
    if args.serve_baseline is not None:
        serve_baseline(args.serve_baseline, args.subjects)
        return
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    tidelake = [sys.executable, "-m", "tidelake.cli.main"]
    with tempfile.TemporaryDirectory(prefix="sr-bench-") as tmp:
        broker = subprocess.Popen(tidelake + ["broker", "start", "--data-dir", tmp, "--listen", f"127.0.0.1:{free_port()}",
                                              "--set", "group.initial.rebalance.delay.ms=0"],
                                  stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        registry = baseline = None
        try:
            bootstrap = wait_line(broker, r"listening on (\S+)")
            preload(bootstrap, args.subjects)
            started = time.perf_counter()
            registry = subprocess.Popen(tidelake + ["schema-registry", "start", "-b", bootstrap, "--listen",
                                                    f"http://127.0.0.1:{free_port()}", "--log-level", "WARNING"],
                                        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
            url = wait_line(registry, r"schema registry on (\S+)")
            startup_s = time.perf_counter() - started
            baseline = subprocess.Popen([sys.executable, __file__, "--serve-baseline", str(free_port_b := free_port()),
                                         "--subjects", str(args.subjects)],
                                        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
            baseline_url = wait_line(baseline, r"baseline on (\S+)")
            assert baseline_url.endswith(str(free_port_b))
            rng = random.Random(25)
            ids = [rng.randint(1, args.subjects) for _ in range(args.lookups)]
            ours = lookups(url, ids)
            theirs = lookups(baseline_url, ids)
            reg_ours = registers(url, args.subjects, args.registers)
            reg_dict = registers(baseline_url, args.subjects, args.registers)
            reg_plain = kafka_round_trips(bootstrap, args.registers, transactional=False)
            reg_txn = kafka_round_trips(bootstrap, args.registers, transactional=True)
        finally:
            for proc in (baseline, registry, broker):
                if proc is not None:
                    stop(proc)
    rows = [
        f"Command: `.venv/bin/python benchmarks/schema_registry_bench.py` (defaults: `--subjects {args.subjects} "
        f"--lookups {args.lookups} --registers {args.registers}`). 2 shared cores; each server its own process; "
        "one client connection, calls one after the other.",
        "",
        f"Registry start with {args.subjects:,} subjects in `_schemas` (read to the end, state rebuilt): "
        f"{startup_s:.1f} s.",
        "",
        "| figure | tidelake registry | baseline | ratio (ours / baseline) | target |",
        "|---|---:|---:|---:|---|",
        f"| GET /schemas/ids/{{id}} p50, {args.subjects:,} subjects | {pct(ours, 0.5):.2f} ms | "
        f"{pct(theirs, 0.5):.2f} ms (dict endpoint) | {pct(ours, 0.5) / pct(theirs, 0.5):.2f} | |",
        f"| GET /schemas/ids/{{id}} p99, {args.subjects:,} subjects | {pct(ours, 0.99):.2f} ms | "
        f"{pct(theirs, 0.99):.2f} ms (dict endpoint) | {pct(ours, 0.99) / pct(theirs, 0.99):.2f} | ≤ 5 ms |",
        f"| register {args.registers:,} schemas (new subjects) | {reg_ours:.2f} s | {reg_dict:.2f} s (dict endpoint) | "
        f"{reg_ours / reg_dict:.2f} | ≤ 10 s |",
        f"| (same) | | {reg_plain:.2f} s ({args.registers:,} produce round trips, acks=all) | "
        f"{reg_ours / reg_plain:.2f} | |",
        f"| (same) | | {reg_txn:.2f} s ({args.registers:,} transactional produce round trips) | "
        f"{reg_ours / reg_txn:.2f} | |",
        "",
        f"Mean lookup: ours {statistics.mean(ours) * 1000:.2f} ms, dict {statistics.mean(theirs) * 1000:.2f} ms.",
    ]
    print("\n".join(rows))
    if not args.no_write:
        replace_marked(START, END, ["## Schema registry", "", *rows])


if __name__ == "__main__":
    main()
