"""A Spark standalone cluster for tests: one master and two workers, each its own JVM started from the pyspark
wheel's jars (``java -cp "$SPARK_HOME/jars/*" org.apache.spark.deploy.master.Master ...``), bound to 127.0.0.1
on free ports, each in its own process group (a worker's executors and their Python workers are its children),
stopped by pid. ``kill_worker(i)`` is the loss of a machine: SIGKILL to the worker's whole process group."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import free_port, wait_port

DAEMON_MEMORY = "-Xmx384m"


def spark_home() -> str:
    import pyspark
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def cluster_env() -> dict[str, str]:
    """What every cluster process (and a driver run against it) needs: Spark's home, the venv's Python on the
    executors, loopback addresses only."""
    return dict(os.environ, SPARK_HOME=spark_home(), PYSPARK_PYTHON=sys.executable,
                PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_HOSTNAME="127.0.0.1",
                # what bin/load-spark-env.sh would set: a worker builds its executors' command line with it
                SPARK_SCALA_VERSION="2.13")


class SparkStandalone:
    """``with SparkStandalone(work_dir) as cluster: cluster.master_url``."""

    def __init__(self, work_dir: Path, workers: int = 2, timeout: float = 90.0):
        self.work_dir = Path(work_dir)
        self.workers_wanted = workers
        self.timeout = timeout
        self.port, self.ui_port = free_port(), free_port()
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = []
        self._logs: list = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _java(self, cls: str, *args: str, log_name: str) -> subprocess.Popen:
        log = open(self.work_dir / f"{log_name}.log", "w")
        self._logs.append(log)
        cmd = [shutil.which("java") or "java", DAEMON_MEMORY, "-cp", os.path.join(spark_home(), "jars", "*"), cls, *args]
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=cluster_env(), start_new_session=True)

    def start_worker(self, i: int) -> subprocess.Popen:
        work = self.work_dir / f"worker-{i}"
        work.mkdir(parents=True, exist_ok=True)
        return self._java("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(free_port()),
                          "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                          "--work-dir", str(work), self.master_url, log_name=f"worker-{i}")

    def __enter__(self) -> "SparkStandalone":
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.master = self._java("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                     "--port", str(self.port), "--webui-port", str(self.ui_port), log_name="master")
            wait_port(self.port, self.timeout)
            self.workers = [self.start_worker(i) for i in range(self.workers_wanted)]
            self.wait_alive_workers(self.workers_wanted)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def state(self) -> dict:
        """The master's JSON status page (workers, their state, the running applications); {} while the
        page is not served yet (the UI's port opens before its pages are attached)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as r:
                return json.load(r)
        except (urllib.error.URLError, ConnectionError, ValueError):
            return {}

    def wait_alive_workers(self, n: int) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
            if len(alive) >= n:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(alive)} of {n} Spark workers alive after {self.timeout}s: "
                                   f"{(self.work_dir / 'master.log').read_text()[-2000:]}")
            time.sleep(0.2)

    def executor_pids(self, i: int) -> list[int]:
        """The executor JVMs worker ``i`` launched (its process group's other java processes)."""
        w = self.workers[i]
        if w is None:
            return []
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    pgrp = int(f.read().rsplit(")", 1)[1].split()[2])   # the field after the state
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except (OSError, ValueError, IndexError):
                continue   # gone meanwhile
            if pgrp == w.pid and b"CoarseGrainedExecutorBackend" in cmdline:
                pids.append(int(entry))
        return pids

    def kill_worker(self, i: int) -> None:
        """The machine of worker ``i`` is lost: SIGKILL to the worker, its executors and their Python workers."""
        w = self.workers[i]
        if w is not None and w.poll() is None:
            os.killpg(w.pid, signal.SIGKILL)
            w.wait(30)

    def stop(self) -> None:
        for p in [*self.workers, self.master]:
            if p is not None and p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)
        for log in self._logs:
            log.close()
