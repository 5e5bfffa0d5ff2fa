"""The broker's metrics, built at scrape time.

Traffic, requests, errors and latency come from ``BrokerStats`` (counted on the request path); everything
else is read from the broker's state when Prometheus asks: connections, partitions, log size and segment
count per partition, consumer-group lag (log end offset minus committed offset, as Kafka's exporters compute
it), group rebalances and transactions. The state is read on the broker's event loop (``call`` runs a
function there and returns its result), so the scrape sees one consistent moment and never races an append.

The objects read are the broker's (``BrokerContext``), by duck typing: nothing here imports the broker."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import kafka.errors
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from tidelake.observability.broker_stats import BrokerStats


@dataclass
class BrokerState:
    """What one scrape reads from the broker, copied on its loop."""
    connections: int = 0
    partitions: dict[str, int] = field(default_factory=dict)  # topic -> partitions
    logs: list[tuple[str, int, int, int, int, int]] = field(default_factory=list)  # topic, p, bytes, segs, start, end
    lag: list[tuple[str, str, int, int, int]] = field(default_factory=list)  # group, topic, p, committed, lag
    members: dict[str, int] = field(default_factory=dict)  # group -> members
    rebalances: dict[str, int] = field(default_factory=dict)
    transactions: dict[str, int] = field(default_factory=dict)  # begun / committed / aborted / timed_out
    ongoing_transactions: int = 0
    # in a cluster: (under-replicated partitions led here, ISR shrinks, ISR expands, leaderships taken)
    replication: tuple[int, int, int, int] | None = None


def read_state(context: Any, connections: Iterable) -> BrokerState:
    """Copy the scrape's view of the broker (call on the broker's loop)."""
    state = BrokerState(connections=len(connections))
    ends: dict[tuple[str, int], int] = {}
    for (topic, partition), plog in sorted(context.logs.all_logs().items()):
        state.partitions[topic] = state.partitions.get(topic, 0) + 1
        end = plog.high_watermark
        ends[(topic, partition)] = end
        state.logs.append((topic, partition, plog.size_bytes, len(plog.segments), plog.log_start_offset, end))
    groups = context.groups
    for group in sorted(groups.offsets.known_groups()):
        for (topic, partition), om in sorted(groups.offsets.group_offsets(group).items()):
            end = ends.get((topic, partition))
            if end is not None:
                state.lag.append((group, topic, partition, om.offset, max(0, end - om.offset)))
    for group_id, g in list(groups.groups.items()):
        state.members[group_id] = len(g.members)
    state.rebalances = dict(groups.rebalances)
    txns = context.transactions
    state.transactions = dict(txns.counts)
    state.ongoing_transactions = sum(1 for m in txns.transactions.values() if m.state.name == "ONGOING")
    member = context.cluster
    if member is not None:
        rm = member.replicas
        state.replication = (rm.under_replicated(), rm.isr_shrinks, rm.isr_expands, rm.leader_elections)
    return state


def _error_name(code: int) -> str:
    try:
        return kafka.errors.for_code(code).message
    except Exception:
        return str(code)


class BrokerCollector(Collector):
    def __init__(self, stats: BrokerStats, read: Callable[[], BrokerState | None], api_names: Mapping[int, str]):
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
        for topic, n in sorted(state.partitions.items()):
            partitions.add_metric([topic], n)
        size = GaugeMetricFamily("tidelake_log_size_bytes", "Bytes of a partition's log segments",
                                 labels=["topic", "partition"])
        segments = GaugeMetricFamily("tidelake_log_segments", "Segments of a partition's log",
                                     labels=["topic", "partition"])
        start = GaugeMetricFamily("tidelake_log_start_offset", "A partition's log start offset",
                                  labels=["topic", "partition"])
        end = GaugeMetricFamily("tidelake_log_end_offset", "A partition's high watermark (the end consumers see)",
                                labels=["topic", "partition"])
        for topic, p, nbytes, nsegs, lstart, lend in state.logs:
            labels = [topic, str(p)]
            size.add_metric(labels, nbytes)
            segments.add_metric(labels, nsegs)
            start.add_metric(labels, lstart)
            end.add_metric(labels, lend)
        yield from (partitions, size, segments, start, end)

        committed = GaugeMetricFamily("tidelake_group_committed_offset", "A group's committed offset",
                                      labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily("tidelake_group_lag", "Records between a group's committed offset and the log end",
                                labels=["group", "topic", "partition"])
        for group, topic, p, offset, behind in state.lag:
            committed.add_metric([group, topic, str(p)], offset)
            lag.add_metric([group, topic, str(p)], behind)
        members = GaugeMetricFamily("tidelake_group_members", "Members of a group", labels=["group"])
        for group, n in sorted(state.members.items()):
            members.add_metric([group], n)
        rebalances = CounterMetricFamily("tidelake_group_rebalances", "Rebalances completed (new generations or "
                                         "assignment epochs with members) since the broker started",
                                         labels=["group"])
        for group, n in sorted(state.rebalances.items()):
            rebalances.add_metric([group], n)
        yield from (committed, lag, members, rebalances)

        for what, doc in (("begun", "Transactions begun"), ("committed", "Transactions committed"),
                          ("aborted", "Transactions aborted (timed-out ones included)"),
                          ("timed_out", "Transactions aborted by the broker after their timeout")):
            yield CounterMetricFamily(f"tidelake_transactions_{what}", doc, value=state.transactions.get(what, 0))
        yield GaugeMetricFamily("tidelake_transactions_ongoing", "Transactions open now",
                                value=state.ongoing_transactions)

        if state.replication is not None:
            under, shrinks, expands, elections = state.replication
            yield GaugeMetricFamily("tidelake_under_replicated_partitions",
                                    "Partitions led by this broker whose ISR lacks some of their replicas", value=under)
            yield CounterMetricFamily("tidelake_isr_shrinks", "ISR shrinks this broker wrote as a leader", value=shrinks)
            yield CounterMetricFamily("tidelake_isr_expands", "ISR expansions this broker wrote as a leader",
                                      value=expands)
            yield CounterMetricFamily("tidelake_leader_elections",
                                      "Times this broker became a partition's leader (a new leader epoch)",
                                      value=elections)
