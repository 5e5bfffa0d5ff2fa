"""How fast the web console's pages answer on the demo's data, against the 300 ms budget.

Reopens the broker and table a ``tidelake.demo --data-dir DIR`` run left behind (running the demo first when DIR
holds none), writes the demo pipeline's YAML, starts ``tidelake console`` as a subprocess and requests every page
``--requests`` times, ``--pause`` seconds apart (longer than the console's 2 s admin cache now and then, so the
maximum includes answers computed afresh). Prints per page p50 and max beside the budget as a ratio.

    .venv/bin/python benchmarks/console_latency.py --data-dir /tmp/demo-data [--screenshots docs/screenshots]

``--screenshots DIR`` also saves a screenshot of the main pages (Debian's chromium through playwright).
"""
from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_MS = 300.0
TOPIC, GROUP = "orders", "orders-to-table"   # the demo's
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def demo_data(data_dir: Path) -> None:
    if (data_dir / "tables" / "orders").exists():
        return
    print(f"no demo data in {data_dir}: running the demo first (1-2.5 minutes)", flush=True)
    subprocess.run([sys.executable, "-m", "tidelake.demo", "--data-dir", str(data_dir)], check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})


def pipeline_yaml(bootstrap: str, table: Path) -> str:
    return (f"source:\n  bootstrap_servers: {bootstrap}\n  topic: {TOPIC}\n  group_id: {GROUP}\n"
            f"  max_rate_per_partition: 1500\n  batch_interval: 2s\noffsets: exactly-once\n"
            f"sink:\n  table: {table}\n  format: debezium-json\n  primary_key: [id]\n"
            f"  schema: \"id long, customer string, amount long, status string\"\n  buckets: 4\n")


def start_console(args: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "console", "--listen", "127.0.0.1:0", *args],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    first = lines.get(timeout=60)
    return proc, "http://" + first.split("http://", 1)[1].split("/", 1)[0]


def fetch_ms(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as answer:
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{url}: HTTP {answer.status}")
    return (time.perf_counter() - t0) * 1000


def pages(table) -> list[tuple[str, str]]:
    history = [h["version"] for h in table.history()]
    mid = history[len(history) // 2]
    first_ts = table.history()[0]["timestamp_ms"]
    return [("overview", "/"), ("topics", "/topics"), ("topic", f"/topics/{TOPIC}"),
            ("messages by offset", f"/topics/{TOPIC}/messages?partition=0&offset=1000&limit=20"),
            ("messages by time", f"/topics/{TOPIC}/messages?partition=1&timestamp={first_ts}&limit=20"),
            ("groups", "/groups"), ("group", f"/groups/{GROUP}"), ("pipelines", "/pipelines"),
            ("pipeline", "/pipelines/orders"), ("tables", "/tables"), ("table", "/tables/orders"),
            ("table time travel", f"/tables/orders?version={mid}"),
            ("table changes", f"/tables/orders?start={history[-3]}&end={history[-1]}"), ("metrics", "/metrics")]


def screenshots(base: str, out: Path, table_paths: list[tuple[str, str]]) -> None:
    from playwright.sync_api import sync_playwright
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for name, path in table_paths:
            page.goto(base + path)
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / f"{name}.png"), full_page=False)
            print(f"screenshot {out / (name + '.png')}")
        browser.close()


def produce_traffic(bootstrap: str, stop: threading.Event, per_second: int = 300) -> None:
    """Changes to the demo's orders while screenshots are taken, so the charts have something to show (this
    appends to the demo's topic)."""
    import json

    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    i = 0
    while not stop.is_set():
        for _ in range(per_second // 10):
            i += 1
            after = {"id": 100_000 + i, "customer": f"c{i % 200}", "amount": i % 1000, "status": "created"}
            producer.produce(TOPIC, key=str(after["id"]).encode(),
                             value=json.dumps({"op": "c", "before": None, "after": after,
                                               "ts_ms": int(time.time() * 1000)}).encode())
        producer.poll(0)
        stop.wait(0.1 * (1 + (i // 3000) % 3))   # a rate that changes, so the chart is not a flat line
    producer.flush(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/tidelake-demo-data"))
    ap.add_argument("--requests", type=int, default=16, help="requests per page")
    ap.add_argument("--pause", type=float, default=0.25, help="seconds between two requests of a page")
    ap.add_argument("--screenshots", type=Path, default=None, help="save screenshots of the main pages here")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    demo_data(args.data_dir)

    from tidelake.broker import EmbeddedBroker
    from tidelake.table import Table

    table_path = args.data_dir / "tables" / "orders"
    pipelines = args.data_dir / "console-pipelines"
    pipelines.mkdir(exist_ok=True)
    with EmbeddedBroker(args.data_dir / "broker", port=0) as broker:
        (pipelines / "orders.yaml").write_text(pipeline_yaml(broker.bootstrap_servers, table_path))
        proc, base = start_console(["-b", broker.bootstrap_servers, "--tables", str(args.data_dir / "tables"),
                                    "--pipelines", str(pipelines), "--sample-interval", "1"])
        try:
            table = Table.open(str(table_path))
            todo = pages(table)
            print(f"console {base} on {args.data_dir}: table version {table.version}, "
                  f"{len(table.history())} retained versions; {args.requests} requests per page, "
                  f"{args.pause}s apart")
            for _, path in todo:   # warm-up: first connections, first scans
                fetch_ms(base + path)
            print(f"\n| page | p50 ms | max ms | p50 / budget | max / budget |\n|---|---:|---:|---:|---:|")
            worst = 0.0
            for name, path in todo:
                times = []
                for _ in range(args.requests):
                    times.append(fetch_ms(base + path))
                    time.sleep(args.pause)
                p50, mx = statistics.median(times), max(times)
                worst = max(worst, mx)
                print(f"| {name} | {p50:.1f} | {mx:.1f} | {p50 / BUDGET_MS:.2f} | {mx / BUDGET_MS:.2f} |", flush=True)
            print(f"\nworst page answer {worst:.1f} ms = {worst / BUDGET_MS:.2f} x the {BUDGET_MS:.0f} ms budget")
            if args.screenshots:
                stop = threading.Event()
                traffic = threading.Thread(target=produce_traffic, args=(broker.bootstrap_servers, stop), daemon=True)
                traffic.start()
                time.sleep(20)   # samples for the charts
                try:
                    screenshots(base, args.screenshots, [
                        ("overview", "/"), ("topic", f"/topics/{TOPIC}"),
                        ("messages", f"/topics/{TOPIC}/messages?partition=0&offset=1000&limit=5"),
                        ("group", f"/groups/{GROUP}"), ("pipeline", "/pipelines/orders"),
                        ("table", "/tables/orders"), ("metrics", "/metrics")])
                finally:
                    stop.set()
                    traffic.join(20)
        finally:
            proc.terminate()
            proc.wait(20)


if __name__ == "__main__":
    main()
