"""What the broker's request path counts, in plain Python numbers (no prometheus calls, no locks: only
the broker's event loop writes them; a scrape reads them from another thread, and a counter read one
increment late is fine). ``BrokerCollector`` turns them into metrics at scrape time."""
from __future__ import annotations

import array
import bisect

from tidelake.observability.histogram import LATENCY_BUCKETS, FastHistogram


class TopicTraffic:
    __slots__ = ("bytes_in", "messages_in", "bytes_out", "messages_out")

    def __init__(self) -> None:
        self.bytes_in = self.messages_in = self.bytes_out = self.messages_out = 0


# Request latency per API key lives in two flat lists (a bucket count per key and bound, a sum per key),
# updated inline by the dispatcher: a request's timing is then two list updates, no call, no dict.
MAX_API_KEYS = 128  # Kafka's API keys are below this (keys above it are not timed)
LATENCY_STRIDE = len(LATENCY_BUCKETS) + 1  # the bounds and +Inf


class BrokerStats:
    """Per topic: bytes and messages in (Produce) and out (Fetch); per API: a latency histogram (its count
    is the request count) and errors by error code."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicTraffic] = {}
        # arrays, not lists: an update writes in place into one cache line (no int or float object to allocate),
        # which is what a request pays after a fetch has streamed a megabyte through the cache
        self.latency_counts = array.array("q", bytes(8 * MAX_API_KEYS * LATENCY_STRIDE))
        self.latency_sums = array.array("d", bytes(8 * MAX_API_KEYS))
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> count

    def topic(self, topic: str) -> TopicTraffic:
        """The counters of ``topic`` (created on first use)."""
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = TopicTraffic()
        return t

    def produced(self, topic: str, nbytes: int, messages: int) -> None:
        t = self.topics.get(topic) or self.topic(topic)
        t.bytes_in += nbytes
        t.messages_in += messages

    def fetched(self, topic: str, nbytes: int, messages: int) -> None:
        t = self.topics.get(topic) or self.topic(topic)
        t.bytes_out += nbytes
        t.messages_out += messages

    def request(self, api_key: int, seconds: float) -> None:
        """One request timed (the dispatcher does the same inline)."""
        if api_key < MAX_API_KEYS:
            self.latency_counts[api_key * LATENCY_STRIDE + bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
            self.latency_sums[api_key] += seconds

    def latency(self) -> dict[int, FastHistogram]:
        """Per API key that answered requests: its latency histogram (a copy)."""
        out = {}
        counts = self.latency_counts.tolist()
        for key in range(MAX_API_KEYS):
            row = counts[key * LATENCY_STRIDE:(key + 1) * LATENCY_STRIDE]
            if any(row):
                h = FastHistogram(LATENCY_BUCKETS)
                h.counts, h.total = row, self.latency_sums[key]
                out[key] = h
        return out

    def error(self, api_key: int, code: int, n: int = 1) -> None:
        key = (api_key, code)
        self.errors[key] = self.errors.get(key, 0) + n

    def response_errors(self, api_key: int, response) -> None:
        """Count the error codes a (decoded-object) response carries, at any depth (Kafka's
        ``errorCounts``). Produce and Fetch answer pre-encoded bytes: their handlers count instead."""
        found: dict[int, int] = {}
        _walk_errors(response, found)
        for code, n in found.items():
            self.error(api_key, code, n)


def _walk_errors(obj, found: dict[int, int]) -> None:
    struct = getattr(obj, "_struct", None)
    if struct is None:
        return
    for field in struct._fields:
        value = getattr(obj, field.name, None)
        if field.name == "error_code":
            if value:
                found[value] = found.get(value, 0) + 1
        elif type(value) is list:
            for item in value:
                if hasattr(item, "_struct"):
                    _walk_errors(item, found)
        elif hasattr(value, "_struct"):
            _walk_errors(value, found)
