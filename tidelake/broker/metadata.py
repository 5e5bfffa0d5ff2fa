"""Cluster metadata kept by the (single) broker: topics, their partitions and config overrides,
dynamic broker configs, client quotas and the producer-id block — persisted as one JSON file, written atomically
(temp file + fsync + rename + directory fsync), so a crash leaves the old or the new state.

``save()`` writes at once (and blocks for the fsyncs). An asyncio caller that must not stall its loop
changes the state with ``save=False`` and then awaits ``save_async()``: the state is serialised on the
caller's thread, written and fsynced on a worker thread; writes are numbered so an older state never
replaces a newer one on disk.
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tidelake.fsutil import fsync_dir

METADATA_FILE = "tidelake-metadata.json"
PRODUCER_ID_BLOCK = 1000  # ids reserved per persisted write (Kafka's ProducerIdManager does the same)


@dataclass
class TopicInfo:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # overrides only
    internal: bool = False
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)

    def to_json(self) -> dict:
        return {"name": self.name, "partitions": self.partitions, "configs": self.configs,
                "internal": self.internal, "topic_id": str(self.topic_id)}

    @classmethod
    def from_json(cls, d: dict) -> TopicInfo:
        return cls(d["name"], int(d["partitions"]), dict(d.get("configs", {})), bool(d.get("internal", False)),
                   uuid.UUID(d["topic_id"]))


def write_json_atomically(path: Path, data: dict | bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    payload = data if isinstance(data, bytes) else json.dumps(data, indent=1, sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


class MetadataStore:
    """Topics by name (and by id), dynamic broker configs, group configs, producer-id allocation; thread-safe."""

    def __init__(self, data_dir: Path, cluster_id: str | None = None):
        self.path = Path(data_dir) / METADATA_FILE
        self._lock = threading.RLock()
        self._write_lock = threading.Lock()  # one file write at a time (loop thread or worker thread)
        self._version = 0  # bumped by every serialisation of the state
        self._written_version = 0  # newest version on disk
        self._offset_base = 0  # states written before this process (``metadata_offset``)
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self.dynamic_broker_configs: dict[str, str] = {}
        self.dynamic_default_broker_configs: dict[str, str] = {}  # the broker resource "" (--entity-default)
        self.finalized_features: dict[str, int] = {}  # feature levels UpdateFeatures finalized
        self.group_configs: dict[str, dict[str, str]] = {}  # per group id: configs set on its GROUP resource
        # AlterClientQuotas' table: entity ((type, name or None), ...) -> quota key -> value (client_quota_rules)
        self.client_quotas: dict[tuple, dict[str, float]] = {}
        self.cluster_id = cluster_id or uuid.uuid4().hex[:22]
        self._next_producer_id = 0  # next id to hand out
        self._producer_id_limit = 0  # ids below this are reserved on disk
        if self.path.exists():
            d = json.loads(self.path.read_text())
            for t in d.get("topics", []):
                info = TopicInfo.from_json(t)
                self.topics[info.name] = info
                self.topics_by_id[info.topic_id] = info
            self.dynamic_broker_configs = dict(d.get("dynamic_broker_configs", {}))
            self.dynamic_default_broker_configs = dict(d.get("dynamic_default_broker_configs", {}))
            self.finalized_features = {k: int(v) for k, v in d.get("finalized_features", {}).items()}
            self.group_configs = {g: dict(c) for g, c in d.get("group_configs", {}).items()}
            self.client_quotas = {tuple((t, n) for t, n in q["entity"]): {k: float(v) for k, v in q["values"].items()}
                                  for q in d.get("client_quotas", [])}
            self.cluster_id = d.get("cluster_id", self.cluster_id)
            self._offset_base = int(d.get("metadata_offset", 0))
            # Never reuse an id that might have been handed out before a crash: start past the block.
            self._next_producer_id = self._producer_id_limit = int(d.get("producer_id_limit", 0))

    @property
    def metadata_offset(self) -> int:
        """How many states of the metadata have been written, across restarts: what DescribeQuorum reports as the
        high watermark of a broker alone, whose metadata log this file is."""
        return self._offset_base + self._written_version

    def adopt_cluster_id(self, cluster_id: str) -> None:
        """The id of the cluster this broker joined (ZooKeeper's, or ours when we were first): kept from now on."""
        self.cluster_id = cluster_id

    def _serialize(self) -> tuple[int, bytes]:
        with self._lock:
            self._version += 1
            return self._version, json.dumps({
                "topics": [t.to_json() for t in self.topics.values()],
                "dynamic_broker_configs": self.dynamic_broker_configs,
                "dynamic_default_broker_configs": self.dynamic_default_broker_configs,
                "finalized_features": self.finalized_features,
                "group_configs": self.group_configs,
                "client_quotas": [{"entity": [list(pair) for pair in entity], "values": values}
                                  for entity, values in sorted(self.client_quotas.items(), key=lambda q: repr(q[0]))],
                "cluster_id": self.cluster_id,
                "producer_id_limit": self._producer_id_limit,
                "metadata_offset": self._offset_base + self._version,
            }, indent=1, sort_keys=True).encode()

    def _write(self, version: int, payload: bytes) -> None:
        with self._write_lock:
            if version > self._written_version:  # else a newer state is already on disk
                write_json_atomically(self.path, payload)
                self._written_version = version

    def save(self) -> None:
        """Write the current state durably, now (blocks for the fsyncs)."""
        self._write(*self._serialize())

    async def save_async(self) -> None:
        """Write the current state durably without blocking the event loop: serialised here, written
        and fsynced on a worker thread; returns once it is on disk."""
        version, payload = self._serialize()
        await asyncio.get_running_loop().run_in_executor(None, self._write, version, payload)

    def set_group_configs(self, group_configs: dict[str, dict[str, str]]) -> None:
        """Every group's configs (IncrementalAlterConfigs on GROUP resources), written durably now."""
        with self._lock:
            self.group_configs = {g: dict(c) for g, c in group_configs.items()}
        self.save()

    def set_client_quotas(self, quotas: dict[tuple, dict[str, float]]) -> None:
        """The whole client-quota table (AlterClientQuotas); the caller persists it (``save_async``) before
        answering."""
        with self._lock:
            self.client_quotas = {entity: dict(values) for entity, values in quotas.items()}

    def add_topic(self, info: TopicInfo, *, save: bool = True) -> None:
        """Add ``info``; with ``save=False`` the caller persists it (``save_async``) before acknowledging."""
        with self._lock:
            self.topics[info.name] = info
            self.topics_by_id[info.topic_id] = info
            if save:
                self.save()

    def remove_topic(self, name: str) -> TopicInfo | None:
        with self._lock:
            info = self.topics.pop(name, None)
            if info is not None:
                self.topics_by_id.pop(info.topic_id, None)
                self.save()
            return info

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, even across crashes (monotonic)."""
        with self._lock:
            if self._next_producer_id >= self._producer_id_limit:
                self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK
                self.save()
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid
