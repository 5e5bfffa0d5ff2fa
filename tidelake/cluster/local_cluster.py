"""``LocalCluster``: ZooKeeper and N brokers on this machine, each a child process with its own port
and data directory under one root (``tidelake cluster start`` and the cluster tests):

    <root>/zookeeper/            zoo.cfg, data, zookeeper.log
    <root>/broker-<id>/          the broker's log directory
    <root>/broker-<id>.log       its stderr
    <root>/cluster.json          ZooKeeper address, each broker's id, port and pid, and the pid of the process
                                 that owns them (``cluster status``, ``cluster restart-broker``)
    <root>/restart-broker-<id>.request   a restart asked of that owner (``restart_requests.py``)

Processes are started and stopped by their own pid (SIGTERM, then SIGKILL after a grace period).

Everything listens on 127.0.0.1 unless ``host`` names another local address; a broker given a network
namespace (``namespaces={id: (netns, address)}``, made beforehand with ``ip netns``) runs there through
``ip netns exec`` and listens on that namespace's ``address`` (which must reach ``host``: the fault tests
isolate a broker by cutting its namespace's link).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tidelake.cluster.zookeeper_server import ZooKeeperServer, free_port

STATE_FILE = "cluster.json"
# how long a broker process may take to listen, a guard only (the wait is for its port): its start is imports and
# log recovery, and on a 2-core machine with a dozen busy processes beside it a minute was seen not to be enough
START_TIMEOUT_S = 180.0


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen | None = None
    metrics_port: int | None = None  # metrics.listen (with LocalCluster(metrics=True))
    host: str = "127.0.0.1"  # where it listens (and what it advertises)
    netns: str | None = None  # the network namespace it runs in (``ip netns exec``), None: this one

    @property
    def metrics_url(self) -> str | None:
        return f"http://{self.host}:{self.metrics_port}" if self.metrics_port else None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalCluster:
    def __init__(self, root: str | Path, brokers: int = 3, *, zookeeper_port: int | None = None,
                 base_port: int | None = None, configs: dict[str, str] | None = None, log_level: str = "INFO",
                 metrics: bool = False, host: str = "127.0.0.1",
                 namespaces: dict[int, tuple[str, str]] | None = None):
        self.root = Path(root)
        # Kafka's default of 3 replicas for the internal topics, within what the cluster has
        self.configs = {"offsets.topic.replication.factor": str(min(3, brokers)),
                        "transaction.state.log.replication.factor": str(min(3, brokers)), **(configs or {})}
        self.log_level = log_level
        self.zookeeper = ZooKeeperServer(self.root / "zookeeper", zookeeper_port, host=host)
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(1, brokers + 1):
            # (a port free here is as good as any inside a namespace of its own)
            port = base_port + i - 1 if base_port else free_port(host)
            netns, address = (namespaces or {}).get(i, (None, host))
            self.brokers[i] = BrokerProcess(i, port, self.root / f"broker-{i}", self.root / f"broker-{i}.log",
                                            metrics_port=free_port(host) if metrics else None, host=address,
                                            netns=netns)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self, timeout_s: float = START_TIMEOUT_S) -> "LocalCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        self.zookeeper.start()
        try:
            for bid in self.brokers:
                self.start_broker(bid, wait=False)
            for bid in self.brokers:
                self.wait_listening(bid, timeout_s)
        except BaseException:
            self.stop()
            raise
        self._write_state()
        return self

    def start_broker(self, broker_id: int, *, wait: bool = True, timeout_s: float = START_TIMEOUT_S) -> BrokerProcess:
        b = self.brokers[broker_id]
        b.data_dir.mkdir(parents=True, exist_ok=True)
        sets = []
        for key, value in self.configs.items():
            sets += ["--set", f"{key}={value}"]
        if b.metrics_port:
            sets += ["--set", f"metrics.listen={b.host}:{b.metrics_port}"]
        log_file = open(b.log_path, "ab")
        # ``ip netns exec`` execs the broker in place: the child's pid is the broker's
        prefix = ["ip", "netns", "exec", b.netns] if b.netns else []
        b.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--broker-id", str(broker_id),
             "--zookeeper", self.zookeeper.connect_string, "--data-dir", str(b.data_dir),
             "--listen", f"{b.host}:{b.port}", "--log-level", self.log_level, *sets],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log_file.close()
        if wait:
            self.wait_listening(broker_id, timeout_s)
            self._write_state()
        return b

    def wait_listening(self, broker_id: int, timeout_s: float) -> None:
        b = self.brokers[broker_id]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not b.alive():
                raise RuntimeError(f"broker {broker_id} exited with {b.process.returncode}; see {b.log_path}")
            try:
                with socket.create_connection((b.host, b.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"broker {broker_id} not listening on {b.bootstrap} after {timeout_s:g} s")

    def signal_broker(self, broker_id: int, sig: int) -> None:
        b = self.brokers[broker_id]
        if b.alive():
            os.kill(b.pid, sig)

    def kill_broker(self, broker_id: int) -> None:
        """kill -9: no flush, no deregistration (ZooKeeper notices when the session expires)."""
        b = self.brokers[broker_id]
        if b.alive():
            os.kill(b.pid, signal.SIGKILL)
            b.process.wait(10)

    def stop_broker(self, broker_id: int, grace_s: float = 20.0) -> None:
        b = self.brokers[broker_id]
        if b.process is None:
            return
        if b.process.poll() is None:
            os.kill(b.pid, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
            os.kill(b.pid, signal.SIGTERM)
            try:
                b.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                os.kill(b.pid, signal.SIGKILL)
                b.process.wait(10)

    def restart_broker(self, broker_id: int, *, kill: bool = False, timeout_s: float = START_TIMEOUT_S) -> BrokerProcess:
        """Stop a broker (``kill``: SIGKILL, as a crash; else SIGTERM) if it runs, and start it again with the
        same id, port and data directory; returns once it listens."""
        if kill:
            self.kill_broker(broker_id)
        else:
            self.stop_broker(broker_id)
        return self.start_broker(broker_id, timeout_s=timeout_s)

    def stop(self) -> None:
        for bid in self.brokers:
            try:
                self.stop_broker(bid)
            except ProcessLookupError:
                pass
        self.zookeeper.stop()

    def _write_state(self) -> None:
        doc = json.dumps({
            "zookeeper": self.zookeeper.connect_string,
            "zookeeper_pid": self.zookeeper.process.pid if self.zookeeper.process is not None else None,
            "owner_pid": os.getpid(),  # the process the brokers are children of: it takes restart requests
            "brokers": [{"id": b.broker_id, "host": b.host, "port": b.port, "pid": b.pid,
                         "data_dir": str(b.data_dir)} for b in self.brokers.values()]}, indent=1)
        tmp = self.root / (STATE_FILE + ".tmp")  # readers (``cluster restart-broker``) never see half of it
        tmp.write_text(doc)
        os.replace(tmp, self.root / STATE_FILE)

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
