"""Per-stage lag and freshness of ``pipeline serve``'s graph, built at scrape time from the statuses it last
computed (objects with ``name``, ``lag``, ``lag_seconds``, ``freshness_seconds``, ``consumed``,
``upstream_position``: duck typed, this package imports no spark module)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class StageCollector(Collector):
    def __init__(self, statuses: Callable[[], Iterable[Any]]):
        self.statuses = statuses

    def collect(self):
        families = {
            "lag": GaugeMetricFamily("tidelake_stage_lag", "Upstream versions (records, for a Kafka stage) not yet "
                                     "consumed", labels=["stage"]),
            "lag_seconds": GaugeMetricFamily("tidelake_stage_lag_seconds", "How long the oldest unconsumed "
                                             "upstream commit has waited", labels=["stage"]),
            "freshness_seconds": GaugeMetricFamily("tidelake_stage_freshness_seconds", "Age of the newest upstream "
                                                   "data the stage's sink holds (0 when caught up)",
                                                   labels=["stage"]),
            "consumed": GaugeMetricFamily("tidelake_stage_consumed_position", "Upstream version (summed offsets) "
                                          "the sink's last commit recorded", labels=["stage"]),
            "upstream_position": GaugeMetricFamily("tidelake_stage_upstream_position", "Upstream's latest version "
                                                   "(summed log end offsets)", labels=["stage"]),
        }
        for s in self.statuses():
            for family, value in ((families["lag"], s.lag), (families["lag_seconds"], s.lag_seconds),
                                  (families["freshness_seconds"], s.freshness_seconds),
                                  (families["consumed"], s.consumed),
                                  (families["upstream_position"], s.upstream_position)):
                if value is not None:
                    family.add_metric([s.name], float(value))
        yield from families.values()
