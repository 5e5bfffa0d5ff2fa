"""Apache Kafka 4.4 itself as a peer of the tests and benchmarks: a KRaft broker, or a cluster of combined
broker+controller nodes, started from the jars jvm/kafka/pom.xml pins (`make jvm-deps` copies them into
build/jvm/kafka/lib/). Each node is formatted with Kafka's `kafka-storage format` into its own data directory,
listens on free ports of 127.0.0.1, is started as `java -cp ... kafka.Kafka server.properties`, waited on by a
real Metadata answer naming every broker, and stopped by its pid; its log (node-N/kafka.log) is kept, and its
tail is in the error when a node does not start.

No tidelake import: benchmarks/ put tests/ on sys.path and use KafkaCluster too."""
from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import os
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JVM_KAFKA = ROOT / "build" / "jvm" / "kafka"
JVM_LIB = JVM_KAFKA / "lib"
JAVA_TEST_CLASSES = JVM_KAFKA / "test-classes"

# Small heaps: a broker of the suite shares two cores and the memory with the rest of it (Kafka's own default
# is -Xmx1G -Xms1G per node).
TEST_HEAP = "-Xmx512m"
CLUSTER_TEST_HEAP = "-Xmx384m"
# The tests' JVMs skip the optimizing compiler and the parallel collector: on two busy cores start-up is mostly
# JIT work. Benchmarks pass jvm_options=() for Kafka's own defaults.
TEST_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
START_TIMEOUT = 120.0   # a last guard: start-up is waited on by a Metadata answer, not by the clock
STOP_TIMEOUT = 20.0

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.state.name = state.change.logger
logger.state.level = WARN
"""


@functools.cache
def jvm_deps() -> None:
    """`make jvm-deps` (the pinned jars and the compiled tests/java), once per process and one process at a time
    across test workers: make reuses both while the pom and the sources are unchanged."""
    JVM_KAFKA.mkdir(parents=True, exist_ok=True)
    with open(JVM_KAFKA.parent / ".make-jvm-deps.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run(["make", "-s", "-C", str(ROOT), "jvm-deps"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"make jvm-deps failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


def classpath(profile: str = "kafka") -> str:
    """The classpath of one profile of jvm/kafka/pom.xml: kafka (Kafka 4.4.0), connect-4.3 (a Connect worker
    with connect-file and MirrorMaker 2) or debezium (a plugin folder)."""
    jvm_deps()
    return str(JVM_LIB / profile / "*")


def java_test_classes() -> Path:
    """tests/java/*.java compiled against Kafka 4.4's classpath (by `make jvm-deps`)."""
    jvm_deps()
    return JAVA_TEST_CLASSES


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_id() -> str:
    """A Kafka Uuid as `kafka-storage random-uuid` prints it (URL-safe base64 of 16 bytes, unpadded), never one
    starting with "-" (Kafka's Uuid.randomUuid draws again: a command line would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    home: Path
    proc: subprocess.Popen | None = None

    @property
    def config(self) -> Path:
        return self.home / "server.properties"

    @property
    def log(self) -> Path:
        return self.home / "kafka.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"


class KafkaCluster:
    """`nodes` Kafka 4.4 KRaft nodes, each broker and controller (one quorum of all of them), under `workdir`.
    Replication factors of the internal topics follow the node count (min.insync.replicas 2 from 3 nodes)."""

    def __init__(self, workdir: Path, nodes: int = 1, config: dict | None = None, heap: str | None = None,
                 jvm_options: tuple[str, ...] = TEST_JVM_OPTIONS):
        self.workdir = Path(workdir)
        self.heap = heap or (TEST_HEAP if nodes == 1 else CLUSTER_TEST_HEAP)
        self.jvm_options = tuple(jvm_options)
        self.extra = dict(config or {})
        self.cluster_id = _cluster_id()
        self.nodes = [KafkaNode(i, _free_port(), _free_port(), self.workdir / f"node-{i}") for i in range(1, nodes + 1)]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.address for n in self.nodes)

    def _properties(self, node: KafkaNode) -> dict:
        n = len(self.nodes)
        rf, isr = min(n, 3), (2 if n >= 3 else 1)
        return {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": ",".join(f"{m.node_id}@127.0.0.1:{m.controller_port}" for m in self.nodes),
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.home / "data"),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": isr,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": isr,
            "group.initial.rebalance.delay.ms": 0,   # a test's first group joins at once
            **self.extra,
        }

    def _java(self, main: str, *args: str, heap: str) -> list[str]:
        return ["java", heap, *self.jvm_options, f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                "-cp", classpath("kafka"), main, *args]

    def start(self) -> "KafkaCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.properties").write_text(LOG4J2)
        for node in self.nodes:
            node.home.mkdir(parents=True, exist_ok=True)
            node.config.write_text("".join(f"{k}={v}\n" for k, v in self._properties(node).items()))
        # Every node formatted at once (a JVM each), with the one cluster id and the static voter set.
        formats = [subprocess.Popen(self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                               "-c", str(node.config), heap="-Xmx128m"),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                   for node in self.nodes]
        for node, fmt in zip(self.nodes, formats):
            out, _ = fmt.communicate(timeout=START_TIMEOUT)
            if fmt.returncode != 0:
                raise RuntimeError(f"kafka-storage format of node {node.node_id} failed:\n{out[-3000:]}")
        try:
            for node in self.nodes:
                with open(node.log, "ab") as log:
                    node.proc = subprocess.Popen(self._java("kafka.Kafka", str(node.config), heap=self.heap),
                                                 stdout=log, stderr=subprocess.STDOUT)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Until a Metadata answer from every node lists all the brokers and a controller."""
        from confluent_kafka.admin import AdminClient
        deadline = time.monotonic() + START_TIMEOUT
        pending = list(self.nodes)
        while pending:
            node = pending[0]
            if node.proc.poll() is not None:
                raise RuntimeError(f"Kafka node {node.node_id} exited {node.proc.returncode}:\n{node.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka node {node.node_id} not serving after {START_TIMEOUT}s:\n{node.log_tail()}")
            admin = AdminClient({"bootstrap.servers": node.address, "log_level": 0})
            with contextlib.suppress(Exception):
                md = admin.list_topics(timeout=2)
                if len(md.brokers) == len(self.nodes) and md.controller_id >= 0:
                    pending.pop(0)
                    continue
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM to every node at once (a controlled shutdown), SIGKILL what is left after STOP_TIMEOUT."""
        running = [n.proc for n in self.nodes if n.proc is not None and n.proc.poll() is None]
        for proc in running:
            proc.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in running:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def java_command(main: str, *args: str, profile: str = "kafka", extra_classpath: tuple[str, ...] = ()) -> list[str]:
    """A `java` command line for a class of tests/java/ (or of a pinned jar) with the given profile's jars."""
    cp = os.pathsep.join([str(java_test_classes()), *extra_classpath, classpath(profile)])
    return ["java", *TEST_JVM_OPTIONS, "-cp", cp, main, *args]
