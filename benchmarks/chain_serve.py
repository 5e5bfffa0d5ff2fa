"""``pipeline serve`` on a 3-stage chain: topic orders -> orders -> revenue_by_region -> top_regions
(issue 24 items 6b and 6d).

    .venv/bin/python benchmarks/chain_serve.py freshness [--rate 2000] [--seconds 40]
    .venv/bin/python benchmarks/chain_serve.py kill [--trials 30] [--rate 300]

An embedded broker runs in this process; ``tidelake pipeline serve DIR`` runs as a child process.

freshness: once serve has warmed up (a 3 s stream at the same rate, caught up with and not measured), the demo's
orders generator produces at --rate records/s for --seconds; afterwards, for every record,
the time from its produce timestamp to the commit of revenue_by_region (the 2-stage aggregate) that first holds it
(the orders version holding its offset, then the first revenue commit whose recorded range reaches that version).
Printed: p50 / p99 / max, beside the Kafka stage alone (produce -> orders commit) as the baseline.

kill: a stream is produced throughout (each trial adds one of 150 s); each trial starts serve, waits for its next
revenue_by_region commit and a random 0-6 s more,
kill -9s it, then checks every stage at the position its sink recorded: orders equals the topic's change events
applied up to the recorded offsets; revenue_by_region equals the aggregate recomputed (DuckDB) over orders at the
recorded version; top_regions equals the top 2 of revenue_by_region at its recorded version. Lost = rows/counts
missing, duplicated = rows/counts in excess, per stage. Finally the stream stops, serve catches up, and the same
check runs once more.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tidelake.broker import EmbeddedBroker  # noqa: E402
from tidelake.demo import REVENUE_SQL, TOPIC, OrdersGenerator  # noqa: E402
from tidelake.table import Table, TableNotFound  # noqa: E402

TIDELAKE = str(Path(sys.executable).with_name("tidelake"))
PARTITIONS = 4
WARM_UP_SECONDS = 3.0
TRIAL_STREAM_SECONDS = 150.0  # kill: the stream each trial adds (outlasting a trial's Spark start on a loaded machine)


def write_chain(directory: Path, bootstrap: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "orders.yaml").write_text(f"""\
source: {{bootstrap_servers: "{bootstrap}", topic: {TOPIC}, group_id: chain-orders, batch_interval: 500ms}}
sink:
  table: ../tables/orders
  primary_key: [id]
  schema: "id long, customer string, region string, amount long, status string"
  buckets: 2
trigger: {{interval: 250ms}}
""")
    (directory / "revenue.yaml").write_text(f"""\
source: {{table: ../tables/orders}}
transform: "{REVENUE_SQL}"
sink: {{table: ../tables/revenue_by_region, buckets: 1}}
trigger: {{interval: 0s}}
""")
    (directory / "top.yaml").write_text("""\
source: {table: ../tables/revenue_by_region}
transform: "SELECT region, revenue FROM source ORDER BY revenue DESC, region LIMIT 2"
refresh: full
sink: {table: ../tables/top_regions, primary_key: [region], buckets: 1}
trigger: {interval: 0s}
""")


def start_serve(directory: Path, log: Path, verbose: bool = False) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(log, "ab") as out:
        return subprocess.Popen([TIDELAKE, "pipeline", "serve", str(directory / "chain")] + ([] if verbose else ["-q"]),
                                stdout=out,
                                stderr=subprocess.STDOUT, env=env)


def open_table(path: Path) -> Table | None:
    try:
        return Table.open(str(path))
    except TableNotFound:
        return None


def topic_records(bootstrap: str) -> list[tuple[int, int, int, dict]]:
    """Every record of the topic: (partition, offset, produce timestamp ms, event)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chain-bench-reader",
                         "enable.auto.commit": False})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out, left = [], {p for p, e in ends.items() if e > 0}
    deadline = time.monotonic() + 120
    while left and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if m.error():
                continue
            out.append((m.partition(), m.offset(), m.timestamp()[1], json.loads(m.value())))
            if m.offset() + 1 >= ends[m.partition()]:
                left.discard(m.partition())
    consumer.close()
    del admin
    return out


def serve_until_caught_up(directory: Path, bootstrap: str, log: Path, timeout: float = 300) -> None:
    proc = start_serve(directory, log)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(2)
            result = subprocess.run([TIDELAKE, "pipeline", "graph", str(directory / "chain"), "--json"],
                                    capture_output=True, text=True, timeout=60)
            if result.returncode == 0 and all(s["lag"] == 0 for s in json.loads(result.stdout)["stages"]):
                return
        raise SystemExit(f"serve did not catch up within {timeout}s (log: {log})")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)


# ---------------------------------------------------------------------------------------------- freshness

def freshness(args) -> None:
    with tempfile.TemporaryDirectory(prefix="chain-serve-") as work, EmbeddedBroker(Path(work) / "broker",
                                                                                     port=0) as broker:
        work = Path(work)
        bootstrap = broker.bootstrap_servers
        _create_topic(bootstrap)
        write_chain(work / "chain", bootstrap)
        log = work / "serve.log"
        proc = start_serve(work, log, verbose=bool(args.log))
        try:
            _wait_for(lambda: open_table(work / "tables" / "top_regions") is not None, 300, "serve's first pass")
            # a warm-up stream first, measured by nobody: the first batch of each stage starts Spark's workers
            warm = OrdersGenerator(bootstrap, int(args.rate * WARM_UP_SECONDS), WARM_UP_SECONDS, seed=5)
            warm.start()
            warm.join(WARM_UP_SECONDS + 120)
            _wait_for(lambda: _caught_up(work, warm.produced), 600, "serve catching up with the warm-up")
            gen = OrdersGenerator(bootstrap, int(args.rate * args.seconds), args.seconds, seed=11)
            gen.start()
            gen.join(args.seconds + 120)
            total = warm.produced + gen.produced
            # the same serve process catches up: every record in orders, revenue at orders' latest version
            _wait_for(lambda: _caught_up(work, total), 300, "serve catching up")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        records = topic_records(bootstrap)
        orders = Table.open(str(work / "tables" / "orders")).history()
        revenue = Table.open(str(work / "tables" / "revenue_by_region")).history()
        covering = []   # (orders version, commit ms, offsets)
        for h in orders:
            app = h.get("app") or {}
            if app.get("extra", {}).get("offsets"):
                covering.append((h["version"], h["timestamp_ms"], {int(p): o for p, o in app["extra"]["offsets"].items()}))
        stage2 = [(h["app"]["extra"]["to_version"], h["timestamp_ms"]) for h in revenue if h.get("app")]
        one, two = [], []
        times = sorted(ts for _, _, ts, _ in records)   # (records come partition by partition)
        start_ms = times[-gen.produced] if gen.produced else 0   # the measured stream's first, not the warm-up's
        for p, o, ts, _ in records:
            if ts < start_ms:
                continue
            version, committed = next((v, c) for v, c, offs in covering if offs.get(p, 0) > o)
            one.append(committed - ts)
            reached = next((c for to, c in stage2 if to >= version), None)
            if reached is None:
                raise SystemExit(f"partition {p} offset {o}: orders version {version} holds it, but no "
                                 f"revenue_by_region commit reached it (its last: {stage2[-1] if stage2 else None}; "
                                 f"orders' last: {covering[-1][:2]}); serve log:\n{log.read_text()[-3000:]}")
            two.append(reached - ts)
        for name, values in (("produce -> orders (1 stage, Kafka)", one),
                             ("produce -> revenue_by_region (2 stages)", two)):
            q = statistics.quantiles(values, n=100)
            print(f"{name:42s} records {len(values):>7,}  p50 {q[49] / 1000:5.2f}s  p99 {q[98] / 1000:5.2f}s  "
                  f"max {max(values) / 1000:5.2f}s")
        print(f"rate {args.rate} records/s for {args.seconds}s")
        if args.log:
            shutil.copy(log, args.log)
            print(f"serve log copied to {args.log}")


def _caught_up(work: Path, total: int) -> bool:
    orders, revenue = open_table(work / "tables" / "orders"), open_table(work / "tables" / "revenue_by_region")
    if orders is None or revenue is None:
        return False
    state, rstate = orders.app_state("pipeline:chain-orders:orders"), revenue.app_state("table-pipeline:orders")
    return (state is not None and rstate is not None and sum(state["extra"]["offsets"].values()) >= total
            and rstate["extra"]["to_version"] >= state["version"])


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})   # kept alive until the topic exists
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


# ---------------------------------------------------------------------------------------------- kill -9

def _applied(records, offsets: dict[int, int]) -> dict[int, dict]:
    """The orders state after the change events below ``offsets`` (per partition; a key lives in one)."""
    state: dict[int, dict] = {}
    for p, o, _, event in sorted(records, key=lambda r: (r[0], r[1])):
        if o >= offsets.get(p, 0):
            continue
        if event["op"] == "d":
            state.pop(event["before"]["id"], None)
        else:
            state[event["after"]["id"]] = event["after"]
    return state


def check(work: Path, bootstrap: str) -> dict[str, tuple[int, int]]:
    """Per stage (lost, duplicated) at the position its sink recorded."""
    out = {}
    orders = open_table(work / "tables" / "orders")
    state = orders.app_state("pipeline:chain-orders:orders") if orders else None
    if state is None:
        return {"orders": (0, 0)}
    offsets = {int(p): o for p, o in state["extra"]["offsets"].items()}
    want = _applied(topic_records(bootstrap), offsets)
    got = {r["id"]: r for r in orders.scan(version=state["version"]).to_pylist()}
    lost = sum(1 for k, v in want.items() if got.get(k) != v)
    out["orders"] = (lost, len(set(got) - set(want)))
    revenue = open_table(work / "tables" / "revenue_by_region")
    rstate = revenue.app_state("table-pipeline:orders") if revenue else None
    if rstate is not None:
        snapshot = orders.scan(version=rstate["extra"]["to_version"])   # noqa: F841  (DuckDB reads it by name)
        expect = {r[0]: r for r in duckdb.sql(
            "SELECT region, count(*), sum(amount), min(amount), max(amount) FROM snapshot GROUP BY region").fetchall()}
        have = {r["region"]: (r["region"], r["orders"], r["revenue"], r["min_amount"], r["max_amount"])
                for r in revenue.scan(version=rstate["version"]).to_pylist()}
        lost = sum(max(0, expect[k][1] - have.get(k, (0, 0))[1]) for k in expect) + sum(
            1 for k in expect if k in have and have[k][2:] != expect[k][2:])
        dup = sum(max(0, have[k][1] - expect.get(k, (0, 0))[1]) for k in have)
        out["revenue_by_region"] = (lost, dup)
        top = open_table(work / "tables" / "top_regions")
        tstate = top.app_state("table-pipeline:revenue_by_region") if top else None
        if tstate is not None:
            rows = revenue.scan(version=tstate["extra"]["to_version"]).to_pylist()
            best = {r["region"]: r["revenue"] for r in sorted(rows, key=lambda r: (-r["revenue"], r["region"]))[:2]}
            have_top = {r["region"]: r["revenue"] for r in top.scan(version=tstate["version"]).to_pylist()}
            out["top_regions"] = (sum(1 for k, v in best.items() if have_top.get(k) != v),
                                  len(set(have_top) - set(best)))
    return out


def _revenue_batch(work: Path) -> int:
    """The batch id of revenue_by_region's last commit (-1: none yet)."""
    revenue = open_table(work / "tables" / "revenue_by_region")
    state = revenue.app_state("table-pipeline:orders") if revenue else None
    return state["batch_id"] if state else -1


def kill(args) -> None:
    rng = random.Random(5)
    totals: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory(prefix="chain-kill-") as work, EmbeddedBroker(Path(work) / "broker",
                                                                                   port=0) as broker:
        work = Path(work)
        bootstrap = broker.bootstrap_servers
        _create_topic(bootstrap)
        write_chain(work / "chain", bootstrap)
        log = work / "serve.log"
        # each trial adds a stream of its own that outlasts it (a trial waits for serve's next commit, which needs
        # new records), so the stream ends soon after the last trial
        gens = []
        for trial in range(1, args.trials + 1):
            gen = OrdersGenerator(bootstrap, int(args.rate * TRIAL_STREAM_SECONDS), TRIAL_STREAM_SECONDS,
                                  seed=13 + trial)
            gen.start()
            gens.append(gen)
            before = _revenue_batch(work)
            proc = start_serve(work, log, verbose=bool(args.log))
            # kill once it is working: after its first new revenue commit, a random moment later
            try:
                _wait_for(lambda: _revenue_batch(work) > before, 600, f"trial {trial}: serve committing")
            except SystemExit:
                os.kill(proc.pid, signal.SIGKILL)
                if args.log:
                    shutil.copy(log, args.log)
                raise
            time.sleep(rng.uniform(0.0, args.max_delay))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(60)
            result = check(work, bootstrap)
            for stage, (lost, dup) in result.items():
                totals.setdefault(stage, [0, 0])
                totals[stage][0] += lost
                totals[stage][1] += dup
            print(f"trial {trial:2d}: kill -9 at +{time.monotonic():.0f}; " +
                  ", ".join(f"{s} lost {lost} duplicated {dup}" for s, (lost, dup) in result.items()), flush=True)
        for gen in gens:
            gen.join(TRIAL_STREAM_SECONDS + 120)
        serve_until_caught_up(work, bootstrap, log)
        final = check(work, bootstrap)
        print("after the stream ended and serve caught up: " +
              ", ".join(f"{s} lost {lost} duplicated {dup}" for s, (lost, dup) in final.items()))
        print(f"{args.trials} kill -9 trials: " + ", ".join(f"{s} lost {lost} duplicated {dup}"
                                                           for s, (lost, dup) in totals.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("freshness")
    f.add_argument("--rate", type=int, default=2000)
    f.add_argument("--seconds", type=float, default=40)
    f.add_argument("--log", default=None, help="copy serve's log here")
    k = sub.add_parser("kill")
    k.add_argument("--trials", type=int, default=30)
    k.add_argument("--log", default=None, help="serve's log (verbose) copied here if a trial times out")
    k.add_argument("--rate", type=int, default=300)
    k.add_argument("--max-delay", type=float, default=6.0)
    args = ap.parse_args()
    {"freshness": freshness, "kill": kill}[args.command](args)


if __name__ == "__main__":
    main()
