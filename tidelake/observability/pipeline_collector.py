"""The pipeline's metrics from ``PipelineStats``, built at scrape time."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from tidelake.observability.histogram import FastHistogram
from tidelake.observability.pipeline_stats import PipelineStats


class PipelineCollector(Collector):
    def __init__(self, stats: PipelineStats, pipeline: str, topic: str):
        self.stats = stats
        self.labels = [pipeline]
        self.topic = topic

    def collect(self):
        s, labels = self.stats, self.labels
        for name, doc, value in (
                ("batches", "Batches committed", s.batches),
                ("records", "Kafka records read by committed batches", s.records),
                ("upserts", "Upserted rows committed", s.upserts),
                ("deletes", "Deleted keys committed", s.deletes),
                ("skipped_records", "Records that are not change events, left out (on_error: skip | dead-letter)",
                 s.skipped),
                ("dead_lettered_records", "Records copied to the dead-letter topic", s.dead_lettered)):
            c = CounterMetricFamily(f"tidelake_pipeline_{name}", doc, labels=["pipeline"])
            c.add_metric(labels, value)
            yield c
        yield _histogram("tidelake_pipeline_batch_duration_seconds", "Time of a batch: read, parse, stage, commit",
                         labels, s.batch_seconds)
        yield _histogram("tidelake_pipeline_commit_duration_seconds", "Time of a batch's table commit", labels,
                         s.commit_seconds)
        yield _histogram("tidelake_pipeline_freshness_seconds", "Per batch: its table commit time minus the produce "
                         "timestamp of its oldest record", labels, s.freshness)
        for name, doc, value in (
                ("last_batch_oldest_record_age_seconds", "Last batch: commit time minus its oldest record's "
                 "produce timestamp", s.last_oldest_age),
                ("last_batch_newest_record_age_seconds", "Last batch: commit time minus its newest record's "
                 "produce timestamp", s.last_newest_age),
                ("table_version", "Table version holding the last batch", s.last_version)):
            if value is not None:
                g = GaugeMetricFamily(f"tidelake_pipeline_{name}", doc, labels=["pipeline"])
                g.add_metric(labels, value)
                yield g
        lag = GaugeMetricFamily("tidelake_pipeline_lag_records", "Records between the pipeline's position and the "
                                "log end, per partition, after its last pass",
                                labels=["pipeline", "topic", "partition"])
        for partition, n in sorted(s.lag.items()):
            lag.add_metric(labels + [self.topic, str(partition)], n)
        yield lag


def _histogram(name: str, doc: str, labels: list[str], h: FastHistogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["pipeline"])
    family.add_metric(labels, h.cumulative(), h.total)
    return family
