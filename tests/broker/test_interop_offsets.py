"""ListOffsets through every client: by timestamp (exact, between records, inside a batch, ties,
before the first, after the last), earliest, latest, max timestamp; and LogAppendTime topics."""
from __future__ import annotations

import asyncio

import pytest

from clients import LOG_APPEND_TIME, JavaScript, Rec, broker_kinds, consume, create_topics, produce_confluent, \
    running_broker

TOPIC = "ts-lookup"
BASE_TS = 1_650_000_000_000
BATCHES, PER_BATCH = 3, 10


def _timestamps() -> list[int]:
    """Increasing timestamps 100 ms apart, with records 12 and 13 sharing one (a tie)."""
    ts = [BASE_TS + 100 * i for i in range(BATCHES * PER_BATCH)]
    ts[13] = ts[12]
    return ts


TS = _timestamps()
N = len(TS)

# (target timestamp, expected offset or None for "no such record")
QUERIES = [
    (BASE_TS - 5_000, 0),          # before the first record
    (TS[0], 0),                    # exactly the first
    (TS[5], 5),                    # exact, inside the first batch
    (TS[5] + 1, 6),                # between records
    (TS[12], 12),                  # a tie: the first of the two
    (TS[15] - 50, 15),             # inside the second batch, between
    (TS[20], 20),                  # first record of the third batch
    (TS[-1], N - 1),               # exactly the last
    (TS[-1] + 1, None),            # after the last
]


@pytest.fixture(scope="module", params=broker_kinds())
def bootstrap(request, tmp_path_factory):
    with running_broker(request.param, tmp_path_factory.mktemp(f"offsets-{request.param}")) as bs:
        create_topics(bs, [TOPIC], 1)
        for b in range(BATCHES):  # one flush per produce call: separate record batches
            recs = [Rec(0, f"k{i}".encode(), f"v{i}".encode(), TS[i]) for i in range(b * PER_BATCH, (b + 1) * PER_BATCH)]
            acked = produce_confluent(bs, TOPIC, recs, "lz4")
            assert [a.offset for a in acked] == list(range(b * PER_BATCH, (b + 1) * PER_BATCH))
        yield bs


def test_confluent_offsets_for_times(bootstrap: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ts-unused"})
    try:
        got = [c.offsets_for_times([TopicPartition(TOPIC, 0, ts)], timeout=30)[0] for ts, _ in QUERIES]
        assert [tp.error for tp in got] == [None] * len(QUERIES)
        assert [tp.offset for tp in got] == [-1 if off is None else off for _, off in QUERIES]
        assert c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30, cached=False) == (0, N)
    finally:
        c.close()


def test_kafka_python_offsets_for_times(bootstrap: str) -> None:
    from kafka import KafkaConsumer, TopicPartition
    tp = TopicPartition(TOPIC, 0)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        for ts, expected in QUERIES:
            got = c.offsets_for_times({tp: ts})[tp]
            if expected is None:
                assert got is None, (ts, got)
            else:
                assert (got.offset, got.timestamp) == (expected, TS[expected]), ts
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: N}
    finally:
        c.close()


def test_aiokafka_offsets_for_times(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    tp = TopicPartition(TOPIC, 0)

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await c.start()
        try:
            results = [(await c.offsets_for_times({tp: ts}))[tp] for ts, _ in QUERIES]
            return results, await c.beginning_offsets([tp]), await c.end_offsets([tp])
        finally:
            await c.stop()

    results, beginning, end = asyncio.run(run())
    for (ts, expected), got in zip(QUERIES, results):
        if expected is None:
            assert got is None, (ts, got)
        else:
            assert (got.offset, got.timestamp) == (expected, TS[expected]), ts
    assert (beginning, end) == ({tp: 0}, {tp: N})


@pytest.mark.java
def test_java_list_offsets_and_offsets_for_times(bootstrap: str) -> None:
    script = JavaScript()
    for ts, _ in QUERIES:
        script.list_offsets(TOPIC, 0, ts)
    for ts, _ in QUERIES:
        script.offsets_for_times(TOPIC, 0, ts)
    script.list_offsets(TOPIC, 0, "earliest").list_offsets(TOPIC, 0, "latest").list_offsets(TOPIC, 0, "max")
    r = script.run(bootstrap)
    for i, (ts, expected) in enumerate(QUERIES):
        (admin_row,) = r.rows(i, "offset")
        assert int(admin_row[3]) == (-1 if expected is None else expected), (ts, admin_row)
        if expected is not None:
            assert int(admin_row[4]) == TS[expected]
        (consumer_row,) = r.rows(len(QUERIES) + i, "oft")
        assert consumer_row[3:] == (["-", "-"] if expected is None else [str(expected), str(TS[expected])]), ts
    k = 2 * len(QUERIES)
    assert int(r.rows(k, "offset")[0][3]) == 0
    assert int(r.rows(k + 1, "offset")[0][3]) == N
    max_row = r.rows(k + 2, "offset")[0]
    assert (int(max_row[3]), int(max_row[4])) == (N - 1, TS[-1])


def test_log_append_time_topic(bootstrap: str) -> None:
    """On a LogAppendTime topic the broker's time replaces the producer's, for every reader."""
    topic = "ts-append-time"
    create_topics(bootstrap, [topic], 1, {"message.timestamp.type": "LogAppendTime"})
    sent = [Rec(0, b"k%d" % i, b"v%d" % i, BASE_TS + i) for i in range(5)]
    acked = produce_confluent(bootstrap, topic, sent)
    for client in ("confluent", "kafka-python", "aiokafka"):
        got = consume(client, bootstrap, {(topic, 0): 5})[(topic, 0)]
        assert [g.value for g in got] == [s.value for s in sent]
        assert {g.timestamp_type for g in got} == {LOG_APPEND_TIME}, client
        assert all(g.timestamp > BASE_TS + 10_000 for g in got), client
        assert [g.timestamp for g in got] == [a.timestamp for a in acked], client
