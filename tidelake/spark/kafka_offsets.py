"""Kafka offset planning for the Spark Kafka source (no pyspark imports; the pipeline runner reuses it).

Offsets are Spark's Kafka-source JSON: ``{"topic": {"0": 23, "1": -1}}`` where, in a *requested*
offset, -2 means earliest and -1 means latest. Resolved offsets (what the stream checkpoints) are
always concrete numbers.

This module knows the option names of Spark's Kafka source (``kafka.bootstrap.servers``, ``subscribe``,
``subscribePattern``, ``assign``, ``startingOffsets``, ``endingOffsets``, ``failOnDataLoss``, ...)
and turns them into per-partition ``[start, end)`` ranges, using confluent-kafka's AdminClient for
metadata and ListOffsets.
"""
from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

EARLIEST = -2
LATEST = -1

# kafka.* options Spark's Kafka source also refuses: the source manages these itself.
_FORBIDDEN_KAFKA_OPTIONS = {
    "auto.offset.reset", "enable.auto.commit", "key.deserializer", "value.deserializer",
    "interceptor.classes",
}

TopicPartition = tuple[str, int]
OffsetMap = dict[TopicPartition, int]


class KafkaSourceError(Exception):
    """A bad option or an unrecoverable condition (data loss, unknown partition, timeout)."""


class DataLossError(KafkaSourceError):
    """Requested offsets are no longer in the log (failOnDataLoss=true)."""


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[start, end)`` of one Kafka partition."""
    topic: str
    partition: int
    start: int
    end: int
    # A partition that appeared after the query started: begin at its log start, this is no data loss.
    new_partition: bool = False

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(t, p): o} -> Spark's {"t": {"p": o}} (partitions sorted numerically)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(value: str | Mapping[str, Mapping[str, int]]) -> OffsetMap:
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        raise KafkaSourceError(f"offsets must be a JSON object like {{\"topic\":{{\"0\":23}}}}, got {value!r}")
    result: OffsetMap = {}
    for topic, parts in data.items():
        if not isinstance(parts, Mapping):
            raise KafkaSourceError(f"offsets for topic {topic!r} must be an object of partition -> offset")
        for partition, offset in parts.items():
            result[(topic, int(partition))] = int(offset)
    return result


def parse_duration_ms(value: str) -> int:
    """'2s', '500ms', '1m', '1500' (ms) -> milliseconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*", str(value))
    if not match:
        raise KafkaSourceError(f"bad duration {value!r}: use e.g. 500ms, 2s, 1m")
    number, unit = float(match.group(1)), match.group(2) or "ms"
    factor = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}[unit]
    return int(number * factor)


def _bool(value: Any, name: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise KafkaSourceError(f"option {name} must be true or false, got {value!r}")


@dataclass
class KafkaSourceOptions:
    """The source's options, parsed and validated (all names as in Spark's Kafka source, plus the paper's
    ``maxRatePerPartition`` with its batch interval ``batchIntervalMs`` / ``batchInterval``)."""
    client_config: dict[str, str]
    subscribe: list[str] | None
    subscribe_pattern: str | None
    assign: list[TopicPartition] | None
    starting_offsets: str  # "earliest" | "latest" | JSON
    ending_offsets: str    # "latest" | JSON
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    max_rate_per_partition: int | None
    batch_interval_ms: int
    min_partitions: int | None
    num_input_partitions: int
    poll_timeout_ms: int
    max_arrow_batch_rows: int
    verify_latest_offsets: bool = True
    # startingTimestamp (one number for every partition) / startingOffsetsByTimestamp (JSON per partition),
    # and the ending forms: epoch ms; they take precedence over startingOffsets/endingOffsets, as in Spark.
    starting_timestamps: str | None = None
    ending_timestamps: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> "KafkaSourceOptions":
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise KafkaSourceError("option kafka.bootstrap.servers is required")
        client_config: dict[str, str] = {}
        for key, value in options.items():
            if key.lower().startswith("kafka."):
                name = key[len("kafka."):]
                if name.lower() in _FORBIDDEN_KAFKA_OPTIONS:
                    raise KafkaSourceError(
                        f"kafka.{name} is not supported: the source manages offsets itself "
                        "(use startingOffsets / failOnDataLoss)")
                client_config[name] = str(value)
        client_config["bootstrap.servers"] = bootstrap

        strategies = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
        if len(strategies) != 1:
            raise KafkaSourceError("exactly one of subscribe, subscribePattern, assign must be given")
        subscribe = subscribe_pattern = assign = None
        if "subscribe" in strategies:
            subscribe = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
            if not subscribe:
                raise KafkaSourceError("subscribe lists no topic")
        elif "subscribepattern" in strategies:
            subscribe_pattern = opts["subscribepattern"]
            re.compile(subscribe_pattern)
        else:
            try:
                raw = json.loads(opts["assign"])
                assign = sorted((t, int(p)) for t, parts in raw.items() for p in parts)
            except (ValueError, AttributeError, TypeError) as exc:
                raise KafkaSourceError(f'assign must be JSON like {{"topicA":[0,1]}}: {exc}') from None

        starting = opts.get("startingoffsets", "latest" if streaming else "earliest").strip()
        ending = opts.get("endingoffsets", "latest").strip()
        if streaming and "endingoffsets" in opts:
            raise KafkaSourceError("endingOffsets is for batch queries only")
        if not streaming and starting.lower() == "latest":
            raise KafkaSourceError("startingOffsets=latest is not valid for batch queries")
        if not streaming and ending.lower() == "earliest":
            raise KafkaSourceError("endingOffsets=earliest is not valid for batch queries")
        for name, value in (("startingOffsets", starting), ("endingOffsets", ending)):
            if value.lower() not in ("earliest", "latest"):
                parsed = offsets_from_json(value)
                if name == "endingOffsets" and any(o == EARLIEST for o in parsed.values()):
                    raise KafkaSourceError("endingOffsets cannot use -2 (earliest)")
                if name == "startingOffsets" and not streaming and any(o == LATEST for o in parsed.values()):
                    raise KafkaSourceError("startingOffsets cannot use -1 (latest) in batch queries")

        def positive(name: str) -> int | None:
            if name.lower() not in opts:
                return None
            number = int(opts[name.lower()])
            if number <= 0:
                raise KafkaSourceError(f"option {name} must be positive, got {number}")
            return number

        if "batchintervalms" in opts:
            interval_ms = int(opts["batchintervalms"])
        elif "batchinterval" in opts:
            interval_ms = parse_duration_ms(opts["batchinterval"])
        else:
            interval_ms = 1000
        if interval_ms <= 0:
            raise KafkaSourceError("batch interval must be positive")

        return cls(
            client_config=client_config,
            subscribe=subscribe, subscribe_pattern=subscribe_pattern, assign=assign,
            starting_offsets=starting, ending_offsets=ending,
            starting_timestamps=opts.get("startingtimestamp") or opts.get("startingoffsetsbytimestamp"),
            ending_timestamps=opts.get("endingtimestamp") or opts.get("endingoffsetsbytimestamp"),
            fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
            include_headers=_bool(opts.get("includeheaders", "false"), "includeHeaders"),
            max_offsets_per_trigger=positive("maxOffsetsPerTrigger"),
            max_rate_per_partition=positive("maxRatePerPartition"),
            batch_interval_ms=interval_ms,
            min_partitions=positive("minPartitions"),
            num_input_partitions=positive("numInputPartitions") or (os.cpu_count() or 1),
            poll_timeout_ms=int(opts.get("kafkaconsumer.polltimeoutms", opts.get("polltimeoutms", "120000"))),
            max_arrow_batch_rows=positive("maxArrowBatchRows") or 10_000,
            verify_latest_offsets=_bool(opts.get("verifylatestoffsets", "true"), "verifyLatestOffsets"),
        )

    def consumer_config(self) -> dict[str, Any]:
        """librdkafka consumer settings for reading exact ranges: manual assign, no commits, no reset."""
        config: dict[str, Any] = {
            # librdkafka insists on a group id even for assign(); nothing is committed under it.
            "group.id": f"tidelake-spark-source-{uuid.uuid4().hex[:12]}",
            # Kafka's Java default (and Spark's): transactional records are visible unless asked otherwise.
            "isolation.level": "read_uncommitted",
            # The reader knows where its ranges end; a long poll only delays the end-of-partition answer
            # for a range whose last offsets hold no record (transaction markers, compacted records).
            "fetch.wait.max.ms": 100,
        }
        config.update(self.client_config)
        config.update({
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        })
        return config

    def admin_config(self) -> dict[str, Any]:
        # Only connection/security settings matter to the admin client; consumer-only keys would be refused.
        consumer_only = {"group.id", "isolation.level", "fetch.min.bytes", "fetch.max.bytes",
                         "fetch.wait.max.ms", "max.partition.fetch.bytes", "session.timeout.ms",
                         "heartbeat.interval.ms", "group.instance.id", "partition.assignment.strategy",
                         "group.protocol", "group.remote.assignor", "check.crcs", "queued.min.messages",
                         "queued.max.messages.kbytes", "fetch.message.max.bytes"}
        return {k: v for k, v in self.client_config.items() if k not in consumer_only}

    @property
    def isolation_level(self) -> str:
        return self.client_config.get("isolation.level", "read_uncommitted")


class KafkaOffsetReader:
    """Driver-side metadata and offset lookups (one AdminClient, created lazily, never pickled)."""

    def __init__(self, options: KafkaSourceOptions, timeout_s: float = 30.0):
        self.options = options
        self.timeout_s = timeout_s
        self._admin = None
        self._probe = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "timeout_s": self.timeout_s, "_admin": None, "_probe": None}

    @property
    def admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient(self.options.admin_config())
        return self._admin

    def close(self) -> None:
        self._admin = None  # AdminClient has no close(); dropping it stops its threads
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def partitions(self) -> list[TopicPartition]:
        """The Kafka partitions the subscription covers right now."""
        if self.options.assign is not None:
            return list(self.options.assign)
        metadata = self.admin.list_topics(timeout=self.timeout_s)
        if self.options.subscribe is not None:
            wanted = set(self.options.subscribe)
            missing = wanted - set(metadata.topics)
            if missing:
                # A subscribed topic that does not exist yet simply has no partitions (as in Spark).
                wanted -= missing
        else:
            pattern = re.compile(self.options.subscribe_pattern or "")
            wanted = {t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__")}
        result = []
        for topic in sorted(wanted):
            topic_md = metadata.topics[topic]
            if topic_md.error is not None:
                raise KafkaSourceError(f"metadata for topic {topic}: {topic_md.error}")
            result.extend((topic, p) for p in sorted(topic_md.partitions))
        return result

    def list_offsets(self, partitions: list[TopicPartition], which: str) -> OffsetMap:
        """Earliest (log start) or latest (high watermark, or LSO under read_committed) offsets."""
        if not partitions:
            return {}
        from confluent_kafka import IsolationLevel, TopicPartition as KafkaTP
        from confluent_kafka.admin import OffsetSpec
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        isolation = (IsolationLevel.READ_COMMITTED if self.options.isolation_level == "read_committed"
                     else IsolationLevel.READ_UNCOMMITTED)
        request = {KafkaTP(t, p): spec for t, p in partitions}
        futures = self.admin.list_offsets(request, isolation_level=isolation,
                                          request_timeout=self.timeout_s)
        result: OffsetMap = {}
        for tp, future in futures.items():
            try:
                info = future.result(timeout=self.timeout_s)
            except Exception as exc:  # KafkaException carrying the broker's error
                raise KafkaSourceError(f"ListOffsets({which}) for {tp.topic}-{tp.partition}: {exc}") from exc
            result[(tp.topic, tp.partition)] = info.offset
        if which == "latest" and self.options.verify_latest_offsets:
            result = self._verify_end_offsets(result)
        return result

    def _verify_end_offsets(self, listed: OffsetMap) -> OffsetMap:
        """Check ListOffsets(latest) against what a Fetch at that offset reports.

        Some Kafka-compatible brokers answer ListOffsets(latest) with the last batch's base offset + 1
        instead of the log end (Tansu 0.x does); trusting that would silently drop the tail of every
        batch. One Fetch from the listed offset ends in partition EOF at the true end (the high
        watermark, or the LSO under read_committed) — on a correct broker at once, with no records.
        """
        from confluent_kafka import KafkaError, TopicPartition as KafkaTP
        if self._probe is None:
            from confluent_kafka import Consumer
            config = self.options.consumer_config()
            config["fetch.wait.max.ms"] = 10
            self._probe = Consumer(config)
        probe = self._probe
        result = dict(listed)
        waiting = set(listed)
        probe.assign([KafkaTP(t, p, o) for (t, p), o in listed.items()])
        try:
            deadline = time.monotonic() + self.timeout_s
            while waiting and time.monotonic() < deadline:
                for message in probe.consume(num_messages=10_000, timeout=0.2):
                    key = (message.topic(), message.partition())
                    if key not in waiting:
                        continue
                    error = message.error()
                    if error is None:
                        result[key] = max(result[key], message.offset() + 1)
                    elif error.code() == KafkaError._PARTITION_EOF:
                        result[key] = max(result[key], message.offset())
                        waiting.discard(key)
                    elif error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                        waiting.discard(key)  # e.g. the log was truncated meanwhile: keep the listed offset
                    else:
                        raise KafkaSourceError(f"probing the end of {key[0]}-{key[1]}: {error}")
            if waiting:
                raise KafkaSourceError(f"no end-of-partition answer within {self.timeout_s}s for {sorted(waiting)}")
        finally:
            probe.unassign()
        return result

    def offsets_for_times(self, timestamps: str, partitions: list[TopicPartition]) -> OffsetMap:
        """Per partition, the first offset whose timestamp is >= the given epoch ms (a single number for all
        partitions, or JSON ``{"t":{"0":1700000000000}}``); no such record: the latest offset.
        Partitions a JSON spec does not name start at ``latest``."""
        from confluent_kafka import IsolationLevel, TopicPartition as KafkaTP
        from confluent_kafka.admin import OffsetSpec
        text = str(timestamps).strip()
        by_partition = ({tp: int(text) for tp in partitions} if text.lstrip("-").isdigit()
                        else offsets_from_json(text))
        unknown = set(by_partition) - set(partitions)
        if unknown:
            raise KafkaSourceError(f"timestamps name partitions the subscription does not cover: {sorted(unknown)}")
        latest = self.list_offsets(partitions, "latest")
        if not by_partition:
            return latest
        isolation = (IsolationLevel.READ_COMMITTED if self.options.isolation_level == "read_committed"
                     else IsolationLevel.READ_UNCOMMITTED)
        request = {KafkaTP(t, p): OffsetSpec.for_timestamp(ts) for (t, p), ts in by_partition.items()}
        futures = self.admin.list_offsets(request, isolation_level=isolation, request_timeout=self.timeout_s)
        result = dict(latest)
        for tp, future in futures.items():
            try:
                offset = future.result(timeout=self.timeout_s).offset
            except Exception as exc:
                raise KafkaSourceError(f"ListOffsets(timestamp) for {tp.topic}-{tp.partition}: {exc}") from exc
            if offset >= 0:
                result[(tp.topic, tp.partition)] = min(offset, latest[(tp.topic, tp.partition)])
        return result

    def resolve(self, spec: str, partitions: list[TopicPartition], *, default: str,
                timestamps: str | None = None) -> OffsetMap:
        """Turn "earliest" / "latest" / JSON (with -2/-1) into concrete offsets for ``partitions``
        (or, given ``timestamps``, look the offsets up by time).

        Partitions not named in a JSON spec get ``default`` ("earliest" or "latest").
        """
        if timestamps is not None:
            return self.offsets_for_times(timestamps, partitions)
        if spec.lower() in ("earliest", "latest"):
            return self.list_offsets(partitions, spec.lower())
        requested = offsets_from_json(spec)
        unknown = set(requested) - set(partitions)
        if unknown:
            raise KafkaSourceError(f"offsets name partitions the subscription does not cover: {sorted(unknown)}")
        need_earliest = [tp for tp in partitions if requested.get(tp, EARLIEST if default == "earliest" else LATEST) == EARLIEST]
        need_latest = [tp for tp in partitions if requested.get(tp, EARLIEST if default == "earliest" else LATEST) == LATEST]
        resolved = {tp: o for tp, o in requested.items() if o >= 0}
        resolved.update(self.list_offsets(need_earliest, "earliest"))
        resolved.update(self.list_offsets(need_latest, "latest"))
        return resolved


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
    """Spread offset ranges over Spark input partitions.

    Rule: without ``minPartitions``, Kafka partitions are packed into at most ``numInputPartitions``
    groups (default: the driver's core count), largest range first onto the least-loaded group, so each
    core reads about the same number of records and one consumer serves several Kafka partitions.
    With ``minPartitions`` larger than the number of ranges, big ranges are split (as Spark's
    KafkaOffsetRangeCalculator does) and every piece is its own input partition.
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
