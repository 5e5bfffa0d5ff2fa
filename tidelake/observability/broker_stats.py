"""What the broker's request path counts, in plain Python numbers (no prometheus calls, no locks: only
the broker's event loop writes them; a scrape reads them from another thread, and a counter read one
increment late is fine). ``BrokerCollector`` turns them into metrics at scrape time."""
from __future__ import annotations

from tidelake.observability.histogram import FastHistogram


class TopicTraffic:
    __slots__ = ("bytes_in", "messages_in", "bytes_out", "messages_out")

    def __init__(self) -> None:
        self.bytes_in = self.messages_in = self.bytes_out = self.messages_out = 0


class BrokerStats:
    """Per topic: bytes and messages in (Produce) and out (Fetch); per API: requests, a latency histogram,
    and errors by error code."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicTraffic] = {}
        self.latency: dict[int, FastHistogram] = {}  # api key -> seconds per request
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> count

    def _topic(self, topic: str) -> TopicTraffic:
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = TopicTraffic()
        return t

    def produced(self, topic: str, nbytes: int, messages: int) -> None:
        t = self.topics.get(topic) or self._topic(topic)
        t.bytes_in += nbytes
        t.messages_in += messages

    def fetched(self, topic: str, nbytes: int, messages: int) -> None:
        t = self.topics.get(topic) or self._topic(topic)
        t.bytes_out += nbytes
        t.messages_out += messages

    def request(self, api_key: int, seconds: float) -> None:
        h = self.latency.get(api_key)
        if h is None:
            h = self.latency[api_key] = FastHistogram()
        h.observe(seconds)

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
