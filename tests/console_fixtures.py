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
VIEWER_LOGIN = ("victor", "victor-password")     # (name, password) of the users file's viewer
OPERATOR_LOGIN = ("olga", "olga-password")       # ... and of its operator


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
    """``tidelake console`` as a subprocess on a free port (it prints the address it bound); what it logs on
    stderr is collected as it comes (``log_line`` waits for a line)."""

    def __init__(self, args: list[str]):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "console", "--listen", "127.0.0.1:0",
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines: queue.Queue = queue.Queue()
        self._stderr: list[str] = []
        self._stderr_grew = threading.Condition()
        threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stdout], daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        try:
            first = lines.get(timeout=60)
        except queue.Empty:
            self.stop()
            raise RuntimeError(f"tidelake console printed no address within 60 s: {self.stderr}")
        if "://" not in first:
            self.stop()
            raise RuntimeError(f"tidelake console did not start: {first}{self.stop()}")
        scheme, rest = first.split("://", 1)
        self.url = f"{scheme.rsplit(' ', 1)[-1]}://{rest.split('/', 1)[0]}"

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            with self._stderr_grew:
                self._stderr.append(line)
                self._stderr_grew.notify_all()

    @property
    def stderr(self) -> str:
        with self._stderr_grew:
            return "".join(self._stderr)

    def log_line(self, *parts: str, timeout: float = 30) -> str:
        """The first stderr line containing every one of ``parts``, once it is written (``timeout``: a last
        guard)."""
        def found():
            return next((line for line in self._stderr if all(p in line for p in parts)), None)
        with self._stderr_grew:
            if not self._stderr_grew.wait_for(lambda: found() is not None, timeout):
                raise AssertionError(f"no log line with {parts} within {timeout} s: {''.join(self._stderr)}")
            return found()

    def stop(self) -> str:
        """Stop it (SIGTERM, by its pid) and return what it wrote on stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._stderr_reader.join(10)
        return self.stderr


@contextlib.contextmanager
def browser_page(browser, **context_options):
    """A page in a context of its own (``http_credentials=...``: the browser answers a login prompt with them)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **context_options)
    p = context.new_page()
    p.set_default_timeout(20_000)
    try:
        yield p
    finally:
        context.close()


@contextlib.contextmanager
def console_process(data: ConsoleData, *extra: str):
    c = ConsoleProcess(["-b", data.bootstrap, "--tables", str(data.tables_dir), "--pipelines",
                        str(data.pipelines_dir), "--sample-interval", "0.5", *extra])
    try:
        yield c
    finally:
        stderr = c.stop()
        assert "Traceback" not in stderr, stderr


def add_console_user(users_file: Path, name: str, password: str, role: str) -> None:
    """``tidelake console users add``, the password on stdin (as a script gives it)."""
    done = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "console", "users", "add", name, "--role", role,
                           "--users-file", str(users_file)], input=password + "\n", capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
