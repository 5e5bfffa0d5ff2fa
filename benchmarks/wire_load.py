"""A lean Kafka load generator for broker benchmarks: raw Produce and Fetch requests over a socket.

Why: on a 2-core machine a librdkafka client in Python spends ~0.5 µs-1 µs of Python per message
(building the produce dicts, the Message objects on consume); with 100 B messages three such client
processes need more CPU than the broker, so the benchmark measured the clients. This generator
does per-request work only: the producer sends pre-encoded RecordBatch v2 frames (built once with
the real record codec, CRC-32C included; only the correlation id changes per request), the consumer
walks the fetched record batches' 61-byte headers to count records and find the next offset. Both
speak plain Kafka (Produce v7, Fetch v7, non-flexible) so they work unchanged against any broker,
and they check every partition error code, so a broker that rejects or drops data is caught.
"""
from __future__ import annotations

import os
import socket
import struct
import time

from tidelake.protocol.records import Record, build_batch

PRODUCE_VERSION = 7
FETCH_VERSION = 7
CLIENT_ID = b"tidelake-wire-load"
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def _str(s: bytes) -> bytes:
    return _I16.pack(len(s)) + s


def _request_header(api_key: int, version: int) -> bytes:
    # correlation id placeholder (patched per request) at offset 4 of the frame body
    return struct.pack(">hhi", api_key, version, 0) + _str(CLIENT_ID)


def records_per_batch(size: int) -> int:
    """About what librdkafka builds with batch.size=1 MB, linger 5 ms at these rates: up to 1000
    records, at most ~1 MB."""
    return max(1, min(1000, (1 << 20) // (size + 16)))


def build_produce_frame(topic: str, partition: int, acks: int, size: int, timeout_ms: int = 30_000) -> tuple[bytearray, int]:
    """One Produce v7 request frame carrying one batch of `records_per_batch(size)` records of
    `size` random bytes each; returns (frame, records in it)."""
    n = records_per_batch(size)
    payload = os.urandom(size)
    now = int(time.time() * 1000)
    batch = build_batch([Record(offset=i, timestamp=now, key=None, value=payload, headers=[]) for i in range(n)])
    body = (_request_header(0, PRODUCE_VERSION) + _I16.pack(-1)  # transactional_id: null
            + _I16.pack(acks) + _I32.pack(timeout_ms)
            + _I32.pack(1) + _str(topic.encode()) + _I32.pack(1) + _I32.pack(partition)
            + _I32.pack(len(batch)) + batch)
    return bytearray(_I32.pack(len(body)) + body), n


class Connection:
    def __init__(self, bootstrap: str) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(64 << 20)
        self.view = memoryview(self.buf)

    def recv_frame(self) -> memoryview:
        """The next response frame (without its size), valid until the next call."""
        self._recv_into(0, 4)
        n = _I32.unpack_from(self.buf, 0)[0]
        if n > len(self.buf):
            self.buf = bytearray(n)
            self.view = memoryview(self.buf)
        self._recv_into(0, n)
        return self.view[:n]

    def _recv_into(self, pos: int, n: int) -> None:
        end = pos + n
        while pos < end:
            got = self.sock.recv_into(self.view[pos:end])
            if not got:
                raise ConnectionError("broker closed the connection")
            pos += got

    def close(self) -> None:
        self.sock.close()


def _produce_errors(frame: memoryview) -> list[int]:
    """Partition error codes of a Produce v7 response (one topic, one partition here)."""
    pos = 4  # correlation id
    errors = []
    for _ in range(_I32.unpack_from(frame, pos)[0]):
        pos += 4
        pos += 2 + _I16.unpack_from(frame, pos)[0]
        nparts = _I32.unpack_from(frame, pos)[0]
        pos += 4
        for _ in range(nparts):
            errors.append(_I16.unpack_from(frame, pos + 4)[0])
            pos += 4 + 2 + 8 + 8 + 8  # index, error, base offset, log append time, log start offset
    return errors


def produce(bootstrap: str, topic: str, partition: int, acks: int, size: int, count: int,
            in_flight: int = 5) -> dict:
    """Send whole batches until at least `count` records are acknowledged (acks=0 is not used here).
    Returns records acknowledged and error responses seen."""
    frame, per_batch = build_produce_frame(topic, partition, acks, size)
    requests = -(-count // per_batch)
    conn = Connection(bootstrap)
    sent = done = errors = 0
    try:
        while done < requests:
            while sent < requests and sent - done < in_flight:
                _I32.pack_into(frame, 8, sent)  # correlation id: after size(4), api key(2), version(2)
                conn.sock.sendall(frame)
                sent += 1
            resp = conn.recv_frame()
            if _I32.unpack_from(resp, 0)[0] != done:
                raise RuntimeError("responses out of order")
            errors += sum(1 for e in _produce_errors(resp) if e != 0)
            done += 1
    finally:
        conn.close()
    return {"count": (requests - errors) * per_batch, "bytes": (requests - errors) * per_batch * size,
            "errors": errors}


def _fetch_frame(topic: str, partition: int, offset: int, correlation_id: int, max_wait_ms: int,
                 partition_max_bytes: int, max_bytes: int) -> bytes:
    body = (struct.pack(">hhi", 1, FETCH_VERSION, correlation_id) + _str(CLIENT_ID)
            + struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, 0)  # replica, wait, min bytes, max bytes, isolation
            + struct.pack(">ii", 0, -1)  # session id 0, epoch -1: a full fetch, no session
            + _I32.pack(1) + _str(topic.encode()) + _I32.pack(1)
            + struct.pack(">iqqi", partition, offset, -1, partition_max_bytes)
            + _I32.pack(0))  # forgotten topics
    return _I32.pack(len(body)) + body


def _walk_fetch(frame: memoryview) -> tuple[int, int, int, int]:
    """(error code, records, record bytes, next offset or -1) of a one-partition Fetch v7 response,
    counting only whole batches (a fetch may end in a partial one)."""
    pos = 4 + 4 + 2 + 4  # correlation id, throttle, error, session id
    if _I32.unpack_from(frame, pos)[0] != 1:
        return -1, 0, 0, -1
    pos += 4
    pos += 2 + _I16.unpack_from(frame, pos)[0]
    pos += 4  # partitions count (1)
    error = _I16.unpack_from(frame, pos + 4)[0]
    pos += 4 + 2 + 8 + 8 + 8
    n_aborted = _I32.unpack_from(frame, pos)[0]
    pos += 4 + max(n_aborted, 0) * 16
    size = _I32.unpack_from(frame, pos)[0]
    pos += 4
    end = pos + max(size, 0)
    records = nbytes = 0
    next_offset = -1
    while pos + 61 <= end:
        base = _I64.unpack_from(frame, pos)[0]
        batch_len = _I32.unpack_from(frame, pos + 8)[0]
        if pos + 12 + batch_len > end:
            break
        last_delta = _I32.unpack_from(frame, pos + 23)[0]
        n = _I32.unpack_from(frame, pos + 57)[0]
        records += n
        nbytes += batch_len + 12
        next_offset = base + last_delta + 1
        pos += 12 + batch_len
    return error, records, nbytes, next_offset


def consume(bootstrap: str, topic: str, partition: int, count: int, payload_size: int,
            partition_max_bytes: int = 1 << 20, max_bytes: int = 50 << 20, deadline_s: float = 600) -> dict:
    """Fetch from offset 0 until `count` records were read (one request in flight, as a consumer)."""
    conn = Connection(bootstrap)
    offset = got = cid = 0
    errors = 0
    deadline = time.monotonic() + deadline_s
    try:
        while got < count and time.monotonic() < deadline:
            conn.sock.sendall(_fetch_frame(topic, partition, offset, cid, 100, partition_max_bytes, max_bytes))
            resp = conn.recv_frame()
            cid += 1
            error, n, _nbytes, nxt = _walk_fetch(resp)
            if error:
                errors += 1
                continue
            if nxt > offset:
                got += n
                offset = nxt
    finally:
        conn.close()
    return {"count": got, "bytes": got * payload_size, "errors": errors}
