"""What the web console tests share: the data they produce, ``tidelake console`` as a subprocess, chromium's
launch settings (Debian's chromium, driven by playwright without a browser download)."""
from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOPIC = "orders"
PARTITIONS = 3
RECORDS = 90                 # 30 per partition, produced to explicit partitions
BASE_TS = 1_700_000_000_000  # record i has CreateTime BASE_TS + i seconds
GROUP = "orders-app"
DLQ_TOPIC = "orders.dlq"
EO_APP_ID = "pipeline:eo-pipeline:orders"   # the exactly-once pipeline's (its group and topic)
EO_OFFSET = 20                              # where its last batch ended, in every partition


def record_key(i: int) -> str:
    return f"order-{i}"


def record_value(i: int) -> dict:
    """Debezium envelopes: even records are updates (before and after), odd ones creates."""
    after = {"id": i, "amount": 10 * i, "status": "paid" if i % 2 == 0 else "created"}
    before = {"id": i, "amount": 10 * i - 5, "status": "created"} if i % 2 == 0 else None
    return {"op": "u" if before else "c", "before": before, "after": after, "ts_ms": BASE_TS + i,
            "source": {"db": "shop", "table": "orders"}}


@dataclass
class ConsoleData:
    bootstrap: str
    tables_dir: Path
    pipelines_dir: Path
    table_path: Path
    # record i went to partition i % PARTITIONS at offset i // PARTITIONS


class ConsoleProcess:
    """``tidelake console`` as a subprocess on a free port (it prints the address it bound)."""

    def __init__(self, args: list[str]):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "console", "--listen", "127.0.0.1:0",
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stdout], daemon=True).start()
        try:
            first = lines.get(timeout=60)
        except queue.Empty:
            self.stop()
            raise RuntimeError(f"tidelake console printed no address within 60 s: {self.proc.stderr.read()}")
        if "http://" not in first:
            self.stop()
            raise RuntimeError(f"tidelake console did not start: {first}{self.proc.stderr.read()}")
        self.url = first.split("http://", 1)[1].split("/", 1)[0]
        self.url = f"http://{self.url}"

    def stop(self) -> str:
        """Stop it (SIGTERM, by its pid) and return what it wrote on stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.stderr.read()


@contextlib.contextmanager
def console_process(data: ConsoleData, *extra: str):
    c = ConsoleProcess(["-b", data.bootstrap, "--tables", str(data.tables_dir), "--pipelines",
                        str(data.pipelines_dir), "--sample-interval", "0.5", *extra])
    try:
        yield c
    finally:
        stderr = c.stop()
        assert "Traceback" not in stderr, stderr


