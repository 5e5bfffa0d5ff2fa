"""Helpers for the transaction tests: raw protocol requests and bounded read_committed reads."""
from __future__ import annotations

import socket
import struct
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def raw_request(bootstrap: str, request, version: int, timeout: float = 15.0):
    """Send one request (a kafka-python ApiMessage) on a fresh connection; return the decoded response."""
    host, port = bootstrap.rsplit(":", 1)
    request.with_header(correlation_id=7, client_id="txn-test")
    data = request.encode(version=version, header=True, framed=True)
    resp_cls = _response_class(type(request))
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(bytes(data))
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        payload = _recv_exact(s, size)
    return resp_cls.decode(payload, version=version, header=True)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def _response_class(req_cls):
    import importlib
    mod = importlib.import_module(req_cls.__module__)
    return getattr(mod, req_cls.__name__.replace("Request", "Response"))


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
