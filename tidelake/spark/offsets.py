"""Offset stores and offset-range planning for the pipeline runner (SPEC P2, seed 001).

Four places a pipeline can keep "how far it got", one per offset mode:

* the broker's consumer group (``auto`` and ``commit-after``): :class:`BrokerOffsets`;
* the paper's SEO ``gtoffset`` file ``<seo_dir>/<group>/<topic>/gtoffset`` (``seo``): :class:`GtoffsetFile`;
* the table itself, inside the commit that holds the batch (``exactly-once``): :func:`offsets_from_app_state`.

Offsets are always "next offset to read" (Kafka's committed-offset convention), keyed by partition number.
Nothing here imports pyspark: the driver loop uses it, and the pure parts are unit-tested on their own.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from tidelake.fsutil import fsync_dir

Offsets = dict[int, int]


@dataclass(frozen=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one partition: one batch's share of it."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def count(self) -> int:
        return self.until_offset - self.from_offset


@dataclass(frozen=True)
class Correction:
    """One partition's stored offset moved back into the broker's available range [earliest, latest]."""

    partition: int
    stored: int | None
    corrected: int
    kind: str  # "none-stored" | "low" | "high"


def parse_duration(value: str | int | float) -> float:
    """'2s', '500ms', '1.5m', '1h' or a bare number of seconds -> seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|h)?\s*", str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 2s, 500ms, 1m)")
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]


def correct_offsets(stored: Mapping[int, int] | None, earliest: Mapping[int, int],
                    latest: Mapping[int, int]) -> tuple[Offsets, list[Correction]]:
    """The SEO paper's steps (1)-(3): where to start each partition.

    No stored offsets (first run of this group) -> earliest (auto.offset.reset=earliest). Otherwise each stored
    offset A is compared with the earliest available M and the latest N: A < M (low out-of-range: retention
    deleted what we had not read) -> M; A > N (high out-of-range: the topic was recreated or truncated) -> N;
    otherwise A is valid and kept. A partition with no stored offset (added since) starts at its earliest.
    """
    start: Offsets = {}
    corrections: list[Correction] = []
    for partition in sorted(earliest):
        low, high = earliest[partition], latest[partition]
        offset = None if stored is None else stored.get(partition)
        if offset is None:
            start[partition] = low
            corrections.append(Correction(partition, None, low, "none-stored"))
        elif offset < low:
            start[partition] = low
            corrections.append(Correction(partition, offset, low, "low"))
        elif offset > high:
            start[partition] = high
            corrections.append(Correction(partition, offset, high, "high"))
        else:
            start[partition] = offset
    return start, corrections


def plan_ranges(topic: str, start: Mapping[int, int], latest: Mapping[int, int],
                max_records_per_partition: int | None = None,
                stop_at: Mapping[int, int] | None = None) -> list[OffsetRange]:
    """One batch's offset ranges, DStream style: until = min(latest, from + max rate x interval).

    ``stop_at`` caps the ranges too (``--once`` stops at the latest offsets seen when the run started, like
    Spark's AvailableNow). Partitions with nothing to read are left out.
    """
    ranges = []
    for partition in sorted(start):
        begin = start[partition]
        until = latest[partition]
        if stop_at is not None:
            until = min(until, stop_at.get(partition, until))
        if max_records_per_partition is not None:
            until = min(until, begin + max_records_per_partition)
        if until > begin:
            ranges.append(OffsetRange(topic, partition, begin, until))
    return ranges


def advance(start: Mapping[int, int], ranges: list[OffsetRange]) -> Offsets:
    """The offsets after a batch: each range's partition moves to its until offset."""
    nxt = dict(start)
    for r in ranges:
        nxt[r.partition] = r.until_offset
    return nxt


def offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    """Spark's Kafka-source offsets JSON: {"topic": {"0": 23, "1": 42}}."""
    return json.dumps({topic: {str(p): int(o) for p, o in sorted(offsets.items())}})


class GtoffsetFile:
    """The SEO scheme's client-side offset file ``<seo_dir>/<group_id>/<topic>/gtoffset``.

    It holds every partition's next offset for the group as JSON
    (``{"group_id": ..., "topic": ..., "offsets": {"0": 123, ...}}``) and is replaced atomically
    (write a temporary file, fsync, rename, fsync the directory), so a crash leaves the old or the new file.
    """

    def __init__(self, seo_dir: str | os.PathLike, group_id: str, topic: str):
        self.group_id, self.topic = group_id, topic
        self.path = Path(seo_dir) / group_id / topic / "gtoffset"

    def read(self) -> Offsets | None:
        """The stored offsets, or None if the file does not exist (the group never consumed the topic)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        return {int(p): int(o) for p, o in data["offsets"].items()}

    def write(self, offsets: Mapping[int, int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"group_id": self.group_id, "topic": self.topic,
                           "offsets": {str(p): int(o) for p, o in sorted(offsets.items())}})
        fd, tmp = tempfile.mkstemp(prefix=".gtoffset.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        fsync_dir(self.path.parent)


def offsets_from_app_state(state: Mapping | None) -> Offsets | None:
    """The offsets an exactly-once pipeline stored in its last table commit (``app_extra={"offsets": ...}``)."""
    if not state:
        return None
    stored = (state.get("extra") or {}).get("offsets")
    if stored is None:
        return None
    return {int(p): int(o) for p, o in stored.items()}


class BrokerOffsets:
    """The group's committed offsets and the topic's watermarks, through a real Kafka client (confluent-kafka).

    Commits are plain OffsetCommit requests for explicit offsets by a consumer that never joins the group
    (generation -1, as Spark's driver and ``kafka-consumer-groups --reset-offsets`` do), so they work with
    any Kafka-protocol broker and make the pipeline's lag visible to ``groups describe``.
    """

    def __init__(self, bootstrap_servers: str, topic: str, group_id: str,
                 client_config: Mapping[str, str] | None = None, timeout: float = 30.0):
        from confluent_kafka import Consumer

        self.topic, self.group_id, self.timeout = topic, group_id, timeout
        conf = {"bootstrap.servers": bootstrap_servers, "group.id": group_id,
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "client.id": f"tidelake-pipeline-{uuid.uuid4().hex[:8]}"}
        conf.update(client_config or {})
        self._consumer = Consumer(conf)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> "BrokerOffsets":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def partitions(self) -> list[int]:
        metadata = self._consumer.list_topics(self.topic, timeout=self.timeout)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise RuntimeError(f"topic {self.topic!r} not available: {topic.error if topic else 'missing'}")
        return sorted(topic.partitions)

    def watermarks(self, partitions: list[int] | None = None) -> tuple[Offsets, Offsets]:
        """(earliest, latest) available offset per partition: the paper's M and N."""
        from confluent_kafka import TopicPartition

        earliest, latest = {}, {}
        for p in partitions if partitions is not None else self.partitions():
            low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                             timeout=self.timeout, cached=False)
            earliest[p], latest[p] = low, high
        return earliest, latest

    def committed(self, partitions: list[int] | None = None) -> Offsets | None:
        """The group's committed offsets (partitions without a commit left out), None if it has none."""
        from confluent_kafka import TopicPartition

        parts = partitions if partitions is not None else self.partitions()
        result = self._consumer.committed([TopicPartition(self.topic, p) for p in parts], timeout=self.timeout)
        offsets = {tp.partition: tp.offset for tp in result if tp.error is None and tp.offset >= 0}
        return offsets or None

    def commit(self, offsets: Mapping[int, int]) -> None:
        """Synchronously commit the group's next offsets (raises on any partition error)."""
        from confluent_kafka import KafkaException, TopicPartition

        if not offsets:
            return
        result = self._consumer.commit(
            offsets=[TopicPartition(self.topic, p, int(o)) for p, o in sorted(offsets.items())],
            asynchronous=False)
        errors = [tp for tp in result or [] if tp.error is not None]
        if errors:
            raise KafkaException(errors[0].error)
