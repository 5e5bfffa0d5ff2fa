"""The dead-letter queue of a pipeline (``on_error: dead-letter``), in Kafka Connect's conventions.

A record that is not a change event is copied, key, value and headers unchanged, to the DLQ topic with
Kafka Connect's error headers (``__connect.errors.topic`` / ``.partition`` / ``.offset`` /
``.exception.class.name`` / ``.exception.message``), and the batch goes on without it.

Exactly once with the batch: the DLQ records of a batch are written (idempotent producer, flushed)
before the table commit, and that commit records the DLQ's end offset. A crash between the two leaves
records in the DLQ past the recorded end; the replayed batch reads them back and writes only the
records not already there, so every bad record is in the DLQ once. (In the at-least-once modes a
replayed batch may dead-letter a record twice, as it may write the table twice.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

H_TOPIC, H_PARTITION, H_OFFSET = "__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset"
H_CLASS, H_MESSAGE = "__connect.errors.exception.class.name", "__connect.errors.exception.message"
ERROR_CLASS = "tidelake.spark.decode_errors.BadChangeEvent"
DLQ_PARTITION = 0  # one partition: the records keep the order they were dead-lettered in


@dataclass(frozen=True)
class BadRecord:
    partition: int
    offset: int
    reason: str


class DeadLetterQueue:
    def __init__(self, bootstrap_servers: str, topic: str, source_topic: str, client_config: Mapping[str, str],
                 timeout: float = 30.0):
        self.topic, self.source_topic, self.timeout = topic, source_topic, timeout
        self._config = {**client_config, "bootstrap.servers": bootstrap_servers}

    def ensure_topic(self) -> None:
        admin = AdminClient(self._config)
        if self.topic in admin.list_topics(timeout=self.timeout).topics:
            return
        try:
            admin.create_topics([NewTopic(self.topic, 1)])[self.topic].result(self.timeout)
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise

    def end_offset(self) -> int:
        consumer = Consumer({**self._config, "group.id": f"tidelake-dlq-{self.topic}", "enable.auto.commit": False})
        try:
            return consumer.get_watermark_offsets(TopicPartition(self.topic, DLQ_PARTITION), timeout=self.timeout,
                                                  cached=False)[1]
        finally:
            consumer.close()

    def already_written(self, since: int) -> set[tuple[int, int]]:
        """(source partition, offset) of the DLQ records at offsets >= ``since``: what an earlier,
        uncommitted attempt of this batch already wrote."""
        end = self.end_offset()
        if end <= since:
            return set()
        found: set[tuple[int, int]] = set()
        for msg in self._scan(self.topic, DLQ_PARTITION, since, end):
            headers = dict(msg.headers() or [])
            if headers.get(H_TOPIC, b"").decode() == self.source_topic:
                found.add((int(headers[H_PARTITION]), int(headers[H_OFFSET])))
        return found

    def write(self, bad: list[BadRecord], already: set[tuple[int, int]]) -> int:
        """Copy the bad records not in ``already`` to the DLQ; returns how many were written."""
        todo = sorted({(b.partition, b.offset): b for b in bad if (b.partition, b.offset) not in already}.values(),
                      key=lambda b: (b.partition, b.offset))
        if not todo:
            return 0
        originals = {(m.partition(), m.offset()): m
                     for m in self._read(self.source_topic, [(b.partition, b.offset) for b in todo])}
        producer = Producer({**self._config, "enable.idempotence": True, "acks": "all"})
        failures: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                failures.append(str(err))
        for b in todo:
            m = originals.get((b.partition, b.offset))
            if m is None:
                raise RuntimeError(f"{self.source_topic} partition {b.partition} offset {b.offset}: the record "
                                   "to dead-letter is no longer in the topic")
            headers = list(m.headers() or []) + [
                (H_TOPIC, self.source_topic.encode()), (H_PARTITION, str(b.partition).encode()),
                (H_OFFSET, str(b.offset).encode()), (H_CLASS, ERROR_CLASS.encode()), (H_MESSAGE, b.reason.encode())]
            producer.produce(self.topic, m.value(), m.key(), partition=DLQ_PARTITION, headers=headers,
                             on_delivery=delivered)
        if producer.flush(self.timeout) or failures:
            raise RuntimeError(f"dead-letter queue {self.topic}: {len(failures) or 'some'} record(s) not "
                               f"acknowledged{': ' + failures[0] if failures else ''}")
        return len(todo)

    def _consumer(self) -> Consumer:
        # earliest: a start below the log start (retention) reads from the log start
        return Consumer({**self._config, "group.id": f"tidelake-dlq-{self.topic}", "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})

    def _scan(self, topic: str, partition: int, start: int, end: int):
        """Every record of ``topic``/``partition`` in [start, end)."""
        consumer = self._consumer()
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            while True:
                msg = consumer.poll(self.timeout)
                if msg is None:
                    raise TimeoutError(f"{topic} partition {partition}: not readable within {self.timeout:g}s")
                if msg.error() is not None:
                    if msg.error().code() == msg.error()._PARTITION_EOF:
                        return
                    raise KafkaException(msg.error())
                if msg.offset() >= end:
                    return
                yield msg
        finally:
            consumer.close()

    def _read(self, topic: str, positions: list[tuple[int, int]]):
        """The records at these (partition, offset) positions, read in one pass per partition."""
        consumer = self._consumer()
        try:
            by_partition: dict[int, set[int]] = {}
            for p, o in positions:
                by_partition.setdefault(p, set()).add(o)
            for p, wanted in sorted(by_partition.items()):
                consumer.assign([TopicPartition(topic, p, min(wanted))])
                last, left = max(wanted), set(wanted)
                while left:
                    msg = consumer.poll(self.timeout)
                    if msg is None:
                        raise TimeoutError(f"{topic} partition {p}: offsets {sorted(left)[:5]} not readable "
                                           f"within {self.timeout:g}s")
                    if msg.error() is not None:
                        if msg.error().code() == msg.error()._PARTITION_EOF:
                            raise RuntimeError(f"{topic} partition {p}: offsets {sorted(left)[:5]} are gone")
                        raise KafkaException(msg.error())
                    if msg.offset() in left:
                        left.discard(msg.offset())
                        yield msg
                    if msg.offset() >= last:
                        break
        finally:
            consumer.close()
