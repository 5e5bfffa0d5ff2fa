"""Cross-client matrix: confluent-kafka, kafka-python, aiokafka and the reference Java client each
produce with every compression codec (keys, null keys/values, headers, explicit CreateTime timestamps)
and every client reads back what every other wrote, field for field, at the acknowledged offsets.

One broker per module; all producing happens once in the `matrix` fixture (the Java side in one JVM
that also reads all twenty topics), and each test checks one writer or one (reader, writer) pair.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from clients import (ALL_CLIENTS, CODECS, CREATE_TIME, PY_CLIENTS, JavaScript, Rec, broker_kinds, consume,
                     create_topics, produce, running_broker, sample_records)

pytestmark = pytest.mark.java

PARTITIONS = 2
RECORDS_PER_TOPIC = 40
DEFAULTS_TOPIC = "mx-java-defaults"
BIG_TOPIC = "mx-big"  # one ~900 KB incompressible record per writer, writer i -> partition i
BIG_SIZE = 900 * 1024


def _big_record(writer: str) -> Rec:
    import random
    payload = random.Random(writer).randbytes(BIG_SIZE)
    return Rec(ALL_CLIENTS.index(writer), writer.encode(), payload, 1_600_000_123_000, (("size", b"900k"),))


@dataclass
class Matrix:
    kind: str
    bootstrap: str
    data_dir: Path
    topics: dict[tuple[str, str], str]
    written: dict[tuple[str, str], list[Rec]] = field(default_factory=dict)     # acknowledged records
    big_written: dict[str, Rec] = field(default_factory=dict)
    produce_errors: dict[tuple[str, str], str] = field(default_factory=dict)
    java_read: dict[tuple[str, int], list[Rec]] = field(default_factory=dict)
    java_producer_config: dict[str, str] = field(default_factory=dict)
    java_defaults_acked: list[Rec] = field(default_factory=list)
    java_defaults_sent: list[Rec] = field(default_factory=list)


def _topic(writer: str, codec: str) -> str:
    return f"mx-{writer}-{codec}"


@pytest.fixture(scope="module", params=broker_kinds())
def matrix(request, tmp_path_factory):
    kind = request.param
    data_dir = tmp_path_factory.mktemp(f"interop-{kind}")
    with running_broker(kind, data_dir) as bootstrap:
        topics = {(w, c): _topic(w, c) for w in ALL_CLIENTS for c in CODECS}
        create_topics(bootstrap, [*topics.values(), DEFAULTS_TOPIC], PARTITIONS)
        create_topics(bootstrap, [BIG_TOPIC], len(ALL_CLIENTS))
        m = Matrix(kind, bootstrap, data_dir, topics)
        sent = {(w, c): sample_records(f"{w}/{c}", RECORDS_PER_TOPIC, PARTITIONS) for (w, c) in topics}

        for w in PY_CLIENTS:
            for c in CODECS:
                try:
                    m.written[(w, c)] = produce(w, bootstrap, topics[(w, c)], sent[(w, c)], c)
                except Exception as e:  # reported by test_produce for this (writer, codec)
                    m.produce_errors[(w, c)] = f"{type(e).__name__}: {e}"
            try:
                (m.big_written[w],) = produce(w, bootstrap, BIG_TOPIC, [_big_record(w)])
            except Exception as e:
                m.produce_errors[(w, "big")] = f"{type(e).__name__}: {e}"

        # One JVM: the Java producer per codec, the Java producer with pure defaults (keys, no explicit
        # partition), then one consumer reading every topic the Python clients wrote and its own.
        script = JavaScript()
        for c in CODECS:
            script.produce(topics[("java", c)], c, sent[("java", c)])
        m.java_defaults_sent = sample_records("java-defaults", RECORDS_PER_TOPIC, PARTITIONS)
        script.produce(DEFAULTS_TOPIC, "default", m.java_defaults_sent, explicit_partition=False)
        script.produce(BIG_TOPIC, "none", [_big_record("java")])
        want = {(t, p): RECORDS_PER_TOPIC // PARTITIONS for (w, c), t in topics.items()
                if (w, c) not in m.produce_errors for p in range(PARTITIONS)}
        want.update({(BIG_TOPIC, i): 1 for i in range(len(ALL_CLIENTS))})
        script.consume(want, timeout=120)
        result = script.run(bootstrap)
        for i, c in enumerate(CODECS):
            if result.error(i):
                m.produce_errors[("java", c)] = str(result.error(i))
            else:
                m.written[("java", c)] = result.acks(i, sent[("java", c)])
        if result.error(len(CODECS)):
            m.produce_errors[("java", "defaults")] = str(result.error(len(CODECS)))
        else:
            m.java_defaults_acked = result.acks(len(CODECS), m.java_defaults_sent)
            m.java_producer_config = result.producer_config(len(CODECS))
        if result.error(len(CODECS) + 1):
            m.produce_errors[("java", "big")] = str(result.error(len(CODECS) + 1))
        else:
            (m.big_written["java"],) = result.acks(len(CODECS) + 1, [_big_record("java")])
        m.java_read = result.records(len(CODECS) + 2)
        yield m


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("writer", ALL_CLIENTS)
def test_produce_acknowledged_in_order(matrix: Matrix, writer: str, codec: str) -> None:
    """Every record acknowledged, offsets 0..n-1 per partition in send order, ack timestamps = CreateTime."""
    assert (writer, codec) not in matrix.produce_errors, matrix.produce_errors[(writer, codec)]
    acked = matrix.written[(writer, codec)]
    sent = sample_records(f"{writer}/{codec}", RECORDS_PER_TOPIC, PARTITIONS)
    assert [a.written() for a in acked] == [s.written() for s in sent]
    for p in range(PARTITIONS):
        assert [a.offset for a in acked if a.partition == p] == list(range(RECORDS_PER_TOPIC // PARTITIONS))


def _check_read(matrix: Matrix, writer: str, read: dict[tuple[str, int], list[Rec]]) -> list[str]:
    problems = []
    for codec in CODECS:
        if (writer, codec) in matrix.produce_errors:
            problems.append(f"{codec}: not produced ({matrix.produce_errors[(writer, codec)]})")
            continue
        topic = matrix.topics[(writer, codec)]
        for p in range(PARTITIONS):
            expected = [a for a in matrix.written[(writer, codec)] if a.partition == p]
            got = read.get((topic, p), [])
            if len(got) != len(expected):
                problems.append(f"{codec} p{p}: read {len(got)} records, expected {len(expected)}")
                continue
            for e, g in zip(expected, got):
                if (g.written(), g.offset, g.timestamp_type) != (e.written(), e.offset, CREATE_TIME):
                    problems.append(f"{codec} p{p} offset {e.offset}: read {g} expected {e}")
                    break
    return problems


@pytest.mark.parametrize("writer", ALL_CLIENTS)
@pytest.mark.parametrize("reader", ALL_CLIENTS)
def test_reader_reads_what_writer_wrote(matrix: Matrix, reader: str, writer: str) -> None:
    if reader == "java":
        read = matrix.java_read
    else:
        want = {(matrix.topics[(writer, c)], p): RECORDS_PER_TOPIC // PARTITIONS
                for c in CODECS if (writer, c) not in matrix.produce_errors for p in range(PARTITIONS)}
        read = consume(reader, matrix.bootstrap, want, timeout=60)
    problems = _check_read(matrix, writer, read)
    assert not problems, f"{reader} reading {writer}'s topics:\n" + "\n".join(problems)


def test_java_producer_defaults_idempotent_acks_all(matrix: Matrix) -> None:
    """The Java producer with no settings but bootstrap/serializers is idempotent with acks=all, and the
    broker stores each record exactly once, keyed records spread by Java's own partitioner."""
    assert ("java", "defaults") not in matrix.produce_errors, matrix.produce_errors[("java", "defaults")]
    assert matrix.java_producer_config == {"enable.idempotence": "true", "acks": "-1"}
    acked = matrix.java_defaults_acked
    assert len(acked) == RECORDS_PER_TOPIC
    per_partition = {p: sorted(a.offset for a in acked if a.partition == p) for p in range(PARTITIONS)}
    for p, offsets in per_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets {offsets}"
    read = consume("confluent", matrix.bootstrap,
                   {(DEFAULTS_TOPIC, p): len(per_partition[p]) for p in range(PARTITIONS)}, timeout=60)
    got = sorted((r.partition, r.offset, r.key, r.value) for rs in read.values() for r in rs)
    assert got == sorted((a.partition, a.offset, a.key, a.value) for a in acked)


def _stored_batch_headers(matrix: Matrix, topic: str, partition: int) -> list:
    """The batch headers the broker serves for a partition: raw Fetch v11 from offset 0, page by page
    (min_bytes=1 with a short wait: Tansu answers a min_bytes=0 fetch with nothing)."""
    from kafka.protocol.consumer import FetchRequest as FR

    from tidelake.protocol.records import iter_batches
    from tidelake.protocol.wire_client import WireClient
    headers, offset = [], 0
    with WireClient.connect(matrix.bootstrap) as c:
        for _ in range(100):  # bounded: 40 records at most
            r = c.request(FR(replica_id=-1, max_wait_ms=200, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                             session_id=0, session_epoch=-1, topics=[FR.FetchTopic(topic=topic, partitions=[
                                 FR.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1,
                                                              fetch_offset=offset, log_start_offset=-1,
                                                              partition_max_bytes=1 << 20)])],
                             forgotten_topics_data=[], rack_id=""), 11)
            parts = [x for t in r.responses for x in t.partitions]  # Tansu leaves out a partition at its end
            assert all(x.error_code == 0 for x in parts)
            got = [h for x in parts for _, h in iter_batches(x.records or b"")]
            if not got:
                return headers
            headers += got
            offset = got[-1].last_offset + 1
    raise AssertionError(f"{topic}-{partition}: fetch did not reach the end")


def test_java_idempotent_batches_stored(matrix: Matrix) -> None:
    """The stored batches of the defaults topic carry the Java producer's id and contiguous sequences,
    as served by Fetch (every broker kind) and, on tidelake, as written in the segment files."""
    from tidelake.protocol.records import iter_batches
    for p in range(PARTITIONS):
        headers = _stored_batch_headers(matrix, DEFAULTS_TOPIC, p)
        assert headers
        assert all(h.producer_id >= 0 for h in headers)
        assert len({h.producer_id for h in headers}) == 1
        expected_seq = 0
        for h in headers:
            assert h.base_sequence == expected_seq
            expected_seq = h.last_sequence + 1
        if matrix.kind == "tidelake":  # the segment files hold exactly these batches
            segments = sorted((matrix.data_dir / f"{DEFAULTS_TOPIC}-{p}").glob("*.log"))
            assert segments, f"no segment files for {DEFAULTS_TOPIC}-{p}"
            on_disk = [h for seg in segments for _, h in iter_batches(seg.read_bytes())]
            assert [(h.base_offset, h.producer_id, h.base_sequence, h.crc) for h in on_disk] == \
                [(h.base_offset, h.producer_id, h.base_sequence, h.crc) for h in headers]


@pytest.mark.parametrize("reader", ALL_CLIENTS)
def test_big_records_cross_clients(matrix: Matrix, reader: str) -> None:
    """A ~900 KB record from every writer (each in its own request frame) reads back intact."""
    errors = {w: matrix.produce_errors[(w, "big")] for w in ALL_CLIENTS if (w, "big") in matrix.produce_errors}
    assert not errors, errors
    want = {(BIG_TOPIC, i): 1 for i in range(len(ALL_CLIENTS))}
    read = matrix.java_read if reader == "java" else consume(reader, matrix.bootstrap, want, timeout=60)
    for w in ALL_CLIENTS:
        (got,) = read.get((BIG_TOPIC, ALL_CLIENTS.index(w)), [None])
        assert got is not None, f"{reader} read nothing of {w}'s big record"
        assert (got.offset, got.written()) == (0, _big_record(w).written()), f"{reader} reading {w}'s big record"
        assert matrix.big_written[w].offset == 0
