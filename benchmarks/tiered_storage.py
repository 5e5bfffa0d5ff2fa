"""Tiered storage figures (issue 29), all in one run against moto's S3 server on loopback:

1. produce throughput to a tiered topic (segments copied to S3 meanwhile) vs the same to a plain topic;
2. the tiered partition's local disk, sampled while it is produced, against local.retention.bytes + 2 segments,
   while the whole log (local + remote) retains 20x local.retention.bytes or more;
3. consumer read throughput of the same history from S3 (the tiered topic, every closed segment remote)
   vs from local disk (the plain topic).

The broker is an EmbeddedBroker in this process; the clients are confluent-kafka (librdkafka threads).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tidelake.broker import EmbeddedBroker  # noqa: E402
from results_file import replace_heading  # noqa: E402  (beside this script)
from s3_server import start_moto  # noqa: E402  (beside this script)

MB = 1 << 20



def dir_bytes(path: Path) -> int:
    total = 0
    for entry in os.scandir(path):
        if entry.name.endswith((".log", ".index", ".timeindex", ".txnindex")):
            try:
                total += entry.stat().st_size
            except FileNotFoundError:   # deleted by local retention meanwhile
                pass
    return total


def produce(bootstrap: str, topic: str, count: int, size: int, sample: Path | None,
            rate_mb: float | None = None) -> tuple[float, int]:
    """Seconds to produce and flush ``count`` records of ``size`` bytes (at most ``rate_mb`` MiB/s if
    given); the largest local size sampled."""
    peak, stop = [0], threading.Event()

    def sampler() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], dir_bytes(sample))
            time.sleep(0.02)
    watcher = threading.Thread(target=sampler, daemon=True) if sample is not None else None
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 256 * 1024, "acks": "1",
                  "queue.buffering.max.kbytes": 256 * 1024})
    value = os.urandom(size)
    if watcher is not None:
        watcher.start()
    start = time.perf_counter()
    for i in range(count):
        if rate_mb is not None and i % 256 == 0:
            ahead = i * size / (rate_mb * MB) - (time.perf_counter() - start)
            if ahead > 0:
                time.sleep(ahead)
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120) != 0:
        raise SystemExit(f"{topic}: records left unacknowledged")
    elapsed = time.perf_counter() - start
    stop.set()
    if watcher is not None:
        watcher.join()
    return elapsed, peak[0]


def consume(bootstrap: str, topic: str, count: int) -> tuple[float, int]:
    """Seconds to read ``count`` records from offset 0, and their bytes."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 * MB, "max.partition.fetch.bytes": 4 * MB})
    c.assign([TopicPartition(topic, 0, 0)])
    got = nbytes = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 600
    try:
        while got < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"{topic}: read {got} of {count} records")
            for m in c.consume(10000, 1.0):
                if m.error():
                    raise SystemExit(f"{topic}: {m.error()}")
                got += 1
                nbytes += len(m.value())
        return time.perf_counter() - start, nbytes
    finally:
        c.close()


def wait_until(condition, what: str, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=64, help="MiB produced to each topic")
    ap.add_argument("--size", type=int, default=1024, help="record value bytes")
    ap.add_argument("--segment-kb", type=int, default=1024, help="segment.bytes of both topics, KiB")
    ap.add_argument("--local-retention-mb", type=int, default=3, help="local.retention.bytes of the tiered topic")
    ap.add_argument("--steady-mb-s", type=float, default=2.0,
                    help="produce rate of the disk-bound figure (below what the copies to S3 sustain)")
    ap.add_argument("--rounds", type=int, default=3, help="produce rounds, plain and tiered alternately (medians)")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    count = args.mb * MB // args.size
    moto, endpoint = start_moto()
    work = Path(tempfile.mkdtemp(prefix="tidelake-tiered-bench-"))
    try:
        import boto3
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                     aws_secret_access_key="bench").create_bucket(Bucket="tiered")
        config = {"remote.log.storage.system.enable": "true", "remote.log.storage.url": "s3://tiered/bench",
                  "remote.log.storage.endpoint": endpoint, "remote.log.storage.region": "us-east-1",
                  "remote.log.storage.access_key_id": "bench", "remote.log.storage.secret_access_key": "bench",
                  "remote.log.manager.task.interval.ms": "200"}
        segment = args.segment_kb * 1024
        local_retention = args.local_retention_mb * MB
        with EmbeddedBroker(work, config=config) as b:
            common = {"segment.bytes": str(segment), "retention.ms": "-1"}
            tiered_cfg = {**common, "remote.storage.enable": "true", "local.retention.bytes": str(local_retention)}
            b.run(b.broker.create_topic, "plain", 1, common)
            b.run(b.broker.create_topic, "tiered", 1, tiered_cfg)
            b.run(b.broker.create_topic, "steady", 1, tiered_cfg)
            b.run(b.broker.create_topic, "warmup", 1, common)
            produce(b.bootstrap_servers, "warmup", count // 4, args.size, None)   # the first run pays start-up costs
            # alternately, so both see the same moments of a shared machine; medians
            plain_runs, tiered_runs, peaks = [], [], []
            for _ in range(args.rounds):
                plain_runs.append(produce(b.bootstrap_servers, "plain", count, args.size, None)[0])
                seconds, peak = produce(b.bootstrap_servers, "tiered", count, args.size, work / "tiered-0")
                tiered_runs.append(seconds)
                peaks.append(peak)
            plain_s, tiered_s, peak_local = (statistics.median(plain_runs), statistics.median(tiered_runs),
                                             max(peaks))
            held = count * args.rounds   # records each of the two topics now holds
            remote = b.broker.logs.remote
            tlog = b.broker.logs.get("tiered", 0)
            backlog_start, backlog = time.perf_counter(), tlog.size_bytes - local_retention
            wait_until(lambda: (m := remote.metadata("tiered", 0)) is not None
                       and m.end_offset == tlog.segments[-1].base_offset, "every closed segment copied")
            copy_mb_s = backlog / MB / (time.perf_counter() - backlog_start)
            retained = remote.metadata("tiered", 0).size_bytes + tlog.size_bytes
            steady_s, peak_steady = produce(b.bootstrap_servers, "steady", count, args.size, work / "steady-0",
                                            args.steady_mb_s)
            slog = b.broker.logs.get("steady", 0)
            wait_until(lambda: (m := remote.metadata("steady", 0)) is not None
                       and m.end_offset == slog.segments[-1].base_offset, "every closed segment copied")
            retained_steady = remote.metadata("steady", 0).size_bytes + slog.size_bytes
            # the read: every closed segment of the tiered topic only in S3
            b.run(b.broker.context.topics.alter_configs, "tiered", {**tiered_cfg, "local.retention.bytes": "0"})
            wait_until(lambda: len(tlog.segments) == 1, "the tiered topic's local segments deleted")
            remote_share = tlog.local_log_start_offset / tlog.log_end_offset
            local_read_s, nbytes = consume(b.bootstrap_servers, "plain", held)
            remote_read_s, nbytes_r = consume(b.bootstrap_servers, "tiered", held)
            assert nbytes == nbytes_r == held * args.size
            gets = remote.reader.gets
    finally:
        shutil.rmtree(work, ignore_errors=True)
        moto.terminate()
        try:
            moto.wait(10)
        except subprocess.TimeoutExpired:
            moto.kill()
    mbs = lambda seconds: args.mb / seconds  # noqa: E731  (one round's MiB)
    read_mbs = lambda seconds: args.mb * args.rounds / seconds  # noqa: E731
    bound = local_retention + 2 * segment
    lines = [
        f"Command: `.venv/bin/python benchmarks/tiered_storage.py --mb {args.mb} --size {args.size} "
        f"--segment-kb {args.segment_kb} --local-retention-mb {args.local_retention_mb} --steady-mb-s {args.steady_mb_s:g} "
        f"--rounds {args.rounds}` (2-core machine shared with "
        "other jobs; one EmbeddedBroker in the benchmark's process, confluent-kafka clients, moto_server — Python — "
        "as S3 on loopback, remote.log.manager.task.interval.ms=200; produce: medians of the rounds, the reads cover "
        "every round's records).",
        "",
        "| figure | tiered | baseline | ratio | goal |",
        "|---|---:|---:|---:|---|",
        f"| produce MB/s (tiered topic, copies running / plain topic) | {mbs(tiered_s):.1f} | {mbs(plain_s):.1f} | "
        f"{plain_s / tiered_s:.2f}x | >= 0.9x |",
        f"| read MB/s from offset 0 ({remote_share:.0%} of it from S3 / all from local disk) | {read_mbs(remote_read_s):.1f} | "
        f"{read_mbs(local_read_s):.1f} | {local_read_s / remote_read_s:.2f}x | >= 0.5x |",
        f"| local disk, peak MiB, producing at {args.steady_mb_s:g} MiB/s (/ local.retention.bytes + 2 segments) | "
        f"{peak_steady / MB:.1f} | {bound / MB:.1f} | {peak_steady / bound:.2f} | <= 1 |",
        f"| retained MiB then, local + remote (/ local.retention.bytes) | {retained_steady / MB:.1f} | "
        f"{local_retention / MB:.1f} | {retained_steady / local_retention:.1f}x | >= 20x |",
        f"| copies to S3, MiB/s (the backlog the flat-out produce left) | {copy_mb_s:.1f} | | | |",
        f"| local disk, peak MiB, producing flat out ({mbs(tiered_s):.0f} MiB/s) (/ the same bound) | "
        f"{peak_local / MB:.1f} | {bound / MB:.1f} | {peak_local / bound:.2f} | (none) |",
        "",
        f"The remote read made {gets} GETs (1 MiB ranged GETs of the .log; a segment entered at its start with no aborted transaction needs no index GET). Produced flat "
        f"out, the producer outruns the copies to moto (a Python server): the local disk holds what is not copied yet "
        f"and comes back under the bound once the copies catch up (retained then {retained / MB:.1f} MiB); Kafka's "
        "tiered storage behaves the same (a segment is deleted locally only once copied).",
    ]
    print("\n".join(lines))
    if not args.no_write:
        replace_heading("Tiered storage (remote segments on S3)", "\n".join(lines))


if __name__ == "__main__":
    main()
