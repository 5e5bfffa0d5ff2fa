"""Micro-benchmark of the storage engine's hot path: PartitionLog.append and sequential read.

1 KB records in 16 KB batches (16 records per batch, uncompressed), default LogConfig except
segment.bytes (256 MiB so a run rolls a few segments). Prints appends/s, records/s and MB/s.

    .venv/bin/python benchmarks/log_append.py [--seconds 5] [--idempotent]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from tidelake.clock import wall_ms
from tidelake.log import LogConfig, PartitionLog
from tidelake.protocol.records import Record, build_batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--batch-bytes", type=int, default=16 * 1024)
    ap.add_argument("--idempotent", action="store_true", help="producer id + sequences on every batch")
    ap.add_argument("--dir", default=None, help="data directory (default: a temp dir, removed after)")
    args = ap.parse_args()

    per_batch = max(1, args.batch_bytes // args.record_bytes)
    value = os.urandom(args.record_bytes)
    tmp = Path(args.dir or tempfile.mkdtemp(prefix="log-bench-"))
    log = PartitionLog.open(tmp / "bench-0", LogConfig(segment_bytes=256 << 20))
    now = wall_ms()
    template = build_batch([Record(i, now, b"key-%d" % i, value) for i in range(per_batch)])
    n = 0
    total_bytes = 0
    if args.idempotent:
        # distinct sequence numbers need distinct batches: pre-build a bounded set, append each once
        batches = [build_batch([Record(i, now, b"key-%d" % i, value) for i in range(per_batch)],
                               producer_id=1, producer_epoch=0, base_sequence=s * per_batch)
                   for s in range(3000)]
        t0 = time.perf_counter()
        for b in batches:
            log.append(b, now_ms=now)
            total_bytes += len(b)
        n = len(batches)
    else:
        deadline = time.perf_counter() + args.seconds
        t0 = time.perf_counter()
        while time.perf_counter() < deadline:
            for _ in range(100):
                log.append(template, now_ms=now)
            n += 100
            total_bytes += 100 * len(template)
    elapsed = time.perf_counter() - t0
    print(f"append: {n / elapsed:,.0f} appends/s  {n * per_batch / elapsed:,.0f} records/s  "
          f"{total_bytes / elapsed / 1e6:,.1f} MB/s  ({n} batches of {len(template)} B, "
          f"{len(log.segments)} segments, {elapsed:.1f} s)")

    # sequential read of everything, 1 MiB per read (a consumer's fetch.max.bytes-ish)
    t0 = time.perf_counter()
    off, read_bytes, reads = 0, 0, 0
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20).data
        reads += 1
        read_bytes += len(data)
        # the last batch's offsets: every batch here holds per_batch records
        off += (len(data) // len(template)) * per_batch
    elapsed = time.perf_counter() - t0
    print(f"read:   {reads / elapsed:,.0f} reads/s  {read_bytes / elapsed / 1e6:,.1f} MB/s  "
          f"({reads} reads of up to 1 MiB)")
    log.close()
    if args.dir is None:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
