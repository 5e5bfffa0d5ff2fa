"""Kafka offset ranges and how a batch's ranges are planned (used by the Kafka source and the pipeline runner).

An offset is always "next offset to read" (Kafka's committed-offset convention). Offsets of several
partitions are a map ``{(topic, partition): offset}``; as JSON they are Spark's Kafka-source layout
``{"topic": {"0": 23, "1": 42}}``, where a *requested* offset may be -2 (earliest) or -1 (latest).

A batch is planned in two steps: :func:`cap_end_offsets` decides how far each partition advances (the
admission control of Spark's Kafka source: ``maxOffsetsPerTrigger`` and the paper's
``maxRatePerPartition`` x batch interval), :func:`plan_ranges` turns start and end into the non-empty
``[start, end)`` ranges, and :func:`group_ranges` spreads them over Spark tasks.
No pyspark and no Kafka client here: planning is pure and tested on its own.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
OffsetMap = dict[TopicPartition, int]


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[start, end)`` of one Kafka partition: one batch's (or one task's) share of it."""
    topic: str
    partition: int
    start: int
    end: int
    # A partition that appeared after the query started: begin at its log start, this is no data loss.
    new_partition: bool = False

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def parse_duration(value: str | int | float, default_unit: str = "s") -> float:
    """'2s', '500ms', '1.5m', '1min', '1h' -> seconds; a bare number is in ``default_unit`` (s or ms)."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) * units[default_unit]
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|min|m|h)?\s*", str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 2s, 500ms, 1m)")
    number, unit = float(match.group(1)), match.group(2) or default_unit
    return number * units[unit]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(t, p): o} -> Spark's {"t": {"p": o}} (partitions sorted numerically)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(value: str | Mapping[str, Mapping[str, int]]) -> OffsetMap:
    """Spark's {"t": {"p": o}} (text or parsed) -> {(t, p): o}."""
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        raise ValueError(f"offsets must be a JSON object like {{\"topic\":{{\"0\":23}}}}, got {value!r}")
    result: OffsetMap = {}
    for topic, parts in data.items():
        if not isinstance(parts, Mapping):
            raise ValueError(f"offsets for topic {topic!r} must be an object of partition -> offset")
        for partition, offset in parts.items():
            result[(topic, int(partition))] = int(offset)
    return result


def cap_end_offsets(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], *,
                    max_total: int | None, max_per_partition: int | None) -> OffsetMap:
    """Admission control: advance each partition towards ``latest`` by at most ``max_per_partition``
    records, and all together by at most ``max_total`` records, shared in proportion to each
    partition's backlog (Spark's maxOffsetsPerTrigger rule)."""
    end = {tp: max(latest[tp], start.get(tp, 0)) for tp in latest}
    if max_per_partition is not None:
        end = {tp: min(e, start.get(tp, 0) + max_per_partition) for tp, e in end.items()}
    if max_total is not None:
        backlog = {tp: e - start.get(tp, 0) for tp, e in end.items()}
        total = sum(backlog.values())
        if total > max_total:
            shares = {tp: (b * max_total) // total for tp, b in backlog.items()}
            # Hand out the rounding remainder one record at a time so the batch is exactly max_total.
            remainder = max_total - sum(shares.values())
            for tp in sorted(backlog, key=lambda tp: backlog[tp] - shares[tp], reverse=True):
                if remainder <= 0:
                    break
                if shares[tp] < backlog[tp]:
                    shares[tp] += 1
                    remainder -= 1
            end = {tp: start.get(tp, 0) + shares[tp] for tp in end}
    return end


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    """Non-empty ranges [start, end) for every partition in ``end`` (a partition new since ``start``
    starts at 0 — the reader moves it up to the log start, it is new, not lost)."""
    ranges = []
    for tp in sorted(end):
        s = start.get(tp, 0)
        e = end[tp]
        if e > s:
            ranges.append(OffsetRange(tp[0], tp[1], s, e, new_partition=tp not in start))
    return ranges


def group_ranges(ranges: list[OffsetRange], *, num_groups: int, min_partitions: int | None) -> list[list[OffsetRange]]:
    """Spread offset ranges over Spark tasks.

    Rule: without ``minPartitions``, Kafka partitions are packed into at most ``num_groups`` groups
    (the Kafka source's ``numInputPartitions``, default the driver's core count), largest range first
    onto the least-loaded group, so each core reads about the same number of records and one consumer
    serves several Kafka partitions. With ``minPartitions`` larger than the number of ranges, big ranges
    are split (as Spark's KafkaOffsetRangeCalculator does) and every piece is its own task.
    """
    if not ranges:
        return []
    if min_partitions and min_partitions > len(ranges):
        total = sum(r.size for r in ranges)
        pieces: list[list[OffsetRange]] = []
        for r in ranges:
            parts = max(1, round(r.size * min_partitions / total))
            step = -(-r.size // parts)
            for s in range(r.start, r.end, step):
                pieces.append([OffsetRange(r.topic, r.partition, s, min(r.end, s + step), r.new_partition)])
        return pieces
    count = max(1, min(num_groups, len(ranges)))
    groups: list[list[OffsetRange]] = [[] for _ in range(count)]
    loads = [0] * count
    for r in sorted(ranges, key=lambda r: r.size, reverse=True):
        i = loads.index(min(loads))
        groups[i].append(r)
        loads[i] += r.size
    return [sorted(g, key=lambda r: (r.topic, r.partition, r.start)) for g in groups if g]
