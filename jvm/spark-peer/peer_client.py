"""The tidelake side of the peer Spark process (driver.py beside this file), from the project's own venv.

``PeerSpark()`` starts ``.venv-peer/bin/python driver.py target/jars`` (what ``make peer-venv`` builds) and
``call(op, **args)`` sends one request and returns its answer; a failed request is a PeerError with the
driver's one line. ``missing()`` says what of the peer environment is not there (None: all of it is).
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEER_PYTHON = ROOT / ".venv-peer" / "bin" / "python"
JARS_DIR = HERE / "target" / "jars"
DRIVER = HERE / "driver.py"
PREFIX = "ANSWER "
START_TIMEOUT_S = 300   # a JVM and a SparkSession on two loaded cores


class PeerError(Exception):
    """The peer driver answered a request with an error (its one line), or stopped."""


def missing() -> str | None:
    """What of the peer environment is absent, as the command that builds it says (None: complete)."""
    if not PEER_PYTHON.exists():
        return f"{PEER_PYTHON} is missing (make peer-venv builds it)"
    if not any(JARS_DIR.glob("*.jar")):
        return f"{JARS_DIR} has no jars (make peer-venv copies them)"
    return None


class PeerSpark:
    """One peer driver process (one SparkSession); stop it with ``close()`` or a ``with`` block."""

    def __init__(self, log_path: Path | str | None = None, env: dict[str, str] | None = None):
        why = missing()
        if why:
            raise PeerError(why)
        self.log_path = Path(log_path) if log_path else None
        stderr = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        full_env = {**os.environ, "TZ": "UTC", "PYSPARK_PYTHON": str(PEER_PYTHON),
                    "PYSPARK_DRIVER_PYTHON": str(PEER_PYTHON), **(env or {})}
        full_env.pop("PYTHONPATH", None)   # the peer venv never imports the project's code
        self.proc = subprocess.Popen([str(PEER_PYTHON), str(DRIVER), str(JARS_DIR)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=stderr, env=full_env, text=True)
        if stderr is not subprocess.DEVNULL:
            stderr.close()
        self._lock = threading.Lock()
        ready = self._read(START_TIMEOUT_S)
        self.spark_version = ready["spark"]

    def _read(self, timeout_s: float) -> dict:
        out: dict = {}

        def read():
            for line in self.proc.stdout:
                if line.startswith(PREFIX):
                    out["answer"] = json.loads(line[len(PREFIX):])
                    return

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout_s)
        if "answer" not in out:
            where = f" (its log: {self.log_path})" if self.log_path else ""
            state = "stopped" if self.proc.poll() is not None else f"gave no answer in {timeout_s:.0f} s"
            raise PeerError(f"the peer Spark driver {state}{where}")
        return out["answer"]

    def call(self, op: str, timeout_s: float = 600, **args) -> dict:
        with self._lock:
            self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
            self.proc.stdin.flush()
            ans = self._read(timeout_s)
        if not ans.pop("ok"):
            raise PeerError(ans["error"])
        return ans

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> "PeerSpark":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
