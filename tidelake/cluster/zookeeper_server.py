"""A standalone ZooKeeper server as a child process (``tidelake cluster start`` and the tests).

It runs the Debian package's jars (``apt-get install zookeeper``: /usr/share/java/zookeeper.jar)
on the system Java with a generated ``zoo.cfg`` (its own dataDir, 127.0.0.1 and a chosen port, the
admin HTTP server off), the way ``zkServer.sh start-foreground`` would.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

JAR_DIRS = (Path("/usr/share/java"), Path("/usr/share/zookeeper/lib"))
JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-nop.jar")
INSTALL_HINT = "apt-get install -y zookeeper"


class ZooKeeperNotInstalled(Exception):
    pass


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def classpath() -> str:
    """The jars ZooKeeperServerMain needs; raises ZooKeeperNotInstalled naming the install command."""
    found = []
    for jar in JARS:
        path = next((d / jar for d in JAR_DIRS if (d / jar).exists()), None)
        if path is None:
            raise ZooKeeperNotInstalled(f"ZooKeeper is not installed ({jar} not found in "
                                        f"{', '.join(map(str, JAR_DIRS))}): run {INSTALL_HINT}")
        found.append(str(path))
    return ":".join(found)


def java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperNotInstalled(f"no java on PATH (ZooKeeper needs it): run {INSTALL_HINT}")
    return java


class ZooKeeperServer:
    """``start()`` writes ``<data_dir>/zoo.cfg``, launches the server and waits until it answers;
    ``stop()`` ends it by its pid."""

    def __init__(self, data_dir: str | Path, port: int | None = None, host: str = "127.0.0.1"):
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.process: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> "ZooKeeperServer":
        cp, java = classpath(), java_binary()
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(f"tickTime=500\ndataDir={self.data_dir / 'data'}\nclientPort={self.port}\n"
                       f"clientPortAddress={self.host}\nadmin.enableServer=false\nmaxClientCnxns=0\n"
                       f"minSessionTimeout=1000\n4lw.commands.whitelist=ruok\n")
        log_file = open(self.data_dir / "zookeeper.log", "ab")
        self.process = subprocess.Popen(
            [java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain",
             str(cfg)], stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.data_dir)
        log_file.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode}; see "
                                   f"{self.data_dir / 'zookeeper.log'}")
            if self._ruok():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer on {self.connect_string} within {timeout_s:g} s")

    def _ruok(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def stop(self, timeout_s: float = 10.0) -> None:
        p = self.process
        if p is None:
            return
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout_s)
        self.process = None

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
