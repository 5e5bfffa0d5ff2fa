"""Driver-side Kafka offset lookups: the partitions a subscription covers and their earliest / latest
(or by-time) offsets, through confluent-kafka's AdminClient. Used by the Kafka source's planning and by
the pipeline runner (the paper's M and N). No pyspark imports.
"""
from __future__ import annotations

import re
import time

from tidelake.spark.kafka_options import KafkaSourceError, KafkaSourceOptions, parse_offsets_json
from tidelake.spark.offset_range import EARLIEST, LATEST, OffsetMap, TopicPartition


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

    def __enter__(self) -> "KafkaOffsetReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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
            # An empty fetch at the end answers (almost) at once with the end; 1 ms, not 0: with 0 some brokers
            # (Tansu) never let the consumer see the partition end.
            config["fetch.wait.max.ms"] = 1
            self._probe = Consumer(config)
        probe = self._probe
        result = dict(listed)
        waiting = set(listed)
        probe.assign([KafkaTP(t, p, o) for (t, p), o in listed.items()])
        try:
            deadline = time.monotonic() + self.timeout_s
            while waiting and time.monotonic() < deadline:
                # consume() returns once it has num_messages events (or at the timeout): one EOF per partition.
                for message in probe.consume(num_messages=len(waiting), timeout=0.2):
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
                        else parse_offsets_json(text))
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
        requested = parse_offsets_json(spec)
        unknown = set(requested) - set(partitions)
        if unknown:
            raise KafkaSourceError(f"offsets name partitions the subscription does not cover: {sorted(unknown)}")
        need_earliest = [tp for tp in partitions if requested.get(tp, EARLIEST if default == "earliest" else LATEST) == EARLIEST]
        need_latest = [tp for tp in partitions if requested.get(tp, EARLIEST if default == "earliest" else LATEST) == LATEST]
        resolved = {tp: o for tp, o in requested.items() if o >= 0}
        resolved.update(self.list_offsets(need_earliest, "earliest"))
        resolved.update(self.list_offsets(need_latest, "latest"))
        return resolved
