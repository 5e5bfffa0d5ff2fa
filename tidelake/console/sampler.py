"""The console's background sampler: every ``interval`` seconds it records each topic's end offset (throughput is
its rate), each group's lag in total and per topic, and, with ``--metrics-url``, every metric family of the
broker's Prometheus endpoint. Pages draw their charts from this history."""
from __future__ import annotations

import logging
import threading
import time

from tidelake.console.broker_view import BrokerView, BrokerUnavailable
from tidelake.console.history import History
from tidelake.console.prometheus import MetricValue, ScrapeError, scrape

log = logging.getLogger(__name__)


class Sampler:
    def __init__(self, view: BrokerView, history: History, interval: float, metrics_url: str | None = None):
        self.view, self.history, self.interval, self.metrics_url = view, history, interval, metrics_url
        self.metrics: dict[str, MetricValue] = {}   # the latest scrape, by family name
        self.last_error: str | None = None
        self.samples = 0
        self._scrape_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.view.timeout + 5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self.interval)

    def sample_once(self) -> None:
        now = time.time()
        errors = []
        try:
            self._sample_broker(now)
        except BrokerUnavailable as e:
            errors.append(str(e))
        if self.metrics_url:
            try:
                self._scrape(now)
            except ScrapeError as e:
                errors.append(str(e))
        error = "; ".join(errors) or None
        if error != self.last_error:   # logged when it starts, changes or ends, not at every sample
            if error:
                log.warning("sampling: %s", error)
            else:
                log.warning("sampling works again")
        self.last_error = error
        self.samples += 1

    def _scrape(self, now: float) -> None:
        values = scrape(self.metrics_url, timeout=min(self.interval, self.view.timeout))
        with self._scrape_lock:
            self.metrics = {m.name: m for m in values}
            for m in values:
                self.history.add(("metric", m.name), now, m.value)
                for labels, value in m.series:
                    self.history.add(("metric_series", m.name, labels), now, value)

    def latest_metrics(self) -> dict[str, MetricValue]:
        """The latest scrape; the first page asking before the sampler's first round scrapes now."""
        if self.metrics_url and not self.metrics:
            try:
                self._scrape(time.time())
            except ScrapeError as e:
                self.last_error = str(e)
        return self.metrics

    def _sample_broker(self, now: float) -> None:
        ends = self.view.end_offsets(fresh=True)   # fresh: refreshes the pages' cache too
        per_topic: dict[str, int] = {}
        for (topic, _), end in ends.items():
            per_topic[topic] = per_topic.get(topic, 0) + end
        for topic, end in per_topic.items():
            self.history.add(("topic_end", topic), now, end)
        for group_id in self.view.group_ids():
            g = self.view.group(group_id, fresh=True)   # after end_offsets: its lag uses the new ends
            if g.error:
                continue
            self.history.add(("group_lag", group_id), now, g.lag)
            for topic in g.topics:
                self.history.add(("group_topic_lag", group_id, topic), now,
                                 sum(r.lag for r in g.offsets if r.topic == topic))
