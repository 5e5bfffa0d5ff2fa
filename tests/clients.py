"""Real Kafka clients driven the same way, for interop and CLI tests.

Every client here produces a list of `Rec` and reads back `Rec`s with offsets, so tests can compare
what one client wrote with what another read, field by field. The reference Java client runs as one
JVM per script (tests/java/InteropClient.java on kafka-clients 4.4.0), compiled by `make jvm-deps`.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from conftest import ROOT, tansu_broker  # noqa: F401 (re-exported)
from kafka_peer import java_command

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PY_CLIENTS = ("confluent", "kafka-python", "aiokafka")
ALL_CLIENTS = PY_CLIENTS + ("java",)
CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Rec:
    """One record as a client writes it (offset -1) or reads it back."""
    partition: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers = ()
    offset: int = -1
    timestamp_type: str = CREATE_TIME

    def written(self) -> tuple:
        """The fields a producer chose: what every reader must see unchanged."""
        return (self.partition, self.key, self.value, self.timestamp, self.headers)


def sample_records(tag: str, n: int, partitions: int, base_ts: int = 1_600_000_000_000) -> list[Rec]:
    """Deterministic records exercising null keys, null and empty values, 0/1/2 headers (a repeated
    header name, an empty header value), binary bytes, sizes from 0 to a few KB, increasing timestamps."""
    recs = []
    for i in range(n):
        key = None if i % 7 == 3 else f"{tag}-key-{i}".encode()
        if i % 13 == 6 and key is not None:  # kafka-python refuses a record with neither key nor value
            value = None
        elif i % 11 == 5:
            value = b""
        else:
            value = (f"{tag}|{i}|".encode() + bytes(range(256))) * (1 + (i * 37) % 13)
        headers: Headers = ()
        if i % 3 == 1:
            headers = (("trace", f"t{i}".encode()),)
        elif i % 3 == 2:
            headers = (("dup", b"first"), ("dup", b""), ("bin", bytes([0, 255, i % 256])))
        recs.append(Rec(i % partitions, key, value, base_ts + i * 10, headers))
    return recs


def _norm_headers(hs) -> Headers:
    return tuple((k, b"" if v is None else bytes(v)) for k, v in (hs or ()))


# ---------------------------------------------------------------------------------------------
# Brokers


def broker_kinds() -> list[str]:
    """Brokers the interop tests run against: tidelake always; add Tansu with
    TIDELAKE_INTEROP_BROKERS=tidelake,tansu as a cross-check that a test's expectations are the
    clients' and not tidelake's. Tansu 0.x (memory storage) passes the codec matrix but fails, as
    its own limitations: validate_only creates, config sources (all DEFAULT_CONFIG), ListOffsets by
    timestamp, LogAppendTime, the Java Admin's max-timestamp lookup (times out), and aiokafka's
    idempotent producer (UnknownError)."""
    return [k.strip() for k in os.environ.get("TIDELAKE_INTEROP_BROKERS", "tidelake").split(",") if k.strip()]


@contextlib.contextmanager
def running_broker(kind: str, data_dir: Path) -> Iterator[str]:
    """A broker of `kind` ("tidelake": EmbeddedBroker on disk in data_dir; "tansu": memory); yields bootstrap."""
    if kind == "tansu":
        with tansu_broker() as bootstrap:
            yield bootstrap
    elif kind == "tidelake":
        from tidelake.broker import EmbeddedBroker
        with EmbeddedBroker(data_dir, port=0) as broker:
            yield broker.bootstrap_servers
    else:
        raise ValueError(kind)


# ---------------------------------------------------------------------------------------------
# Admin helpers (confluent-kafka)


def create_topics(bootstrap: str, topics: Iterable[str], partitions: int, configs: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, partitions, 1, config=dict(configs or {})) for t in topics],
                                  operation_timeout=30, request_timeout=30)
    for f in futures.values():
        f.result(60)


# ---------------------------------------------------------------------------------------------
# Producers: each returns the records with partition/offset/timestamp from the broker's acknowledgement.


def produce(client: str, bootstrap: str, topic: str, recs: Sequence[Rec], codec: str = "none") -> list[Rec]:
    if client == "java":
        script = JavaScript()
        script.produce(topic, codec, recs)
        return script.run(bootstrap).acks(0, recs)
    return {"confluent": produce_confluent, "kafka-python": produce_kafka_python,
            "aiokafka": produce_aiokafka}[client](bootstrap, topic, recs, codec)


def produce_confluent(bootstrap: str, topic: str, recs: Sequence[Rec], codec: str = "none",
                      extra: dict | None = None) -> list[Rec]:
    from confluent_kafka import Producer
    acked: dict[int, Rec] = {}
    errors: list = []

    def on_delivery(i: int):
        def cb(err, msg):
            if err:
                errors.append(err)
            else:
                acked[i] = replace(recs[i], partition=msg.partition(), offset=msg.offset(),
                                   timestamp=msg.timestamp()[1])
        return cb

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                         "enable.idempotence": True, "acks": "all", **(extra or {})})
    for i, r in enumerate(recs):
        kwargs = {"headers": list(r.headers)} if r.headers else {}
        producer.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                         on_delivery=on_delivery(i), **kwargs)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0 and not errors, f"confluent produce to {topic}: {remaining} unflushed, errors {errors}"
    return [acked[i] for i in range(len(recs))]


def produce_kafka_python(bootstrap: str, topic: str, recs: Sequence[Rec], codec: str = "none") -> list[Rec]:
    from kafka import KafkaProducer
    # kafka-python 3 is idempotent by default with acks=all (KIP-679), like the Java client
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                             compression_type=None if codec == "none" else codec)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), partition=r.partition,
                                 timestamp_ms=r.timestamp) for r in recs]
        producer.flush(60)
        out = []
        for r, f in zip(recs, futures):
            md = f.get(timeout=60)
            out.append(replace(r, partition=md.partition, offset=md.offset, timestamp=md.timestamp))
        return out
    finally:
        producer.close(10)


def produce_aiokafka(bootstrap: str, topic: str, recs: Sequence[Rec], codec: str = "none") -> list[Rec]:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[Rec]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, enable_idempotence=True,
                                    compression_type=None if codec == "none" else codec,
                                    request_timeout_ms=30000)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                           timestamp_ms=r.timestamp, headers=list(r.headers)) for r in recs]
            mds = await asyncio.wait_for(asyncio.gather(*futures), 60)
            # aiokafka's RecordMetadata.timestamp for CreateTime is the batch's first timestamp (a
            # client quirk, seen against Tansu too), so the record keeps the timestamp it was sent with.
            return [replace(r, partition=md.partition, offset=md.offset) for r, md in zip(recs, mds)]
        finally:
            await producer.stop()
    return asyncio.run(run())


# ---------------------------------------------------------------------------------------------
# Consumers: read `count` records from the beginning of each (topic, partition), no consumer group.

Want = dict[tuple[str, int], int]  # (topic, partition) -> number of records to read


def consume(client: str, bootstrap: str, want: Want, timeout: float = 60) -> dict[tuple[str, int], list[Rec]]:
    if client == "java":
        script = JavaScript()
        script.consume(want, timeout)
        return script.run(bootstrap).records(0)
    return {"confluent": consume_confluent, "kafka-python": consume_kafka_python,
            "aiokafka": consume_aiokafka}[client](bootstrap, want, timeout)


def _group(recs: Iterable[tuple[str, Rec]]) -> dict[tuple[str, int], list[Rec]]:
    out: dict[tuple[str, int], list[Rec]] = {}
    for topic, r in recs:
        out.setdefault((topic, r.partition), []).append(r)
    return out


def poll_messages(bootstrap: str, topic: str, partitions, expected: int, *, timeout: float = 30,
                  extra: dict | None = None) -> list:
    """confluent-kafka Messages of ``partitions`` from offset 0 until ``expected`` arrived or ``timeout``;
    any message error fails the test."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         **(extra or {})})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    out: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is None:
                continue
            assert not m.error(), m.error()
            out.append(m)
    finally:
        consumer.close()
    return out


def consume_confluent(bootstrap: str, want: Want, timeout: float = 60,
                      extra: dict | None = None) -> dict[tuple[str, int], list[Rec]]:
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop-unused", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **(extra or {})})
    got: list[tuple[str, Rec]] = []
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for (t, p) in want])
        need, deadline = sum(want.values()), time.monotonic() + timeout
        while len(got) < need and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error():
                    raise AssertionError(f"confluent consume: {m.error()}")
                ts_type, ts = m.timestamp()
                got.append((m.topic(), Rec(m.partition(), m.key(), m.value(), ts, _norm_headers(m.headers()),
                                           m.offset(),
                                           LOG_APPEND_TIME if ts_type == TIMESTAMP_LOG_APPEND_TIME else CREATE_TIME)))
    finally:
        consumer.close()
    return _group(got)


def consume_kafka_python(bootstrap: str, want: Want, timeout: float = 60) -> dict[tuple[str, int], list[Rec]]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    got: list[tuple[str, Rec]] = []
    try:
        tps = [TopicPartition(t, p) for (t, p) in want]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        need, deadline = sum(want.values()), time.monotonic() + timeout
        while len(got) < need and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    got.append((tp.topic, Rec(m.partition, m.key, m.value, m.timestamp, _norm_headers(m.headers),
                                              m.offset, LOG_APPEND_TIME if m.timestamp_type == 1 else CREATE_TIME)))
    finally:
        consumer.close()
    return _group(got)


def consume_aiokafka(bootstrap: str, want: Want, timeout: float = 60) -> dict[tuple[str, int], list[Rec]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[tuple[str, Rec]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        got: list[tuple[str, Rec]] = []
        try:
            tps = [TopicPartition(t, p) for (t, p) in want]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            need, deadline = sum(want.values()), time.monotonic() + timeout
            while len(got) < need and time.monotonic() < deadline:
                for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                    for m in msgs:
                        got.append((tp.topic, Rec(m.partition, m.key, m.value, m.timestamp,
                                                  _norm_headers(m.headers), m.offset,
                                                  LOG_APPEND_TIME if m.timestamp_type == 1 else CREATE_TIME)))
        finally:
            await consumer.stop()
        return got
    return _group(asyncio.run(run()))


# ---------------------------------------------------------------------------------------------
# Reference Java client


def _hex(b: bytes | None) -> str:
    return "-" if b is None else b.hex()


def _unhex(s: str) -> bytes | None:
    return None if s == "-" else bytes.fromhex(s)


class JavaScript:
    """A script for InteropClient.java: add commands, then `run(bootstrap)` in one JVM."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.commands: list[str] = []

    def _cmd(self, *fields) -> "JavaScript":
        self.commands.append(str(fields[0]))
        self.lines.append("\t".join(map(str, fields)))
        return self

    def produce(self, topic: str, codec: str, recs: Sequence[Rec], explicit_partition: bool = True) -> "JavaScript":
        """Java producer with its defaults (idempotent, acks=all); codec "default" leaves compression unset."""
        self._cmd("produce", topic, codec, len(recs))
        for r in recs:
            hs = ",".join(f"{k.encode().hex()}={_hex(v)}" for k, v in r.headers)
            self.lines.append("\t".join([str(r.partition) if explicit_partition else "-", _hex(r.key), _hex(r.value),
                                         str(r.timestamp), hs]))
        return self

    def consume(self, want: Want, timeout: float = 60) -> "JavaScript":
        return self._cmd("consume", int(timeout * 1000), *(f"{t}:{p}:{n}" for (t, p), n in want.items()))

    def create(self, topic: str, partitions: int, configs: dict | None = None) -> "JavaScript":
        return self._cmd("create", topic, partitions, ",".join(f"{k}={v}" for k, v in (configs or {}).items()))

    def topics(self) -> "JavaScript":
        return self._cmd("topics")

    def describe(self, topic: str) -> "JavaScript":
        return self._cmd("describe", topic)

    def configs(self, topic: str) -> "JavaScript":
        return self._cmd("configs", topic)

    def alter(self, topic: str, set_configs: dict, delete: Sequence[str] = ()) -> "JavaScript":
        return self._cmd("alter", topic, ",".join(f"{k}={v}" for k, v in set_configs.items()),
                         ",".join(delete) or "-")

    def partitions(self, topic: str, total: int) -> "JavaScript":
        return self._cmd("partitions", topic, total)

    def delete(self, topic: str) -> "JavaScript":
        return self._cmd("delete", topic)

    def list_offsets(self, topic: str, partition: int, spec: str | int) -> "JavaScript":
        return self._cmd("list_offsets", topic, partition, spec)

    def offsets_for_times(self, topic: str, partition: int, ts: int) -> "JavaScript":
        return self._cmd("offsets_for_times", topic, partition, ts)

    def run(self, bootstrap: str, timeout: float = 240) -> "JavaResult":
        proc = subprocess.run(
            java_command("InteropClient", bootstrap),
            input="\n".join(self.lines) + "\n", capture_output=True, text=True, timeout=timeout)
        lines = [ln.split("\t") for ln in proc.stdout.splitlines()]
        assert proc.returncode == 0 and lines and lines[-1] == ["done"], (
            f"java exited {proc.returncode}\nstdout tail: {proc.stdout[-3000:]}\nstderr tail: {proc.stderr[-3000:]}")
        return JavaResult(self.commands, lines[:-1], proc.stderr)


class JavaResult:
    """InteropClient's output split per command (each ends with "end")."""

    def __init__(self, commands: list[str], lines: list[list[str]], stderr: str) -> None:
        self.stderr = stderr
        self.outputs: list[list[list[str]]] = [[]]
        for ln in lines:
            if ln == ["end"]:
                self.outputs.append([])
            else:
                self.outputs[-1].append(ln)
        self.outputs.pop()
        assert len(self.outputs) == len(commands), (commands, lines)
        self.commands = commands

    def output(self, i: int, allow_error: bool = False) -> list[list[str]]:
        out = self.outputs[i]
        if not allow_error:
            errs = [ln for ln in out if ln[0] == "error"]
            assert not errs, f"java command {i} ({self.commands[i]}) failed: {errs}"
        return out

    def error(self, i: int) -> list[str] | None:
        errs = [ln for ln in self.outputs[i] if ln[0] == "error"]
        return errs[0] if errs else None

    def acks(self, i: int, recs: Sequence[Rec]) -> list[Rec]:
        acks = [ln for ln in self.output(i) if ln[0] == "ack"]
        assert len(acks) == len(recs)
        return [replace(r, partition=int(a[1]), offset=int(a[2]), timestamp=int(a[3])) for r, a in zip(recs, acks)]

    def producer_config(self, i: int) -> dict[str, str]:
        (ln,) = [ln for ln in self.output(i) if ln[0] == "producer_config"]
        return dict(zip(ln[1::2], ln[2::2]))

    def records(self, i: int) -> dict[tuple[str, int], list[Rec]]:
        got = []
        for ln in self.output(i):
            if ln[0] == "rec":
                _, topic, p, off, ts_type, ts, key, value, hs = ln
                headers = tuple((bytes.fromhex(k).decode(), _unhex(v) or b"")
                                for k, v in (h.split("=", 1) for h in hs.split(",") if h))
                got.append((topic, Rec(int(p), _unhex(key), _unhex(value), int(ts), headers, int(off),
                                       LOG_APPEND_TIME if ts_type == LOG_APPEND_TIME else CREATE_TIME)))
        return _group(got)

    def rows(self, i: int, kind: str) -> list[list[str]]:
        return [ln[1:] for ln in self.output(i) if ln[0] == kind]
