"""`make demo`: the end-to-end demo on embedded defaults.

1. starts an embedded tidelake broker on a free port (data on disk, in a directory the demo names);
2. a generator produces an orders change stream (Debezium envelopes: create / update / delete) with a real
   Kafka client (librdkafka), keyed by order id;
3. the PySpark pipeline runs in ``exactly-once`` mode into a tidelake table with automatic clustering and
   compaction, while the generator is still producing;
4. prints a report: throughput, group lag, table versions and files, a time-travel read, an incremental read,
   and checks the table against what the generator produced (no loss, no duplicate);
5. a second stage, orders -> revenue per region (a table pipeline: an aggregate maintained from each increment
   of the orders table while it grows), checked against a full recompute of its query.

``--broker-only`` runs just the broker part (produce and consume a few thousand records).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

console = Console()
TOPIC = "orders"
GROUP = "orders-to-table"
REGIONS = ("north", "south", "east", "west")
REVENUE_SQL = ("SELECT region, count(*) AS orders, sum(amount) AS revenue, avg(amount) AS avg_amount, "
               "min(amount) AS min_amount, max(amount) AS max_amount FROM source GROUP BY region")
REVENUE_EVERY_S = 4.0  # the second stage steps this often while the stream runs


def stage(number: int, total: int, what: str) -> None:
    """The demo's progress, stage by stage (bars and spinners show progress within a stage)."""
    console.print(f"[bold cyan][{number}/{total}][/] {what}")


def _bars() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)


# ----------------------------------------------------------------------------------------- broker only
def run_broker_demo(data_dir: Path, records: int = 5000, partitions: int = 3) -> dict:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from tidelake.broker import EmbeddedBroker

    topic = "demo-orders"
    stage(1, 3, "starting the broker")
    with EmbeddedBroker(data_dir / "broker", port=0) as broker:
        bootstrap = broker.bootstrap_servers
        console.print(f"[bold]broker[/] listening on {bootstrap}, data in {data_dir / 'broker'}")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "zstd",
                             "enable.idempotence": True, "partitioner": "murmur2_random"})
        acked: list[tuple[int, int]] = []
        stage(2, 3, f"producing {records:,} records")
        t0 = time.perf_counter()
        with _bars() as progress:
            task = progress.add_task("acknowledged", total=records)
            for i in range(records):
                producer.produce(topic, key=f"order-{i % 500}".encode(), value=f'{{"id": {i}}}'.encode(),
                                 on_delivery=lambda err, msg: err is None and acked.append((msg.partition(),
                                                                                            msg.offset())))
                if i % 1000 == 0:
                    producer.poll(0)
                    progress.update(task, completed=len(acked))
            producer.flush(30)
            progress.update(task, completed=len(acked))
        produce_s = time.perf_counter() - t0
        stage(3, 3, "consuming them back")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got, deadline = 0, time.monotonic() + 60
        with _bars() as progress:
            task = progress.add_task("consumed", total=records)
            while got < records and time.monotonic() < deadline:
                got += sum(1 for m in consumer.consume(1000, timeout=1.0) if m.error() is None)
                progress.update(task, completed=got)
        consumer.close()
        del producer, admin  # release librdkafka handles before the broker stops (no reconnect noise)
    console.print(f"produced {len(acked)}/{records} acknowledged records in {produce_s:.2f}s; consumed {got}")
    if got != records or len(acked) != records:
        raise SystemExit(f"demo failed: produced {len(acked)}, consumed {got}, expected {records}")
    return {"produced": len(acked), "consumed": got}


# ----------------------------------------------------------------------------------------- generator
class OrdersGenerator(threading.Thread):
    """Produces Debezium change events for orders; keeps the expected final table state (the oracle)."""

    def __init__(self, bootstrap: str, events: int, seconds: float, seed: int = 7):
        super().__init__(daemon=True, name="orders-generator")
        self.bootstrap, self.events, self.seconds = bootstrap, events, seconds
        self.rng = random.Random(seed)
        self.state: dict[int, dict] = {}  # order id -> row, the expected table
        self.produced = 0
        self.ops = Counter()
        self.error: BaseException | None = None

    def _event(self, next_id: int) -> tuple[int, dict, int]:
        live = list(self.state)
        roll = self.rng.random()
        now = int(time.time() * 1000)
        if not live or roll < 0.5:  # create
            customer = self.rng.randrange(200)
            row = {"id": next_id, "customer": f"c{customer}", "region": REGIONS[customer % len(REGIONS)],
                   "amount": self.rng.randrange(1, 1000), "status": "created"}
            self.state[next_id] = row
            return next_id, {"op": "c", "before": None, "after": row, "ts_ms": now}, next_id + 1
        oid = self.rng.choice(live)
        before = self.state[oid]
        if roll < 0.9:  # update
            after = dict(before, amount=before["amount"] + self.rng.randrange(1, 50),
                         status=self.rng.choice(["paid", "shipped", "delivered"]))
            self.state[oid] = after
            return oid, {"op": "u", "before": before, "after": after, "ts_ms": now}, next_id
        del self.state[oid]  # delete
        return oid, {"op": "d", "before": before, "after": None, "ts_ms": now}, next_id

    def run(self) -> None:
        from confluent_kafka import Producer

        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 10, "acks": "all",
                                 "enable.idempotence": True, "compression.type": "lz4",
                                 "partitioner": "murmur2_random"})
            next_id, t0 = 1, time.monotonic()
            for i in range(self.events):
                key, event, next_id = self._event(next_id)
                self.ops[event["op"]] += 1
                producer.produce(TOPIC, key=str(key).encode(), value=json.dumps(event).encode())
                self.produced = i + 1
                if i % 200 == 0:  # spread the stream over `seconds` so the pipeline sees it arrive
                    producer.poll(0)
                    ahead = t0 + self.seconds * (i / self.events) - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
            if producer.flush(60) != 0:
                raise RuntimeError("generator: records left unacknowledged")
        except BaseException as e:  # surfaced by the main thread
            self.error = e


def _group_lag(bootstrap: str, partitions: int) -> list[tuple[int, int, int, int]]:
    """(partition, CURRENT-OFFSET, LOG-END-OFFSET, LAG) of the pipeline's group, as kafka-consumer-groups shows."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, p) for p in range(partitions)])
    committed = {tp.partition: tp.offset for tp in admin.list_consumer_group_offsets([req])[GROUP].result(30).topic_partitions}
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-probe"})
    rows = []
    for p in range(partitions):
        _, end = probe.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
        cur = committed.get(p, -1)
        rows.append((p, cur, end, end - cur if cur >= 0 else end))
    probe.close()
    return rows


# ----------------------------------------------------------------------------------------- pipeline demo
def run_pipeline_demo(data_dir: Path, events: int, seconds: float, partitions: int = 4) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from tidelake.broker import EmbeddedBroker
    from tidelake.spark.pipeline_config import PipelineConfig
    from tidelake.spark.runner import Pipeline
    from tidelake.spark.table_pipeline import TablePipeline
    from tidelake.table import Table

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    table_path = data_dir / "tables" / "orders"
    stage(1, 5, "starting the broker and the orders topic")
    with EmbeddedBroker(data_dir / "broker", port=0) as broker:
        bootstrap = broker.bootstrap_servers
        console.print(f"[bold]broker[/]   {bootstrap}   data: {data_dir / 'broker'}")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)
        del admin

        config = {
            "source": {"bootstrap_servers": bootstrap, "topic": TOPIC, "group_id": GROUP,
                       "max_rate_per_partition": 1500, "batch_interval": "2s"},
            "offsets": "exactly-once",
            "sink": {"table": str(table_path), "format": "debezium-json", "primary_key": ["id"],
                     "schema": "id long, customer string, region string, amount long, status string", "buckets": 4,
                     "properties": {"clustering.auto": "true", "clustering.l0.num": "4",
                                    "compaction.commit.num": "2"}},
        }
        pipeline = Pipeline(config)
        stage(2, 6, "starting Spark")
        t_spark = time.monotonic()
        with console.status("[bold]spark[/]    starting local[2] ..."):
            pipeline.spark()
        console.print(f"[bold]spark[/]    ready in {time.monotonic() - t_spark:.1f}s; table: {table_path}")
        # the second stage, orders -> revenue per region, maintained from each increment of the orders table
        revenue = TablePipeline(PipelineConfig.from_dict({
            "source": {"table": str(table_path)},
            "transform": REVENUE_SQL,
            "sink": {"table": str(data_dir / "tables" / "revenue_by_region"), "buckets": 1}}),
            spark=pipeline.spark())

        gen = OrdersGenerator(bootstrap, events, seconds)
        done = threading.Event()
        summary_box: dict = {}

        def run_pipeline() -> None:
            try:
                summary_box["summary"] = pipeline.run()
            except BaseException as e:
                summary_box["error"] = e
            finally:
                done.set()

        stage(3, 6, f"streaming {events:,} change events through the pipeline into the table, and on into "
                    f"revenue per region")
        t0 = time.monotonic()
        gen.start()
        runner = threading.Thread(target=run_pipeline, name="pipeline", daemon=True)
        runner.start()
        table = None
        revenue_steps = []
        last_step = time.monotonic()
        with _bars() as progress:
            produced_task = progress.add_task("produced  ", total=events)
            landed_task = progress.add_task("in table  ", total=events)
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline and not done.is_set():
                time.sleep(0.5)
                progress.update(produced_task, completed=gen.produced)
                if table is None and Table.exists(str(table_path)):
                    table = Table.open(str(table_path))
                landed = 0
                if table is not None:
                    table.refresh()
                    state = table.app_state(pipeline.config.app_id) or {}
                    landed = sum(int(v) for v in ((state.get("extra") or {}).get("offsets") or {}).values())
                progress.update(landed_task, completed=landed)
                if table is not None and time.monotonic() - last_step > REVENUE_EVERY_S:
                    step = revenue.step()   # the chain: new orders versions -> one incremental step
                    revenue_steps.extend([step] if step else [])
                    last_step = time.monotonic()
                if gen.error:
                    break
                if not gen.is_alive() and landed >= events:
                    break
            pipeline.stop()
            done.wait(60)
        elapsed = time.monotonic() - t0
        if gen.error:
            raise SystemExit(f"generator failed: {gen.error!r}")
        if "error" in summary_box:
            raise summary_box["error"]
        summary = summary_box.get("summary")
        if summary is None:
            raise SystemExit("the pipeline did not stop in time")
        lag = _group_lag(bootstrap, partitions)
        step = revenue.step()   # the last orders versions
        revenue_steps.extend([step] if step else [])
        revenue_check = _check_revenue(revenue)

    table = Table.open(str(table_path))
    # ------------------------------------------------------------------ report
    stage(4, 6, "report")
    batches = summary.batches
    t = RichTable(title="pipeline (exactly-once)")
    for c in ("events produced", "c / u / d", "records processed", "batches", "wall time", "records/s"):
        t.add_column(c, justify="right")
    t.add_row(f"{gen.produced:,}", f"{gen.ops['c']:,} / {gen.ops['u']:,} / {gen.ops['d']:,}", f"{summary.records:,}", str(len(batches)), f"{elapsed:.1f}s",
              f"{summary.records / max(elapsed, 1e-9):,.0f}")
    console.print(t)
    busy = sum(b.seconds for b in batches)
    console.print(f"batch processing: {busy:.1f}s busy, {summary.records / max(busy, 1e-9):,.0f} records/s while busy")

    t = RichTable(title=f"group {GROUP} on topic {TOPIC}")
    for c in ("PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"):
        t.add_column(c, justify="right")
    for row in lag:
        t.add_row(*map(str, row))
    console.print(t)

    history = table.history()
    ops = Counter(h["operation"] for h in history)
    files = table.plan()
    kinds = Counter((f.kind, f.level) for f in files)
    t = RichTable(title=f"table {table_path.name}: {len(history)} versions (latest {table.version})")
    t.add_column("commits by operation")
    t.add_column("files a latest read touches")
    t.add_row(", ".join(f"{k}: {v}" for k, v in sorted(ops.items())),
              ", ".join(f"{k} L{lvl}: {n}" for (k, lvl), n in sorted(kinds.items())))
    console.print(t)

    latest = table.scan()
    data_versions = [h["version"] for h in history if h["operation"] == "upsert"]
    mid = data_versions[len(data_versions) // 2] if data_versions else table.version
    past = table.scan(version=mid)
    console.print(f"time travel: version {mid} has {past.num_rows:,} orders; latest version {table.version} "
                  f"has {latest.num_rows:,}")
    if len(data_versions) >= 2:
        lo, hi = data_versions[-2], data_versions[-1]
        inc = table.changes(start_version=lo, end_version=hi)
        by_op = Counter(inc.column("_op").to_pylist())
        console.print(f"incremental read ({lo}, {hi}]: {inc.num_rows:,} changes {dict(by_op)} "
                      f"from {len(table.plan(start_version=lo, end_version=hi))} delta files")

    stage(5, 6, "checking the table against the generator's final state")
    expected = gen.state
    got = {r["id"]: r for r in latest.to_pylist()}
    missing = set(expected) - set(got)
    extra = set(got) - set(expected)
    wrong = [k for k in set(expected) & set(got) if {c: got[k][c] for c in expected[k]} != expected[k]]
    if missing or extra or wrong:
        raise SystemExit(f"table differs from the stream: {len(missing)} missing, {len(extra)} extra, "
                         f"{len(wrong)} wrong rows")
    console.print(f"[green]check[/]: the table equals the generator's final state ({len(expected):,} orders) — "
                  f"no change lost, none applied twice")
    stage(6, 6, "second stage: orders -> revenue per region, against a full recompute")
    t = RichTable(title="revenue_by_region (incremental aggregate)")
    for c in ("steps", "kinds", "orders changes read", "groups recomputed (min/max)", "time per step"):
        t.add_column(c, justify="right")
    kinds = Counter(s.kind for s in revenue_steps)
    t.add_row(str(len(revenue_steps)), ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())),
              f"{sum(s.changes for s in revenue_steps):,}", str(sum(s.recomputed_groups for s in revenue_steps)),
              f"{sum(s.seconds for s in revenue_steps) / max(1, len(revenue_steps)):.2f}s")
    console.print(t)
    console.print(revenue_check.rendered)
    if not revenue_check.equal:
        raise SystemExit(f"revenue_by_region differs from a full recompute at orders version {revenue_check.version}")
    console.print(f"[green]check[/]: revenue_by_region equals a full recompute of its query at orders version "
                  f"{revenue_check.version}")


@dataclass(frozen=True)
class RevenueCheck:
    version: int
    equal: bool
    rendered: RichTable


def _check_revenue(revenue) -> RevenueCheck:
    """The incremental sink against the same query over the orders snapshot it consumed."""
    version = revenue.position().version
    got = sorted(revenue.results().to_pylist(), key=lambda r: r["region"])
    want = sorted(revenue.recompute(version).to_pylist(), key=lambda r: r["region"])
    t = RichTable(title=f"revenue per region at orders version {version}")
    for c in ("region", "orders", "revenue", "avg", "min", "max"):
        t.add_column(c, justify="right")
    for r in got:
        t.add_row(r["region"], f"{r['orders']:,}", f"{r['revenue']:,}", f"{r['avg_amount']:.1f}", str(r["min_amount"]),
                  str(r["max_amount"]))
    return RevenueCheck(version, got == want, t)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=None, help="where to keep the demo's data (default: a new temp dir)")
    ap.add_argument("--events", type=int, default=20000, help="change events the generator produces")
    ap.add_argument("--seconds", type=float, default=20.0, help="spread the events over this many seconds")
    ap.add_argument("--broker-only", action="store_true", help="only the broker part")
    ap.add_argument("--reset", action="store_true",
                    help="delete a previous run's data in --data-dir first (its checks compare against a fresh start)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="tidelake-demo-"))
    previous = [data_dir / part for part in ("broker", "tables") if (data_dir / part).exists()]
    if previous and not args.reset:
        # The demo checks its table against what its own generator produced; an old topic or table
        # in the same place would make that check compare two different runs.
        ap.exit(2, f"tidelake demo: error: {data_dir} holds a previous demo run; "
                   f"pass --reset to delete it first, or choose another --data-dir\n")
    for path in previous:
        shutil.rmtree(path)
    data_dir.mkdir(parents=True, exist_ok=True)
    console.rule("[bold]tidelake demo")
    started = time.monotonic()
    if args.broker_only:
        run_broker_demo(data_dir)
    else:
        run_pipeline_demo(data_dir, args.events, args.seconds)
    console.print(f"[green]done[/] in {time.monotonic() - started:.0f}s — data left in {data_dir}")


if __name__ == "__main__":
    main()
