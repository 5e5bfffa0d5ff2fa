"""A lean Kafka load generator for broker benchmarks: raw Produce and Fetch requests over a socket.

Why: on a 2-core machine a librdkafka client in Python spends ~0.5 µs-1 µs of Python per message
(building the produce dicts, the Message objects on consume); with 100 B messages three such client
processes need more CPU than the broker, so the benchmark measured the clients. This generator
does per-request work only: the producer sends one pre-encoded Produce frame (one RecordBatch v2
built with the real record codec, CRC-32C included; only the correlation id changes per request),
the consumer reads the fetched batches' headers to count records and find the next offset. Requests
and responses go through tidelake's WireClient and kafka-python's codecs (Produce v7, Fetch v7), so
they work unchanged against any broker, and every partition error code is checked, so a broker that
rejects or drops data is caught.
"""
from __future__ import annotations

import os
import struct
import time

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from tidelake.protocol.records import HEADER_SIZE, Record, build_batch, parse_header
from tidelake.protocol.wire_client import WireClient

PRODUCE_VERSION = 7
FETCH_VERSION = 7
_CORRELATION_ID_AT = 8  # in a request frame: size (4), api key (2), api version (2), correlation id


def records_per_batch(size: int) -> int:
    """About what librdkafka builds with batch.size=1 MB, linger 5 ms at these rates: up to 1000
    records, at most ~1 MB."""
    return max(1, min(1000, (1 << 20) // (size + 16)))


def _produce_request(topic: str, partition: int, acks: int, size: int, timeout_ms: int = 30_000):
    """A Produce request carrying one batch of `records_per_batch(size)` records of `size` random bytes
    each; returns (request, records in it)."""
    n = records_per_batch(size)
    payload = os.urandom(size)
    now = int(time.time() * 1000)
    batch = build_batch([Record(offset=i, timestamp=now, key=None, value=payload, headers=[]) for i in range(n)])
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=batch)])]), n


def produce(bootstrap: str, topic: str, partition: int, acks: int, size: int, count: int,
            in_flight: int = 5) -> dict:
    """Send whole batches until at least `count` records are acknowledged (acks=0 is not used here).
    Returns records acknowledged and error responses seen."""
    request, per_batch = _produce_request(topic, partition, acks, size)
    requests = -(-count // per_batch)
    sent = done = errors = 0
    with WireClient.connect(bootstrap, timeout=60) as client:
        # encoded once: re-encoding a 1 MB request per send would make the client the bottleneck again
        frame = bytearray(client.encode(request, PRODUCE_VERSION, correlation_id=0))
        while done < requests:
            while sent < requests and sent - done < in_flight:
                struct.pack_into(">i", frame, _CORRELATION_ID_AT, sent)
                client.send_raw(frame)
                sent += 1
            response = client.read_response(request, PRODUCE_VERSION, done)  # checks the correlation id
            errors += sum(1 for t in response.responses for p in t.partition_responses if p.error_code != 0)
            done += 1
    return {"count": (requests - errors) * per_batch, "bytes": (requests - errors) * per_batch * size,
            "errors": errors}


def _whole_batches(records) -> tuple[int, int]:
    """(records, next offset or -1) over the whole batches of a fetched record set; a fetch may end
    in a partial batch, which is left for the next fetch."""
    pos, end, n, next_offset = 0, len(records), 0, -1
    while pos + HEADER_SIZE <= end:
        h = parse_header(records, pos)
        if pos + h.size > end:
            break
        n += h.records_count
        next_offset = h.last_offset + 1
        pos += h.size
    return n, next_offset


def consume(bootstrap: str, topic: str, partition: int, count: int, payload_size: int,
            partition_max_bytes: int = 1 << 20, max_bytes: int = 50 << 20, deadline_s: float = 600) -> dict:
    """Fetch from offset 0 until `count` records were read (one request in flight, as a consumer)."""
    offset = got = errors = 0
    deadline = time.monotonic() + deadline_s
    with WireClient.connect(bootstrap, timeout=60) as client:
        while got < count and time.monotonic() < deadline:
            response = client.request(FetchRequest(
                replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                session_id=0, session_epoch=-1, forgotten_topics_data=[],
                topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchTopic.FetchPartition(
                    partition=partition, fetch_offset=offset, log_start_offset=-1,
                    partition_max_bytes=partition_max_bytes)])]), FETCH_VERSION)
            for t in response.responses:
                for p in t.partitions:
                    if p.error_code:
                        errors += 1
                        continue
                    n, nxt = _whole_batches(p.records or b"")
                    if nxt > offset:
                        got += n
                        offset = nxt
    return {"count": got, "bytes": got * payload_size, "errors": errors}
