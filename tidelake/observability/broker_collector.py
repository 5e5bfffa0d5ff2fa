"""The broker's metrics, built at scrape time.

Traffic, requests, errors and latency come from ``BrokerStats`` (counted on the request path); everything
else from a snapshot of the broker's state taken when Prometheus asks: connections, partitions, log size and segment
count per partition, consumer-group lag (log end offset minus committed offset, as Kafka's exporters compute
it), group rebalances and transactions; the broker takes the snapshot on its event loop, so the scrape sees
one consistent moment and never races an append.

The state is a ``BrokerStateSnapshot`` the broker builds: nothing here knows the broker's objects."""
from __future__ import annotations

from typing import Callable, Mapping

import kafka.errors
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from tidelake.observability.broker_state import BrokerStateSnapshot
from tidelake.observability.broker_stats import BrokerStats


def _error_name(code: int) -> str:
    try:
        return kafka.errors.for_code(code).message
    except Exception:
        return str(code)


class BrokerCollector(Collector):
    def __init__(self, stats: BrokerStats, read: Callable[[], BrokerStateSnapshot | None], api_names: Mapping[int, str]):
        self.stats = stats
        self.read = read
        self.api_names = api_names

    def _api(self, key: int) -> str:
        return self.api_names.get(key, str(key))

    def collect(self):
        s = self.stats
        bytes_in = CounterMetricFamily("tidelake_topic_produced_bytes", "Bytes of record batches produced to a topic",
                                       labels=["topic"])
        msgs_in = CounterMetricFamily("tidelake_topic_produced_messages", "Records produced to a topic",
                                      labels=["topic"])
        bytes_out = CounterMetricFamily("tidelake_topic_fetched_bytes", "Bytes of record batches fetched from a topic",
                                        labels=["topic"])
        msgs_out = CounterMetricFamily("tidelake_topic_fetched_messages", "Offsets fetched from a topic (the records "
                                       "of the batches sent, transaction markers included)", labels=["topic"])
        for topic, t in sorted(list(s.topics.items())):
            bytes_in.add_metric([topic], t.bytes_in)
            msgs_in.add_metric([topic], t.messages_in)
            bytes_out.add_metric([topic], t.bytes_out)
            msgs_out.add_metric([topic], t.messages_out)
        yield from (bytes_in, msgs_in, bytes_out, msgs_out)

        requests = CounterMetricFamily("tidelake_requests", "Requests answered, per API", labels=["api"])
        latency = HistogramMetricFamily("tidelake_request_duration_seconds",
                                        "Time from a request's decoding to its encoded response, per API",
                                        labels=["api"])
        for key, h in sorted(s.latency().items()):
            buckets = h.cumulative()
            requests.add_metric([self._api(key)], buckets[-1][1])
            latency.add_metric([self._api(key)], buckets, h.total)
        errors = CounterMetricFamily("tidelake_request_errors", "Error codes in responses, per API and error",
                                     labels=["api", "error"])
        for (key, code), n in sorted(list(s.errors.items())):
            errors.add_metric([self._api(key), _error_name(code)], n)
        yield from (requests, latency, errors)

        state = self.read()
        if state is None:  # still loading
            return
        yield GaugeMetricFamily("tidelake_connections_active", "Open client connections", value=state.connections)
        partitions = GaugeMetricFamily("tidelake_topic_partitions", "Partitions of a topic", labels=["topic"])
        for topic, n in sorted(state.partitions_per_topic().items()):
            partitions.add_metric([topic], n)
        size = GaugeMetricFamily("tidelake_log_size_bytes", "Bytes of a partition's log segments",
                                 labels=["topic", "partition"])
        segments = GaugeMetricFamily("tidelake_log_segments", "Segments of a partition's log",
                                     labels=["topic", "partition"])
        start = GaugeMetricFamily("tidelake_log_start_offset", "A partition's log start offset",
                                  labels=["topic", "partition"])
        end = GaugeMetricFamily("tidelake_log_end_offset", "A partition's high watermark (the end consumers see)",
                                labels=["topic", "partition"])
        for log in state.logs:
            labels = [log.topic, str(log.partition)]
            size.add_metric(labels, log.size_bytes)
            segments.add_metric(labels, log.segments)
            start.add_metric(labels, log.log_start_offset)
            end.add_metric(labels, log.high_watermark)
        yield from (partitions, size, segments, start, end)

        committed = GaugeMetricFamily("tidelake_group_committed_offset", "A group's committed offset",
                                      labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily("tidelake_group_lag", "Records between a group's committed offset and the log end",
                                labels=["group", "topic", "partition"])
        for row in state.group_lag:
            labels = [row.group, row.topic, str(row.partition)]
            committed.add_metric(labels, row.committed_offset)
            lag.add_metric(labels, row.lag)
        members = GaugeMetricFamily("tidelake_group_members", "Members of a group", labels=["group"])
        for group, n in sorted(state.group_members.items()):
            members.add_metric([group], n)
        rebalances = CounterMetricFamily("tidelake_group_rebalances", "Rebalances completed (new generations or "
                                         "assignment epochs with members) since the broker started",
                                         labels=["group"])
        for group, n in sorted(state.rebalances.items()):
            rebalances.add_metric([group], n)
        yield from (committed, lag, members, rebalances)

        txns = state.transactions
        for what, doc, n in (("begun", "Transactions begun", txns.begun),
                             ("committed", "Transactions committed", txns.committed),
                             ("aborted", "Transactions aborted (timed-out ones included)", txns.aborted),
                             ("timed_out", "Transactions aborted by the broker after their timeout", txns.timed_out)):
            yield CounterMetricFamily(f"tidelake_transactions_{what}", doc, value=n)
        yield GaugeMetricFamily("tidelake_transactions_ongoing", "Transactions open now", value=txns.ongoing)

        replication = state.replication
        if replication is not None:
            yield GaugeMetricFamily("tidelake_under_replicated_partitions",
                                    "Partitions led by this broker whose ISR lacks some of their replicas", value=replication.under_replicated)
            yield CounterMetricFamily("tidelake_isr_shrinks", "ISR shrinks this broker wrote as a leader", value=replication.isr_shrinks)
            yield CounterMetricFamily("tidelake_isr_expands", "ISR expansions this broker wrote as a leader",
                                      value=replication.isr_expands)
            yield CounterMetricFamily("tidelake_leader_elections",
                                      "Times this broker became a partition's leader (a new leader epoch)",
                                      value=replication.leader_elections)
