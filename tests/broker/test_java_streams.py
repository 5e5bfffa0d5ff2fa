"""Kafka Streams 4.4 (tests/java/StreamsCount.java: a word count with exactly_once_v2, a repartition topic and a
RocksDB store with its changelog) on the broker, classic group protocol: killed with -9 after it has committed
output, fed more, restarted from its state directory: the last count of every word equals a recount of the input,
nothing lost, nothing counted twice."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import stop_process
from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java

WORDS = ["kafka", "streams", "tidelake", "exactly", "once", "table"]
APP = "k44-word-count"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("streams") / "data",
                        config={"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b.bootstrap_servers


class StreamsApp:
    def __init__(self, bs: str, state_dir) -> None:
        self.proc = subprocess.Popen(java_command("StreamsCount", bs, APP, "words", "counts", str(state_dir)),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()


def produce(bs: str, words: list[str]) -> None:
    p = Producer({"bootstrap.servers": bs})
    for i, w in enumerate(words):
        p.produce("words", w.encode(), key=str(i).encode())
    assert p.flush(30) == 0


def committed_counts(bs: str, until: Counter | None, app: StreamsApp, timeout: float = 240) -> dict[str, int]:
    """The last count per word in `counts` (read_committed): once it equals `until`, or (until None) once any
    count is there."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"reader-{time.monotonic_ns()}", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe(["counts"])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + timeout   # a last guard; the wait ends on the counts
    try:
        while (latest != until) if until is not None else not latest:
            assert app.proc.poll() is None, "".join(app.lines[-40:])
            assert time.monotonic() < deadline, (latest, until, "".join(app.lines[-40:]))
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                latest[m.key().decode()] = struct.unpack(">q", m.value())[0]
    finally:
        c.close()
    return latest


def test_word_count_with_exactly_once_v2_survives_kill_9(broker, tmp_path):
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic("words", 2, 1), NewTopic("counts", 2, 1)]).values():
        f.result(30)
    first = [WORDS[i % len(WORDS)] for i in range(300)]
    produce(broker, first)
    app = StreamsApp(broker, tmp_path / "state")
    try:
        committed_counts(broker, None, app)            # some output committed ...
        os.kill(app.proc.pid, signal.SIGKILL)          # ... then killed, perhaps inside a transaction
        app.proc.wait(30)
        second = [WORDS[(i * 7) % len(WORDS)] for i in range(200)]
        produce(broker, second)
        app = StreamsApp(broker, tmp_path / "state")   # the same state directory: RocksDB and the checkpoint
        expected = Counter(first + second)
        assert committed_counts(broker, dict(expected), app) == dict(expected)
    finally:
        stop_process(app.proc)
