"""What the Parquet page checksums a table's data files carry (issue 23: `table check` verifies every page) cost:
CPU time to write a data file with and without them, and to read it with and without verifying them, side by
side in one run, with the ratio.

    .venv/bin/python benchmarks/page_checksums.py [--rows 1000000] [--rounds 15]

The file is written with the options the table's writer uses (tidelake.table.files.write_parquet: LZ4 but for
incompressible floats, dictionary strings, delta-encoded integers, key statistics, 128k-row groups), once with
and once without ``write_page_checksum``; CPU time of this process (not wall-clock: the machine is shared),
median of the rounds, the variants alternating. Prints a Markdown table (no file is written).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tidelake.table.files import _codecs  # noqa: E402  (the writer's per-column codec choice)


def data(n: int) -> pa.Table:
    rng = np.random.default_rng(1)
    return pa.table({"id": np.arange(n), "amount": rng.integers(0, 1_000_000, n), "price": rng.random(n),
                     "category": pa.array([f"cat-{i % 32:02d}" for i in range(n)]), "_op": np.zeros(n, np.int8)})


def cpu(call) -> float:
    began = time.process_time()
    call()
    return time.process_time() - began


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    table = data(args.rows)
    options = dict(compression=_codecs(table, ["id"]), use_dictionary=["category"],
                   column_encoding={"id": "DELTA_BINARY_PACKED", "amount": "DELTA_BINARY_PACKED"},
                   sorting_columns=[pq.SortingColumn(0)], write_statistics=["id"], row_group_size=128 * 1024)
    with tempfile.TemporaryDirectory() as d:
        paths = {True: os.path.join(d, "with.parquet"), False: os.path.join(d, "without.parquet")}
        writes: dict[bool, list[float]] = {True: [], False: []}
        reads: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for crc in (True, False):
                writes[crc].append(cpu(lambda: pq.write_table(table, paths[crc], write_page_checksum=crc,
                                                              **options)))
            for verify in (True, False):
                reads[verify].append(cpu(lambda: pq.ParquetFile(paths[True], page_checksum_verification=verify,
                                                                 pre_buffer=False).read(use_threads=False)))
        meta = pq.read_metadata(paths[True])
        size = os.path.getsize(paths[True])
    w1, w0 = statistics.median(writes[True]), statistics.median(writes[False])
    r1, r0 = statistics.median(reads[True]), statistics.median(reads[False])
    print(f"{args.rows:,} rows, {meta.num_row_groups} row groups, {size / 1e6:.1f} MB; CPU ms, median of {args.rounds}")
    print()
    print("| step | with page checksums | without | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| write a data file | {w1 * 1000:.1f} | {w0 * 1000:.1f} | {w1 / w0:.3f} |")
    print(f"| read it, checksums verified (as `table check`) / not (as a scan) | {r1 * 1000:.1f} | {r0 * 1000:.1f} "
          f"| {r1 / r0:.3f} |")


if __name__ == "__main__":
    main()
