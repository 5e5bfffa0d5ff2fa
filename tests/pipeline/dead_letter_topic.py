"""Reading back a pipeline's dead-letter topic (one partition) in the tests of its bad records."""
from __future__ import annotations

from confluent_kafka import Consumer, Message, TopicPartition


def dlq_records(bootstrap: str, topic: str) -> list[Message]:
    """Every message of ``topic``'s partition 0, from its start to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        for _ in range(1000):
            msg = consumer.poll(30)
            assert msg is not None, "DLQ not readable"
            if msg.error() is not None:
                return out  # partition EOF
            out.append(msg)
        raise AssertionError(f"{topic} holds more than 1000 messages: not a dead-letter topic of these tests")
    finally:
        consumer.close()
