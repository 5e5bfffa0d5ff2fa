"""Exactly-once survives kill -9: a real ``tidelake pipeline run`` subprocess killed mid-run, then
restarted to completion. Every Kafka record must reach the table exactly once (SPEC P2)."""
from __future__ import annotations

import json
import os
import random
import signal
import socket
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

from tidelake.broker import EmbeddedBroker
from tidelake.table import Table

pytestmark = pytest.mark.spark

# Enough batches (rate 100/s x 0.5 s = 50 records per partition each) that a kill up to 1.5 s after the first
# batch still leaves work to do, however fast a batch is.
PARTITIONS, PER_PARTITION = 4, 400
TOTAL = PARTITIONS * PER_PARTITION


def debezium_create(i: int) -> bytes:
    event = {"before": None, "after": {"id": i, "amount": i * 3}, "op": "c" if i % 3 else "r",
             "ts_ms": 1_700_000_000_000 + i, "source": {"table": "orders"}}
    if i % 2:  # half of them with the JsonConverter's schema/payload wrapper
        event = {"schema": {"type": "struct", "name": "orders.Envelope"}, "payload": event}
    return json.dumps(event).encode()


class PipelineProcess:
    """``tidelake pipeline run`` (or ``serve`` of a directory) in a subprocess; its stderr is collected by a thread
    (bounded waits)."""

    def __init__(self, config: Path, *args: str, new_session: bool = False, command: str = "run"):
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        self.proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "pipeline", command, str(config),
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     start_new_session=new_session)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def batches_done(self) -> int:
        return sum(1 for line in list(self.lines) if "tidelake.pipeline INFO batch " in line)

    def wait_batches(self, n: int, timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        while self.batches_done() < n:
            if self.proc.poll() is not None:
                raise AssertionError(f"pipeline exited early ({self.proc.returncode}):\n{''.join(self.lines[-30:])}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"no batch {n} within {timeout}s:\n{''.join(self.lines[-30:])}")
            time.sleep(0.05)

    def wait(self, timeout: float) -> int:
        """The exit code, once the process ended and its last stderr line was read."""
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(10)


def topic_and_pipeline(broker: str, tmp_path: Path, topic: str, *, group_id: str | None = None,
                       max_rate_per_partition: int = 50, reader: str = "auto", keyed: bool = False) -> Path:
    """``topic`` holding the TOTAL Debezium creates (keyed by id if ``keyed``) and the config of an exactly-once
    pipeline reading it into tmp_path/table as group ``group_id`` (the topic's name if None)."""
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker})
    for i in range(TOTAL):
        key = json.dumps({"id": i}).encode() if keyed else None
        producer.produce(topic, debezium_create(i), key=key, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    config = tmp_path / f"{topic}.yaml"
    config.write_text(yaml.safe_dump({
        "source": {"bootstrap_servers": broker, "topic": topic, "group_id": group_id or topic,
                   "max_rate_per_partition": max_rate_per_partition, "batch_interval": "500ms", "reader": reader},
        "offsets": "exactly-once",
        "sink": {"table": "table", "format": "debezium-json", "primary_key": ["id"],
                 "schema": "id long, amount long", "buckets": 2}}))
    return config


def run_once_to_the_end(config: Path) -> None:
    """A ``--once`` run after a stopped one: it reads what is left and exits 0."""
    rest = PipelineProcess(config, "--once")
    try:
        assert rest.wait(300) == 0, "".join(rest.lines[-30:])
    finally:
        rest.kill()


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "broker") as b:
        yield b.bootstrap_servers


def test_exactly_once_survives_kill_9(broker, tmp_path):
    config = topic_and_pipeline(broker, tmp_path, "orders", group_id="orders-eo", max_rate_per_partition=100,
                                keyed=True)

    # Killed at a random moment after its first batch: somewhere inside the next batch (read, stage or
    # commit) or between batches. (benchmarks/paper_experiments.py repeats this 30 times per mode.)
    run = PipelineProcess(config)
    run.wait_batches(1)
    time.sleep(random.uniform(0.0, 1.5))
    run.kill()
    assert run.proc.returncode == -signal.SIGKILL
    table = Table.open(str(tmp_path / "table"))
    done_before_final = table.app_state("pipeline:orders-eo:orders")
    assert done_before_final is not None and done_before_final["batch_id"] >= 0  # batch 0 committed before the kill
    assert sum(done_before_final["extra"]["offsets"].values()) < TOTAL  # the kill left work to do

    run_once_to_the_end(config)

    table.refresh()  # the final run's commits
    ids = table.changes(start_version=0).column("id").to_pylist()
    per_id = Counter(ids)
    assert len(per_id) == TOTAL, f"lost {TOTAL - len(per_id)}"
    assert len(ids) == TOTAL, f"duplicated {len(ids) - TOTAL}"
    assert sorted(table.scan().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "amount": i * 3} for i in range(TOTAL)]
    state = table.app_state("pipeline:orders-eo:orders")
    assert state["extra"]["offsets"] == {str(p): PER_PARTITION for p in range(PARTITIONS)}

    # The group's lag is visible and zero after the run (`pipeline status` reads broker, file and table).
    status = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "pipeline", "status", str(config), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert len(doc["partitions"]) == PARTITIONS
    assert all(p["lag"] == 0 for p in doc["partitions"]), status.stdout


def test_sigterm_stops_after_the_current_batch(broker, tmp_path):
    """SIGTERM (as ssc.stop(true, true)): the batch in progress is finished and committed, then exit 0."""
    config = topic_and_pipeline(broker, tmp_path, "graceful")
    run = PipelineProcess(config)
    run.wait_batches(1)
    run.proc.send_signal(signal.SIGTERM)
    assert_stopped_after_the_current_batch(run, tmp_path / "table", "pipeline:graceful:graceful")


def test_sigterm_stops_serve_after_the_current_batch(broker, tmp_path):
    """`pipeline serve` takes SIGTERM as Ctrl-C (cli/signals.py): each stage finishes its batch, exit 0, no trace,
    and the stage's lock is free for the next start."""
    from tidelake.spark.pipeline_lock import PipelineLock
    from tidelake.spark.pipeline_yaml import load_pipeline_yaml
    config = topic_and_pipeline(broker, tmp_path, "served")
    serve = PipelineProcess(tmp_path, command="serve")
    serve.wait_batches(1)
    serve.proc.send_signal(signal.SIGTERM)
    try:
        assert serve.wait(120) == 0, "".join(serve.lines[-30:])
    finally:
        serve.kill()
    assert "(signal)" in serve.proc.stdout.read()
    assert not any("Traceback" in line for line in serve.lines), "".join(serve.lines)
    state = Table.open(str(tmp_path / "table")).app_state("pipeline:served:served")
    assert state["batch_id"] == serve.batches_done() - 1
    PipelineLock(load_pipeline_yaml(config), config).acquire().release()


def assert_stopped_after_the_current_batch(run: PipelineProcess, table: Path, state_key: str) -> None:
    """The signalled run finished and committed the batch in progress, then exited 0: every batch it logged is
    committed, none half-done (50 records/s a partition, 500 ms batches: 25 a partition each)."""
    try:
        assert run.wait(120) == 0, "".join(run.lines[-30:])
    finally:
        run.kill()
    assert "(signal)" in run.proc.stdout.read()
    done = run.batches_done()
    state = Table.open(str(table)).app_state(state_key)
    assert state["batch_id"] == done - 1
    assert sum(state["extra"]["offsets"].values()) == done * PARTITIONS * 25 < TOTAL


def _table_equals_source(tmp_path: Path) -> None:
    rows = Table.open(str(tmp_path / "table")).scan().to_pylist()
    assert sorted((r["id"], r["amount"]) for r in rows) == [(i, i * 3) for i in range(TOTAL)]


@pytest.mark.parametrize("reader", ["auto", "datasource"])
def test_ctrl_c_stops_after_the_current_batch(broker, tmp_path, reader):
    """Ctrl-C as a terminal sends it (SIGINT to the process group: driver, JVM and Python workers): the batch
    in progress is finished and committed, the summary line printed, exit 0, no trace — with either reader
    (the pipeline's own Kafka reader in its tasks, or the tidelake-kafka data source)."""
    topic = "ctrlc" if reader == "auto" else f"ctrlc-{reader}"
    config = topic_and_pipeline(broker, tmp_path, topic, reader=reader)
    run = PipelineProcess(config, new_session=True)
    run.wait_batches(1)
    os.killpg(run.proc.pid, signal.SIGINT)
    assert_stopped_after_the_current_batch(run, tmp_path / "table", f"pipeline:{topic}:{topic}")
    assert not any("Traceback" in line for line in run.lines), "".join(run.lines)
    run_once_to_the_end(config)
    _table_equals_source(tmp_path)


def test_second_ctrl_c_aborts_and_loses_nothing(broker, tmp_path):
    """Two quick Ctrl-Cs: the second aborts at once (exit 130, no trace); a restart then completes the
    table with every record exactly once."""
    config = topic_and_pipeline(broker, tmp_path, "ctrlc2")
    run = PipelineProcess(config, new_session=True)
    run.wait_batches(1)
    os.killpg(run.proc.pid, signal.SIGINT)
    deadline = time.monotonic() + 60
    while not any("stopping after the current batch" in line for line in list(run.lines)):
        assert time.monotonic() < deadline and run.proc.poll() is None, "".join(run.lines[-30:])
        time.sleep(0.01)
    os.killpg(run.proc.pid, signal.SIGINT)
    try:
        # 130: aborted mid-batch; 0 only when the batch in progress finished before the second signal came
        assert run.wait(120) in (0, 130), "".join(run.lines[-30:])
        if run.proc.returncode == 130:
            assert any("pipeline aborted" in line for line in run.lines), "".join(run.lines)
    finally:
        run.kill()
    assert not any("Traceback" in line or "\tat " in line for line in run.lines), "".join(run.lines)
    run_once_to_the_end(config)
    _table_equals_source(tmp_path)


def test_a_second_instance_is_refused_and_a_kill_9_does_not_leave_the_lock_held(broker, tmp_path):
    """issue 35: a second `pipeline run` of a running config ran, logging batches the first had committed. Now a
    second run, or a serve of the config's directory, is refused in one line naming the first (pid, host);
    after a kill -9 of the first, a new run starts and completes the table."""
    config = topic_and_pipeline(broker, tmp_path, "locked")
    first = PipelineProcess(config)
    try:
        first.wait_batches(1)
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        for command in (["run", str(config), "--once"], ["serve", str(tmp_path)]):
            second = subprocess.run([sys.executable, "-m", "tidelake.cli.main", "pipeline", *command],
                                    capture_output=True, text=True, env=env, timeout=120)
            assert second.returncode == 1, second.stderr
            (line,) = second.stderr.strip().splitlines()
            assert line.startswith(f"tidelake: error: locked.yaml: a pipeline writing {tmp_path / 'table'} is "
                                   f"already running (pid {first.proc.pid} on {socket.gethostname()}; lock "), line
    finally:
        first.kill()   # SIGKILL
    run_once_to_the_end(config)
    _table_equals_source(tmp_path)
