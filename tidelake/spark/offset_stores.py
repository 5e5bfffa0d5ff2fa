"""The three places a pipeline can keep how far it got (seed 001), one per kind of offset mode:

* the broker: the consumer group's committed offsets (``auto``, ``commit-after``): :class:`BrokerOffsets`;
* the client: the paper's SEO ``gtoffset`` file ``<seo_dir>/<group>/<topic>/gtoffset`` (``seo``):
  :class:`ClientOffsetFile`;
* the table: the offsets inside the commit that holds the batch (``exactly-once``):
  :func:`offsets_from_app_state`.

Offsets here are one topic's, "next offset to read" keyed by partition number. No pyspark imports.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import uuid
from pathlib import Path
from typing import Mapping

from tidelake.fsutil import fsync_dir
from tidelake.spark.kafka_offset_reader import KafkaOffsetReader
from tidelake.spark.kafka_options import KafkaSourceOptions

log = logging.getLogger(__name__)

Offsets = dict[int, int]


class ClientOffsetFile:
    """The SEO scheme's client-side offset file, the paper's ``gtoffset``: ``<seo_dir>/<group_id>/<topic>/gtoffset``.

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
    """One topic as the broker sees it: its partitions and watermarks (the paper's M and N, through the Kafka
    source's :class:`KafkaOffsetReader`) and the consumer group's committed offsets.

    Commits are plain OffsetCommit requests for explicit offsets by a consumer that never joins the group
    (generation -1, as Spark's driver and ``kafka-consumer-groups --reset-offsets`` do), so they work with
    any Kafka-protocol broker and make the pipeline's lag visible to ``groups describe``.
    """

    def __init__(self, bootstrap_servers: str, topic: str, group_id: str,
                 client_config: Mapping[str, str] | None = None, timeout: float = 30.0):
        from confluent_kafka import Consumer

        self.topic, self.group_id, self.timeout = topic, group_id, timeout
        options = {"kafka.bootstrap.servers": bootstrap_servers, "subscribe": topic,
                   **{f"kafka.{k}": v for k, v in (client_config or {}).items()}}
        self.source_options = KafkaSourceOptions.parse(options, streaming=False)
        self._offsets = KafkaOffsetReader(self.source_options, timeout_s=timeout)
        conf = {"bootstrap.servers": bootstrap_servers, "group.id": group_id,
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "client.id": f"tidelake-pipeline-{uuid.uuid4().hex[:8]}"}
        conf.update(client_config or {})
        self._consumer = Consumer(conf)

    def close(self) -> None:
        self._consumer.close()
        self._offsets.close()

    def __enter__(self) -> "BrokerOffsets":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def partitions(self) -> list[int]:
        partitions = [p for t, p in self._offsets.partitions() if t == self.topic]
        if not partitions:
            raise RuntimeError(f"topic {self.topic!r} not available")
        return partitions

    def watermarks(self, partitions: list[int] | None = None) -> tuple[Offsets, Offsets]:
        """(earliest, latest) available offset per partition: the paper's M and N."""
        tps = [(self.topic, p) for p in (partitions if partitions is not None else self.partitions())]
        earliest = self._offsets.list_offsets(tps, "earliest")
        latest = self._offsets.list_offsets(tps, "latest")
        return {p: o for (_, p), o in earliest.items()}, {p: o for (_, p), o in latest.items()}

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

    def show_progress(self, offsets: Mapping[int, int]) -> None:
        """Commit the group's offsets only so its lag is visible (the progress itself is kept elsewhere):
        a failure is logged, not raised, and the next batch commits again."""
        from confluent_kafka import KafkaException

        try:
            self.commit(offsets)
        except KafkaException as e:
            log.warning("group offset commit (for lag display) failed: %s", e)
