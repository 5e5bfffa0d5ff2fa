"""A Kafka Connect worker from jvm/kafka's connect-4.3 classpath (Connect 4.3.1 with connect-file, the one version
set Maven Central serves whole) against the broker: a standalone worker's FileStreamSource writes a file's lines
into a topic and its FileStreamSink writes the topic back into another file, line for line."""
from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import stop_process
from kafka_peer import TEST_JVM_OPTIONS, classpath
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java

LINES = [f"line {i}" for i in range(50)]


def properties(path, **values) -> str:
    path.write_text("".join(f"{k.replace('_', '.')}={v}\n" for k, v in values.items()))
    return str(path)


def test_file_source_and_sink_round_trip_through_the_broker(tmp_path):
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(f"{line}\n" for line in LINES))
    with EmbeddedBroker(tmp_path / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for f in admin.create_topics([NewTopic("file-lines", 1, 1)]).values():   # one partition: order kept
            f.result(30)
        converter = "org.apache.kafka.connect.storage.StringConverter"
        worker = properties(tmp_path / "worker.properties", bootstrap_servers=b.bootstrap_servers,
                            key_converter=converter, value_converter=converter,
                            offset_storage_file_filename=tmp_path / "offsets", listeners="http://127.0.0.1:0",
                            offset_flush_interval_ms=500)
        src = properties(tmp_path / "source.properties", name="file-source",
                         connector_class="org.apache.kafka.connect.file.FileStreamSourceConnector",
                         file=source, topic="file-lines")
        snk = properties(tmp_path / "sink.properties", name="file-sink",
                         connector_class="org.apache.kafka.connect.file.FileStreamSinkConnector",
                         file=sink, topics="file-lines")
        with open(tmp_path / "connect.log", "w") as log:
            proc = subprocess.Popen(["java", "-Xmx256m", *TEST_JVM_OPTIONS, "-cp", classpath("connect-4.3"),
                                     "org.apache.kafka.connect.cli.ConnectStandalone", worker, src, snk],
                                    stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180   # a last guard: the wait ends when the sink file is complete
            while not (sink.exists() and sink.read_text().splitlines() == LINES):
                assert proc.poll() is None, (tmp_path / "connect.log").read_text()[-4000:]
                assert time.monotonic() < deadline, (tmp_path / "connect.log").read_text()[-4000:]
                time.sleep(0.2)
        finally:
            stop_process(proc)
        assert b.broker.logs.get("file-lines", 0).log_end_offset == len(LINES)   # each line once
    assert "ERROR" not in (tmp_path / "connect.log").read_text()
