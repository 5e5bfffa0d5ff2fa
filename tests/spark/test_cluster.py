"""The pipeline on a Spark standalone cluster (a master and two one-core workers, separate JVMs on 127.0.0.1)
against a table on a directory every worker shares and on an S3 server (moto's): exactly-once through the loss
of a worker machine mid-batch (Spark re-runs its tasks elsewhere) and through the loss of the driver mid-batch
(a restart resumes from the table's app state). The table must end equal to the source, every record in
exactly one commit."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_cluster import SparkStandalone, cluster_env
from tidelake.broker import EmbeddedBroker
from tidelake.table import Table

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

# Batches above the pipeline's one-task size (20,000 records), so each is several tasks on both executors
# plus a shuffle: 4 partitions x 6,000 = 24,000 records a batch, 4 batches.
PARTITIONS, PER_PARTITION, PER_BATCH = 4, 24_000, 6_000
TOTAL = PARTITIONS * PER_PARTITION


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with SparkStandalone(tmp_path_factory.mktemp("spark-cluster")) as c:
        yield c


@pytest.fixture
def workers(cluster):
    """Both workers alive at the start of each test (a test may have killed one)."""
    for i, w in enumerate(cluster.workers):
        if w is None or w.poll() is not None:
            cluster.workers[i] = cluster.start_worker(i)
    cluster.wait_alive_workers(2)
    return cluster


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """One broker and topic for the module (each test reads it from the start with its own group)."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for f in admin.create_topics([NewTopic("orders", PARTITIONS, 1)]).values():
            f.result(30)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 20})
        for i in range(TOTAL):
            # creates, then a second change of every tenth key later in its partition (an update)
            event = {"before": None, "after": {"id": i, "amount": i * 3}, "op": "c", "ts_ms": i}
            producer.produce("orders", json.dumps(event).encode(), partition=i % PARTITIONS)
            if i % 10 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0
        yield b.bootstrap_servers


@pytest.fixture(params=["shared-dir", "s3"])
def sink(request, tmp_path) -> dict:
    """Where the table lives: a local directory (every worker of this one-machine cluster sees it), or S3."""
    if request.param == "shared-dir":
        return {"table": str(tmp_path / "table")}
    server = request.getfixturevalue("s3_server")
    return {"table": server.url("cluster"), "storage_options": dict(server.options)}


def open_table(sink: dict) -> Table:
    return Table.open(sink["table"], storage_options=sink.get("storage_options"))


def group_of(tmp_path: Path) -> str:
    return f"orders-{tmp_path.name}"


def app_of(tmp_path: Path) -> str:
    return f"pipeline:{group_of(tmp_path)}:orders"


def write_config(tmp_path: Path, bootstrap: str, master: str, sink: dict) -> Path:
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump({
        "source": {"bootstrap_servers": bootstrap, "topic": "orders", "group_id": group_of(tmp_path),
                   "max_rate_per_partition": PER_BATCH, "batch_interval": "1s"},
        "offsets": "exactly-once",
        "sink": {**sink, "format": "debezium-json", "primary_key": ["id"], "schema": "id long, amount long",
                 "buckets": 4},
        "spark": {"master": master, "conf": {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                                             "spark.executor.memory": "512m", "spark.task.maxFailures": "4"}}}))
    return config


class Driver:
    """``tidelake pipeline run`` in its own process group (its Python and its driver JVM: one machine)."""

    def __init__(self, config: Path, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "pipeline", "run", str(config), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster_env(),
                                     start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True)
        self._reader.start()

    def text(self) -> str:
        return "".join(list(self.lines))

    def wait_batches(self, n: int, timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        while self.text().count("tidelake.pipeline INFO batch ") < n:
            if self.proc.poll() is not None:
                raise AssertionError(f"pipeline exited early ({self.proc.returncode}):\n{self.text()[:6000]}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"no batch {n} within {timeout}s:\n{self.text()[-3000:]}")
            time.sleep(0.05)

    def wait(self, timeout: float = 300.0) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"pipeline still running after {timeout}s:\n{self.text()[-3000:]}") from None
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """The driver's machine is lost: SIGKILL to its process group."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(10)


def assert_table_equals_source(sink: dict, app: str) -> None:
    table = open_table(sink)
    ids = table.changes(start_version=0).column("id").to_pylist()
    assert len(set(ids)) == TOTAL, f"lost {TOTAL - len(set(ids))}"
    assert len(ids) == TOTAL, f"duplicated {len(ids) - TOTAL}: {Counter(ids).most_common(3)}"
    rows = table.scan()
    assert rows.num_rows == TOTAL
    assert rows.sort_by("id").column("amount").to_pylist() == [i * 3 for i in range(TOTAL)]
    assert table.app_state(app)["extra"]["offsets"] == {str(p): PER_PARTITION for p in range(PARTITIONS)}


def test_a_worker_lost_mid_batch_is_retried_and_nothing_is_applied_twice(workers, source, sink, tmp_path):
    driver = Driver(write_config(tmp_path, source, workers.master_url, sink), "--once")
    driver.wait_batches(1)
    assert workers.executor_pids(1), "worker 1 runs no executor of the pipeline"
    # the next batch starts right after (a backlog, --once): a kill within its first half second lands inside it
    time.sleep(random.uniform(0.0, 0.5))
    workers.kill_worker(1)
    assert driver.wait() == 0, driver.text()[-3000:]
    assert "Lost executor" in driver.text()   # Spark saw it go, and re-ran its tasks on worker 0
    assert driver.text().count("tidelake.pipeline INFO batch ") == TOTAL // (PARTITIONS * PER_BATCH)
    assert_table_equals_source(sink, app_of(tmp_path))
    # the executors ran the tidelake the driver shipped
    assert "tidelake shipped to the executors as tidelake-" in driver.text()
    shipped = list((workers.work_dir / "worker-0").glob("app-*/*/tidelake-*.zip"))   # the newest app's too
    assert shipped, "no shipped tidelake zip in worker 0's executor directory"


@pytest.mark.parametrize("sink", ["s3"], indirect=True)   # (kill -9 of a local[2] driver: pipeline/test_kill.py)
def test_a_driver_lost_mid_batch_resumes_from_the_table(workers, source, sink, tmp_path):
    config = write_config(tmp_path, source, workers.master_url, sink)
    first = Driver(config)
    first.wait_batches(1)
    time.sleep(random.uniform(0.0, 0.5))
    first.kill()
    state = open_table(sink).app_state(app_of(tmp_path))
    assert state is not None and sum(state["extra"]["offsets"].values()) < TOTAL   # the kill left work to do
    second = Driver(config, "--once")
    assert second.wait() == 0, second.text()[-3000:]
    starts = [line for line in second.lines if "(exactly-once): start " in line]
    expected_start = "start {" + ", ".join(f"{p}: {state['extra']['offsets'][str(p)]}" for p in range(PARTITIONS)) + "}"
    assert starts and expected_start in starts[0], starts   # it started where the table says
    assert_table_equals_source(sink, app_of(tmp_path))
