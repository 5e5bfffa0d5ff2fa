"""SIGTERM is Ctrl-C for every long-running command (cli/signals.py): real processes, each stopped by its pid.

The others are tested where their command is: ``broker start`` (tests/broker/test_restart.py,
test_sigterm_stops_cleanly_with_exit_code_0), ``schema-registry start`` (tests/schema_registry/test_cli.py,
test_serves_and_stops_on_sigterm), ``pipeline run`` and ``pipeline serve`` (tests/pipeline/test_kill.py)."""
from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

from clients import consume, create_topics, running_broker

TOPIC = "signals"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with running_broker("tidelake", tmp_path_factory.mktemp("cli-signals")) as bs:
        create_topics(bs, [TOPIC], 2)
        yield bs


class Command:
    """A ``tidelake`` command in its own process; stdout and stderr collected by threads (bounded waits)."""

    def __init__(self, *args: str, stdin: bool = False):
        self.proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", *args], text=True,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stdout: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=lambda: [self.stdout.put(line) for line in self.proc.stdout], daemon=True).start()
        self._err = threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True)
        self._err.start()

    def terminate(self) -> int:
        """SIGTERM, and the exit code once every stderr line was read."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self._err.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def wait_for(condition, what: str, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while not (got := condition()):
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.05)
    return got


def group(bootstrap: str, name: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([name])[name].result(30)


def test_a_sigtermed_group_consumer_leaves_the_group_at_once(bootstrap):
    """issue 35: SIGTERM ended the process without close(): it stayed a member until its session expired."""
    consumer = Command("consume", TOPIC, "--group", "sigterm-group", "--consumer-property", "session.timeout.ms=45000",
                       "--bootstrap-server", bootstrap)
    try:
        wait_for(lambda: group(bootstrap, "sigterm-group").state == ConsumerGroupState.STABLE
                 and group(bootstrap, "sigterm-group").members, "member in the group")
        assert consumer.terminate() == 0, "".join(consumer.stderr)
    finally:
        consumer.kill()
    after = group(bootstrap, "sigterm-group")   # right after the exit: well within the 45 s session
    assert after.members == [] and after.state == ConsumerGroupState.EMPTY
    assert "".join(consumer.stderr).strip().splitlines()[-1] == "Processed a total of 0 messages"
    assert "Traceback" not in "".join(consumer.stderr)


def test_a_sigtermed_producer_delivers_what_it_read_and_exits_0(bootstrap):
    producer = Command("produce", TOPIC, "--partition", "1", "--bootstrap-server", bootstrap, stdin=True)
    try:
        producer.proc.stdin.write("one\ntwo\nthree\n")
        producer.proc.stdin.flush()   # stdin stays open: the producer is still reading when the signal comes
        wait_for(lambda: len(consume("confluent", bootstrap, {(TOPIC, 1): 3}).get((TOPIC, 1), [])) == 3,
                 "three records")
        assert producer.terminate() == 0, "".join(producer.stderr)
    finally:
        producer.kill()
    assert "".join(producer.stderr).strip().splitlines() == ["Produced 3 records to signals."]


def test_a_sigtermed_console_drains_exits_0_and_frees_its_port(bootstrap):
    """uvicorn re-raised the SIGTERM once drained: the console died by it (exit -15)."""
    console = Command("console", "--listen", "127.0.0.1:0", "--bootstrap-server", bootstrap)
    try:
        first = console.stdout.get(timeout=90)
        port = int(first.split("http://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        # serving (not only bound): uvicorn has taken the signals over
        wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).status == 200, "page")
        assert console.terminate() == 0, "".join(console.stderr)
    finally:
        console.kill()
    assert "Traceback" not in "".join(console.stderr)
    with socket.socket() as s:   # no listener left (SO_REUSEADDR: as a server binds, past TIME_WAIT)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
