"""The fault tests' load: an idempotent acks=all producer writing numbered records in a thread, and the
check that every acknowledged record was read back once, at its offset, in order."""
from __future__ import annotations

import threading
import time

from confluent_kafka import Producer


class LoadProducer:
    """An idempotent acks=all producer writing numbered records in a thread until stopped, at most
    ``rate`` records a second (so that reading them all back stays quick on a fast machine); ``config``
    adds or overrides librdkafka settings."""

    def __init__(self, cluster, topic: str, rate: int = 3000, **config):
        self._rate = rate
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed: list = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 2, "message.timeout.ms": 120000,
                                   "topic.metadata.refresh.interval.ms": 1000, **config})
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err, m) -> None:
        if err is None:
            self.acked[(m.partition(), m.offset())] = m.value()
        else:
            self.failed.append(err)

    def _run(self) -> None:
        i = 0
        start = time.monotonic()
        while not self._stop.is_set():
            if i >= self._rate * (time.monotonic() - start):
                self._producer.poll(0.005)
                continue
            try:
                self._producer.produce(self._topic, key=b"k%d" % (i % 31), value=b"v-%08d" % i,
                                       on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                pass
            self._producer.poll(0.001 if i % 50 == 0 else 0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(120) == 0


def check_exactly_once_in_order(got: list, acked: dict) -> None:
    """Every acknowledged record read back at its offset, none twice, and per partition in the order
    the single producer sent them (its values are numbered)."""
    values = [v for _p, _o, v in got]
    assert len(values) == len(set(values)), "a record was written twice"
    at = {(p, o): v for p, o, v in got}
    missing = [k for k in acked if at.get(k) != acked[k]]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    for partition in {p for p, _o, _v in got}:
        seq = [v for p, _o, v in sorted(got) if p == partition]
        assert seq == sorted(seq), f"partition {partition} out of order"
