"""Read a few records of one partition from an offset or a time, for the message browser page.

One assign-only consumer (it never joins or commits, so its group id never shows up as a group) is kept and
re-pointed for each request under a lock: no connection set-up per page. Reading stops at the requested count,
at the partition's end (librdkafka's partition EOF event) or after a bounded wait.
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from tidelake.console.broker_view import BrokerView
from tidelake.console.record_view import RecordView

MAX_RECORDS = 200


@dataclass(frozen=True)
class BrowseResult:
    topic: str
    partition: int
    start_offset: int | None      # where reading started (None: the time is after the last record)
    log_start: int
    log_end: int
    records: list[RecordView]


class MessageBrowser:
    def __init__(self, view: BrokerView, client_config: Mapping[str, Any], read_timeout: float = 2.0):
        from confluent_kafka import Consumer
        self.view = view
        self.read_timeout = read_timeout
        self._consumer = Consumer({**client_config, "group.id": f"tidelake-console-browser-{uuid.uuid4().hex[:8]}",
                                   "enable.auto.commit": False, "enable.auto.offset.store": False,
                                   "enable.partition.eof": True, "fetch.wait.max.ms": 50,
                                   "isolation.level": "read_uncommitted"})
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._consumer.close()

    def browse(self, topic: str, partition: int, offset: int | None = None, timestamp_ms: int | None = None,
               limit: int = 20) -> BrowseResult:
        """Up to ``limit`` records of ``topic``-``partition`` from ``offset`` (default: the last ``limit``), or from
        the first record at or after ``timestamp_ms``."""
        limit = max(1, min(limit, MAX_RECORDS))
        key = (topic, partition)
        log_start = self.view.list_offsets([key], "earliest")[key]
        log_end = self.view.list_offsets([key], "latest")[key]
        if timestamp_ms is not None:
            start = self.view.offset_for_time(topic, partition, timestamp_ms)
        elif offset is None:
            start = max(log_start, log_end - limit)
        else:
            start = min(max(offset, log_start), log_end)
        if start is None or start >= log_end:
            return BrowseResult(topic, partition, start, log_start, log_end, [])
        return BrowseResult(topic, partition, start, log_start, log_end,
                            self._read(topic, partition, start, min(limit, log_end - start)))

    def _read(self, topic: str, partition: int, start: int, count: int) -> list[RecordView]:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition
        records: list[RecordView] = []
        deadline = time.monotonic() + self.read_timeout
        with self._lock:
            self._consumer.assign([TopicPartition(topic, partition, start)])
            try:
                while len(records) < count and time.monotonic() < deadline:
                    batch = self._consumer.consume(num_messages=count - len(records),
                                                   timeout=max(0.01, deadline - time.monotonic()))
                    eof = False
                    for msg in batch:
                        err = msg.error()
                        if err is None:
                            records.append(RecordView.of(msg))
                        elif err.code() == KafkaError._PARTITION_EOF:
                            eof = True
                        else:
                            raise KafkaException(err)
                    if eof:
                        break
            finally:
                self._consumer.unassign()
        return records[:count]
