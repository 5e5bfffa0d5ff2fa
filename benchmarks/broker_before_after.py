"""Broker before/after: the current tidelake broker against the same broker at an earlier commit, in one run.

    .venv/bin/python benchmarks/broker_before_after.py --baseline 110f011            # writes RESULTS.md
    .venv/bin/python benchmarks/broker_before_after.py --baseline 110f011 --quick    # smoke run, not written

Why a second script: a refactoring ("nothing regresses") is judged by comparing the code before and after
on the same machine under the same load, and this machine is often shared. So both brokers run side by
side, every row alternates between them (benchmarks/broker_throughput.py's `bench`), and the table gives
throughput and broker CPU seconds per GB for each with their ratio. The baseline is checked out with
`git worktree` into a temporary directory and started from there, with the same Python and libraries.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker_throughput as bt  # noqa: E402  (benchmarks/broker_throughput.py, beside this script)

ROOT = Path(__file__).resolve().parent.parent


def start_tidelake_at(source_root: Path, data_dir: Path) -> bt.BrokerProcess:
    port = bt._free_port()
    argv = [sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir", str(data_dir),
            "--listen", f"127.0.0.1:{port}", "--log-level", "WARNING"]
    # `python -m` puts the working directory first on sys.path: the broker runs that checkout's code
    return bt.BrokerProcess("tidelake", argv, port, cwd=source_root)


def table(res: dict, baseline: str) -> list[str]:
    lines = [f"| phase | size | acks | msgs | now msg/s | {baseline} msg/s | now/before | "
             f"CPU-s per GB now / before | CPU ratio (lower is better) |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for size in bt.SIZES:
        for phase, acks in (("produce", "1"), ("produce", "all"), ("consume", "-")):
            n, b = res["now"][(phase, size, acks)], res["before"][(phase, size, acks)]
            rn, rb = n["count"] / n["wall"], b["count"] / b["wall"]
            cn, cb = bt._cpu_per_gb(n), bt._cpu_per_gb(b)
            flag = "" if n["missing"] == 0 and b["missing"] == 0 else \
                f" (missing: now {n['missing']}, before {b['missing']})"
            lines.append(f"| {phase} | {size} B | {acks} | {n['count']:,} | {rn:,.0f} | {rb:,.0f} | "
                         f"**{rn / rb:.2f}×**{flag} | {cn:.2f} / {cb:.2f} | {cn / cb:.2f}× |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="git commit (or ref) of the 'before' broker")
    ap.add_argument("--quick", action="store_true", help=f"1/{bt.QUICK_DIVISOR} of the messages; not written")
    ap.add_argument("--repeats", type=int, default=0, help="repetitions per row (default 3, 1 with --quick)")
    ap.add_argument("--results", type=Path, default=bt.RESULTS)
    ap.add_argument("--data-root", type=Path, default=None,
                    help="where the two data directories go (e.g. /dev/shm, to take the disk out of the comparison)")
    args = ap.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    commit = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="tidelake-before-after-"))
    checkout = work / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(checkout), commit], cwd=ROOT, check=True,
                   capture_output=True)
    data_root = Path(tempfile.mkdtemp(prefix="tidelake-before-after-", dir=args.data_root)) if args.data_root else work
    brokers: dict[str, bt.BrokerProcess] = {}
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    started = time.monotonic()
    try:
        brokers["now"] = start_tidelake_at(ROOT, data_root / "data-now")
        brokers["before"] = start_tidelake_at(checkout, data_root / "data-before")
        counts = {s: n // (bt.QUICK_DIVISOR if args.quick else 1) for s, n in bt.CLIENTS["wire"][2].items()}
        try:
            res = bt.bench(brokers, "wire", counts, repeats, checked=tuple(brokers))
        finally:
            for b in brokers.values():
                b.stop()
        load_after = Path("/proc/loadavg").read_text().split()[:3]
        lines = table(res, commit)
        print("\n" + "\n".join(lines))
        print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}; "
              f"{time.monotonic() - started:.0f} s")
        if not args.quick:
            # one section per storage, so the disk run and the tmpfs run sit side by side
            tag = "broker-before-after" + ("-" + args.data_root.name if args.data_root else "")
            start, end = f"<!-- {tag}:start -->", f"<!-- {tag}:end -->"
            where = f"data directories under {args.data_root}" if args.data_root else "data directories on disk"
            body = "\n".join([
                start, f"## Broker before/after (issue 15's refactoring), {where}", "",
                f"Command: `.venv/bin/python benchmarks/broker_before_after.py {' '.join(sys.argv[1:])}`", "",
                f"The current broker ('now') and the broker at commit {commit} ('before', checked out with git "
                f"worktree), both `tidelake broker start` subprocesses on disk, driven by the lean wire "
                f"generator of the broker throughput table ({bt.PARTITIONS} producer and consumer processes); "
                f"every row alternates between the two, {repeats} repetitions each (the order reversed every other "
                f"one), the best kept. Data directories: {'under ' + str(args.data_root) if args.data_root else 'a temporary directory on disk'}.", "",
                *lines, "",
                f"Machine: {os.cpu_count()} cores; load average (1/5/15 min) before {' '.join(load_before)}, after "
                f"{' '.join(load_after)} (above 2 before the run: other work shared the cores, which hits both "
                "brokers alike since rows alternate). 'CPU-s per GB' is the broker's CPU time per GB of payload, "
                "the comparison least moved by other load.",
                end])
            text = args.results.read_text()
            if start in text:
                text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _m: body, text,
                              flags=re.S)
            else:
                text = text.rstrip("\n") + "\n\n" + body + "\n"
            args.results.write_text(text)
            print(f"wrote {args.results}")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=ROOT, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(data_root, ignore_errors=True)


if __name__ == "__main__":
    main()
