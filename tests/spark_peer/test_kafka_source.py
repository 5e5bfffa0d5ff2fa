"""Spark Structured Streaming's own Kafka source (spark-sql-kafka-0-10, in the peer Spark of jvm/spark-peer/)
reading a tidelake broker: batch and streaming queries, offset ranges, rate limits, headers, read_committed
over an aborted transaction, a consumer group id, and a streaming query that goes on across a broker restart.
One peer SparkSession and one broker for the module."""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from spark_peer.peer_fixtures import BrokerProcess, peer  # noqa: F401  (the module's peer Spark)
from txn_helpers import create_topics

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data")
    b.start()
    yield b
    b.stop()


def produce(bootstrap: str, topic: str, records: list[tuple[int, str, list | None]]) -> None:
    """(partition, value, headers) each, key = value, acknowledged before returning."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for partition, value, headers in records:
        p.produce(topic, value.encode(), key=value.encode(), partition=partition, headers=headers)
    assert p.flush(30) == 0


def source(broker, topic: str, **options) -> dict:
    return {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "startingOffsets": "earliest", **options}


def offsets(rows) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in rows)


def test_batch_reads_exactly_the_offset_range_it_names(peer, broker):
    create_topics(broker.bootstrap, {"range": 2})
    produce(broker.bootstrap, "range", [(p, f"p{p}-{i}", None) for p in (0, 1) for i in range(10)])
    rows = peer.call("kafka_batch", options=source(
        broker, "range", startingOffsets=json.dumps({"range": {"0": 3, "1": -2}}),
        endingOffsets=json.dumps({"range": {"0": 7, "1": -1}})))["rows"]
    assert offsets(rows) == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(10)]
    assert all(r["value"] == r["key"] == f"p{r['partition']}-{r['offset']}" and r["topic"] == "range" for r in rows)


def test_headers_are_read_in_order_with_their_bytes(peer, broker):
    create_topics(broker.bootstrap, {"headers": 1})
    produce(broker.bootstrap, "headers", [(0, "h0", [("trace", b"t-0"), ("n", b"0"), ("trace", b"again")]),
                                          (0, "h1", None), (0, "h2", [("n", b"2")])])
    rows = peer.call("kafka_batch", options=source(broker, "headers", includeHeaders="true"))["rows"]
    got = {r["value"]: [(h["key"], h["value"]) for h in (r["headers"] or [])] for r in rows}
    assert got == {"h0": [("trace", "t-0"), ("n", "0"), ("trace", "again")], "h1": [], "h2": [("n", "2")]}
    plain = peer.call("kafka_batch", options=source(broker, "headers"))["rows"]
    assert "headers" not in plain[0] and len(plain) == 3


def transactions(bootstrap: str, topic: str, outcomes: list[tuple[str, int]]) -> None:
    """One transaction per (outcome, count): 'commit' or 'abort', values '<outcome>-<txn>-<i>'."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-peer-{topic}", "linger.ms": 2})
    p.init_transactions(30)
    for n, (outcome, count) in enumerate(outcomes):
        p.begin_transaction()
        for i in range(count):
            p.produce(topic, f"{outcome}-{n}-{i}".encode(), partition=i % 2)
        p.flush(30)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)


def test_read_committed_never_shows_an_aborted_transaction(peer, broker, tmp_path):
    create_topics(broker.bootstrap, {"txn": 2})
    transactions(broker.bootstrap, "txn", [("commit", 6), ("abort", 6), ("commit", 6)])
    committed = sorted(f"commit-{n}-{i}" for n in (0, 2) for i in range(6))
    aborted = sorted(f"abort-1-{i}" for i in range(6))
    opts = source(broker, "txn", **{"kafka.isolation.level": "read_committed"})
    assert sorted(r["value"] for r in peer.call("kafka_batch", options=opts)["rows"]) == committed
    streamed = peer.call("stream_start", name="txn", options=opts, checkpoint=str(tmp_path / "ck"),
                         trigger={"availableNow": True})
    assert streamed["error"] is None
    assert sorted(r["value"] for r in streamed["rows"]) == committed
    # the same records under read_uncommitted (Spark's default) do include the aborted ones
    everything = sorted(r["value"] for r in peer.call("kafka_batch", options=source(broker, "txn"))["rows"])
    assert everything == sorted(committed + aborted)


def test_stream_takes_at_most_max_offsets_per_trigger_in_each_batch(peer, broker, tmp_path):
    create_topics(broker.bootstrap, {"rate": 2})
    produce(broker.bootstrap, "rate", [(i % 2, f"r{i}", None) for i in range(100)])
    out = peer.call("stream_start", name="rate", options=source(broker, "rate", maxOffsetsPerTrigger="30"),
                    checkpoint=str(tmp_path / "ck"), trigger={"availableNow": True})
    assert out["error"] is None
    assert sorted(r["value"] for r in out["rows"]) == sorted(f"r{i}" for i in range(100))
    nonempty = [b for b in out["batches"] if b]
    assert max(nonempty) <= 30 and len(nonempty) >= 4, out["batches"]


def committed_offsets(bootstrap: str, group: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, 0)], timeout=15)]
    finally:
        c.close()


def test_a_consumer_group_id_reads_from_the_query_offsets_and_leaves_the_group_offsets(peer, broker, tmp_path):
    """Spark's Kafka source uses ``kafka.group.id`` for its consumers but assigns partitions itself and never
    commits: the query reads from its own offsets, and the group's committed offset stays where it was."""
    create_topics(broker.bootstrap, {"grouped": 1})
    produce(broker.bootstrap, "grouped", [(0, f"g{i}", None) for i in range(10)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "spark-peer-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("grouped", 0, 5)], asynchronous=False)
    c.close()
    opts = source(broker, "grouped", **{"kafka.group.id": "spark-peer-group"})
    assert [r["offset"] for r in sorted(peer.call("kafka_batch", options=opts)["rows"], key=lambda r: r["offset"])] \
        == list(range(10))
    out = peer.call("stream_start", name="grouped", options=opts, checkpoint=str(tmp_path / "ck"),
                    trigger={"availableNow": True})
    assert out["error"] is None and sorted(r["offset"] for r in out["rows"]) == list(range(10))
    assert committed_offsets(broker.bootstrap, "spark-peer-group", "grouped") == [5]


def test_a_streaming_query_goes_on_across_a_broker_restart(peer, broker, tmp_path):
    create_topics(broker.bootstrap, {"restart": 2})
    produce(broker.bootstrap, "restart", [(i % 2, f"before-{i}", None) for i in range(20)])
    # the offset fetches retry for longer than the broker takes to come back (default: 3 tries, 1 s apart)
    opts = source(broker, "restart", **{"fetchOffset.numRetries": "120", "fetchOffset.retryIntervalMs": "500"})
    peer.call("stream_start", name="restart", options=opts, checkpoint=str(tmp_path / "ck"),
              trigger={"processingTime": "200 milliseconds"})
    try:
        seen = peer.call("stream_wait", name="restart", rows=20, wait_s=120)
        assert len(seen["rows"]) == 20 and seen["error"] is None, seen["error"]
        broker.stop()
        broker.start()
        produce(broker.bootstrap, "restart", [(i % 2, f"after-{i}", None) for i in range(20)])
        seen = peer.call("stream_wait", name="restart", rows=40, wait_s=300)
        assert seen["error"] is None and seen["active"], seen["error"]
        values = [r["value"] for r in seen["rows"]]
        assert sorted(values) == sorted([f"before-{i}" for i in range(20)] + [f"after-{i}" for i in range(20)])
        assert offsets(seen["rows"]) == [(p, o) for p in (0, 1) for o in range(20)]   # each once, none lost
    finally:
        peer.call("stream_stop", name="restart")
