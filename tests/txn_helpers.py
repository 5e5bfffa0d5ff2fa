"""Helpers for the transaction tests: raw protocol requests and bounded read_committed reads."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelake.protocol.wire_client import WireClient


def raw_request(bootstrap: str, request, version: int, timeout: float = 15.0):
    """Send one request (a kafka-python ApiMessage) on a fresh connection; return the decoded response."""
    with WireClient.connect(bootstrap, timeout=timeout, client_id="txn-test") as c:
        return c.request(request, version)


def check_transaction_outcomes(visible: list, committed: dict[int, list], aborted: dict[int, list],
                               unknown: dict[int, list]) -> None:
    """The values read_committed shows (``visible``) against each transaction's values by its outcome: committed
    ones visible exactly once, aborted ones not at all, unknown ones (a commit whose answer was lost) whole or
    not at all, and no value of no transaction."""
    assert len(visible) == len(set(visible)), "a record is visible twice"
    seen = set(visible)
    for txn, values in committed.items():
        assert set(values) <= seen, f"committed transaction {txn} is missing records"
    for txn, values in aborted.items():
        assert not set(values) & seen, f"aborted transaction {txn} is visible"
    for txn, values in unknown.items():
        assert set(values) <= seen or not set(values) & seen, f"transaction {txn} is partly visible"
    known = {v for vs in (*committed.values(), *unknown.values()) for v in vs}
    assert seen <= known, "records of no transaction are visible"


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        fut.result(30)


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 30.0) -> list[str]:
    """Every value of the topic visible at ``isolation``, read from offset 0 up to the end offset the
    broker reports for that isolation level (LSO for read_committed, HW otherwise). Values sorted."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-test-reader", "isolation.level": isolation,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign(tps)
        got, eof = [], set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF: reached the end offset of this isolation level
                    if m.offset() >= ends[m.partition()]:
                        eof.add(m.partition())
                    continue
                raise RuntimeError(m.error())
            got.append(m.value().decode())
        if len(eof) < partitions:
            raise TimeoutError(f"did not reach the end of {topic}: {sorted(eof)} of {partitions} partitions")
        return sorted(got)
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """End offsets as ListOffsets(latest) answers them at ``isolation`` (LSO vs HW)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-test-offsets", "isolation.level": isolation})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        c.close()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached in {timeout}s")
