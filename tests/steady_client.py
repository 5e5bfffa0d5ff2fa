"""A client that keeps producing one record and reading it back while a fuzz test attacks the broker
beside it: any error, or any record lost, is the finding. Also the raw Produce/Fetch requests it sends."""
from __future__ import annotations

import threading
import time
from typing import Callable

from kafka.protocol.consumer import FetchRequest as FR
from kafka.protocol.producer import ProduceRequest as PR

from tidelake.protocol.records import Record, build_batch
from tidelake.protocol.wire_client import WireClient


def produce(topic, partition, records, acks=1):
    return PR(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[PR.TopicProduceData(
        name=topic, partition_data=[PR.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def fetch(topic, offset):
    return FR(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
              session_epoch=-1, topics=[FR.FetchTopic(topic=topic, partitions=[FR.FetchTopic.FetchPartition(
                  partition=0, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                  log_start_offset=-1)])], forgotten_topics_data=[], rack_id="")


class SteadyClient(threading.Thread):
    """Produces one record to partition 0 of ``steady`` and reads it back, over and over, on its own
    connection (``login`` runs first on it, e.g. a SASL exchange)."""

    def __init__(self, bootstrap: str, login: Callable[[WireClient], None] | None = None):
        super().__init__(daemon=True)
        self.bootstrap, self.login = bootstrap, login
        self.stop_event = threading.Event()
        self.round_trips = 0
        self.failures: list[str] = []

    def run(self) -> None:
        try:
            with WireClient.connect(self.bootstrap) as c:
                if self.login is not None:
                    self.login(c)
                expected = 0
                while not self.stop_event.is_set():
                    value = b"steady-%d" % expected
                    r = c.request(produce("steady", 0, build_batch([Record(0, 1, None, value)])), 9)
                    p = r.responses[0].partition_responses[0]
                    if (p.error_code, p.base_offset) != (0, expected):
                        self.failures.append(f"produce -> {p.error_code} at {p.base_offset}, expected {expected}")
                        return
                    f = c.request(fetch("steady", expected), 11).responses[0].partitions[0]
                    if f.error_code != 0 or value not in bytes(f.records):
                        self.failures.append(f"fetch at {expected} -> {f.error_code}")
                        return
                    expected += 1
                    self.round_trips += 1
                    time.sleep(0.005)
        except Exception as e:  # noqa: BLE001 - any failure of the steady client is the finding
            self.failures.append(repr(e))
