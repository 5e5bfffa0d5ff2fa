"""Seed 001's experiments (SPEC P3), reproduced against tidelake's broker, real Spark and a tidelake table.

    .venv/bin/python benchmarks/paper_experiments.py            # full: 100,000 records, 30 kills per mode
    .venv/bin/python benchmarks/paper_experiments.py --quick    # 3 kills per mode

Experiment 1 (``auto``): topic of 4 partitions and 100,006 records, batch interval 2 s, 50 records/s per
partition; the program is stopped after 10 s. The group's CURRENT-OFFSET already equals LOG-END-OFFSET
although most records were never processed; after a restart there is nothing left to read: lost.

Experiments 2 and 3 (Tables 1 and 2) plus exactly-once: 4 partitions, 100,000 records, 5 runs with different
batch intervals and max rates; each run is stopped gracefully half-way (after the current batch, as
``ssc.stop(true, true)``) and restarted to completion. Per run: produced, distinct consumed, lost, duplicated
and the paper's predicted duplicates for commit-after (partitions x interval x rate).

Kill -9 column: for each mode a chain of N real ``tidelake pipeline run`` processes, each killed with SIGKILL
at a random moment after its first batch (before each, a fresh chunk of records is produced so every run has
new work, as a live stream would), then one restart to completion; lost and duplicated records are counted
over the whole chain.

"Consumed" is what reached the sink: every change row of the table's incremental read over its whole
history (``table.changes(start_version=0)``), so a record processed twice counts twice.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from tidelake.spark.offset_stores import BrokerOffsets  # noqa: E402
from tidelake.spark.runner import Pipeline  # noqa: E402
from tidelake.table import Table  # noqa: E402

PARTITIONS = 4
RUNS = [(1.0, 1000), (2.0, 1000), (2.0, 2500), (3.0, 2000), (4.0, 2500)]  # (batch interval s, max rate/s/partition)
MODES = ["commit-after", "seo", "exactly-once"]


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(60)


def produce(bootstrap: str, topic: str, ids: range) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 5000})
    for i in ids:
        while True:
            try:
                producer.produce(topic, b'{"id": %d, "amount": %d}' % (i, i), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    return len(ids)


def config(bootstrap: str, topic: str, group: str, mode: str, work: Path, interval: float, rate: int) -> dict:
    return {"source": {"bootstrap_servers": bootstrap, "topic": topic, "group_id": group,
                       "max_rate_per_partition": rate, "batch_interval": interval},
            "offsets": mode, "seo_dir": str(work / "gtoffset"),
            "sink": {"table": str(work / f"table-{group}"), "format": "json", "primary_key": ["id"],
                     "schema": "id long, amount long", "buckets": 4,
                     # the experiments are about offsets: no table maintenance between batches
                     "properties": {"clustering.auto": "false"}}}


def sink_counts(table_path: str, produced: int) -> dict:
    ids = Table.open(table_path).changes(start_version=0).column("id").to_pylist()
    distinct = len(Counter(ids))
    return {"produced": produced, "consumed": distinct, "lost": produced - distinct,
            "duplicated": len(ids) - distinct}


def experiment_1(bootstrap: str, work: Path, spark, records: int) -> dict:
    create_topic(bootstrap, "test1")
    produce(bootstrap, "test1", range(records))
    interval, rate = 2.0, 50
    cfg = config(bootstrap, "test1", "exp1", "auto", work, interval, rate)
    first = Pipeline(cfg, spark=spark)
    stopper = threading.Timer(10.0, first.stop)  # "stop the Spark program after 10 s"
    stopper.start()
    run1 = first.run()
    stopper.cancel()
    with BrokerOffsets(bootstrap, "test1", "exp1") as b:
        current, (_, log_end) = b.committed(), b.watermarks()
    run2 = Pipeline(cfg, spark=spark).run(once=True)
    counts = sink_counts(cfg["sink"]["table"], records)
    return {"interval": interval, "rate": rate, "batches_before_stop": len(run1.batches),
            "processed_before_stop": run1.records, "current_offset": current, "log_end_offset": log_end,
            "read_after_restart": run2.records, **counts}


def graceful_run(bootstrap: str, work: Path, spark, topic: str, records: int, mode: str, interval: float,
                 rate: int, index: int) -> dict:
    group = f"{mode}-run{index}"
    cfg = config(bootstrap, topic, group, mode, work, interval, rate)
    per_batch = PARTITIONS * int(interval * rate)
    half = max(1, math.ceil(records / per_batch) // 2)
    began = time.monotonic()
    first = Pipeline(cfg, spark=spark).run(max_batches=half)  # graceful stop half-way
    second = Pipeline(cfg, spark=spark).run(once=True)  # restart to completion
    counts = sink_counts(cfg["sink"]["table"], records)
    return {"mode": mode, "interval": interval, "rate": rate, **counts,
            "predicted": PARTITIONS * int(interval * rate) if mode == "commit-after" else 0,
            "batches": len(first.batches) + len(second.batches), "seconds": round(time.monotonic() - began, 1)}


class Proc:
    def __init__(self, cfg_path: Path):
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        self.p = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "pipeline", "run", str(cfg_path)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        self.batches = 0
        self.tail: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stderr:
            self.tail = (self.tail + [line])[-20:]
            if "tidelake.pipeline INFO batch " in line:
                self.batches += 1

    def kill_after_first_batch(self, rng: random.Random, max_delay: float, timeout: float = 300.0) -> int:
        deadline = time.monotonic() + timeout
        while self.batches < 1:
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.p.kill()
                raise RuntimeError("pipeline died or stalled before its first batch:\n" + "".join(self.tail))
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, max_delay))
        os.kill(self.p.pid, signal.SIGKILL)
        self.p.wait(60)
        return self.batches


def kill_chain(bootstrap: str, work: Path, spark, mode: str, kills: int, chunk: int, rng: random.Random) -> dict:
    topic, group = f"kill-{mode}", f"kill-{mode}"
    interval, rate = 0.5, 250  # 500 records per batch
    create_topic(bootstrap, topic)
    cfg = config(bootstrap, topic, group, mode, work, interval, rate)
    cfg_path = work / f"{group}.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    produced = 0
    for _ in range(kills):
        produced += produce(bootstrap, topic, range(produced, produced + chunk))
        Proc(cfg_path).kill_after_first_batch(rng, max_delay=3.0)
    Pipeline(cfg, spark=spark).run(once=True)  # restart to completion
    return {"mode": mode, "kills": kills, **sink_counts(cfg["sink"]["table"], produced)}


def markdown(exp1: dict, runs: list[dict], kills: list[dict], args) -> str:
    out = [f"Command: `.venv/bin/python benchmarks/paper_experiments.py{' --quick' if args.quick else ''}"
           f"{f' --records {args.records}' if args.records != 100_000 else ''}` "
           f"(tidelake broker + Spark local[2] + tidelake table, {PARTITIONS} partitions)", ""]
    if exp1:
        out += [
           "Experiment 1 (`auto`, enable.auto.commit): interval 2 s, 50/s/partition, stopped after 10 s:", "",
           "| produced | processed before stop | CURRENT-OFFSET | LOG-END-OFFSET | read after restart | lost |",
           "|---:|---:|---|---|---:|---:|",
           f"| {exp1['produced']} | {exp1['processed_before_stop']} | {exp1['current_offset']} | "
           f"{exp1['log_end_offset']} | {exp1['read_after_restart']} | {exp1['lost']} |", ""]
    out += ["Experiments 2/3 (+ exactly-once): one graceful stop half-way, then restart to completion:", "",
           "| mode | interval s | rate /s/partition | produced | distinct consumed | lost | duplicated "
           "| predicted duplicates (p x i x r) | batches | seconds |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        out.append(f"| {r['mode']} | {r['interval']:g} | {r['rate']} | {r['produced']} | {r['consumed']} | "
                   f"{r['lost']} | {r['duplicated']} | {r['predicted']} | {r['batches']} | {r['seconds']} |")
    out += ["", f"Kill -9 column: per mode, a chain of real `tidelake pipeline run` processes each killed with "
                f"SIGKILL at a random moment (0-3 s) after its first batch, {args.chunk} new records produced "
                f"before each; then one restart to completion (interval 0.5 s, 250/s/partition):", "",
            "| mode | kills | produced | distinct consumed | lost | duplicated |", "|---|---:|---:|---:|---:|---:|"]
    for k in kills:
        out.append(f"| {k['mode']} | {k['kills']} | {k['produced']} | {k['consumed']} | {k['lost']} | "
                   f"{k['duplicated']} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 kills per mode instead of 30")
    ap.add_argument("--kills", type=int, default=None)
    ap.add_argument("--records", type=int, default=100_000, help="records per graceful run (paper: 100,000)")
    ap.add_argument("--chunk", type=int, default=2000, help="records produced before each killed run")
    ap.add_argument("--skip", nargs="*", default=[], choices=["exp1", "graceful", "kill"])
    ap.add_argument("--kill-modes", nargs="*", default=["auto"] + MODES, help="modes of the kill -9 column")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    args = ap.parse_args()
    kills = args.kills if args.kills is not None else (3 if args.quick else 30)
    rng = random.Random(args.seed)

    from tidelake.broker import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="tidelake-paper-") as tmp, \
            EmbeddedBroker(Path(tmp) / "broker", config={"log.retention.hours": "1000"}) as broker:
        work = Path(tmp)
        bootstrap = broker.bootstrap_servers
        spark = Pipeline(config(bootstrap, "x", "x", "auto", work, 1, 1)).spark()
        # Warm Spark's Python workers first, so experiment 1's "10 s" are batches, not start-up.
        create_topic(bootstrap, "warmup")
        produce(bootstrap, "warmup", range(2000))
        Pipeline(config(bootstrap, "warmup", "warmup", "exactly-once", work, 1, 250), spark=spark).run(once=True)
        exp1 = {} if "exp1" in args.skip else experiment_1(bootstrap, work, spark, args.records + 6)
        if exp1:
            print("experiment 1:", json.dumps(exp1), flush=True)
        runs = []
        if "graceful" not in args.skip:
            create_topic(bootstrap, "test23")
            produce(bootstrap, "test23", range(args.records))
            for mode in MODES:
                for i, (interval, rate) in enumerate(RUNS):
                    runs.append(graceful_run(bootstrap, work, spark, "test23", args.records, mode, interval, rate, i))
                    print("run:", json.dumps(runs[-1]), flush=True)
        chains = []
        if "kill" not in args.skip:
            for mode in args.kill_modes:
                chains.append(kill_chain(bootstrap, work, spark, mode, kills, args.chunk, rng))
                print("kill chain:", json.dumps(chains[-1]), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"exp1": exp1, "runs": runs, "kills": chains}, indent=1))
        args.kills = kills
        print()
        print(markdown(exp1, runs, chains, args))
        spark.stop()


if __name__ == "__main__":
    main()
