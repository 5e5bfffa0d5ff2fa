"""Topics: creation, deletion, partitions and config overrides, kept consistent between the
metadata file (``MetadataStore``) and the partition logs (``LogManager``)."""
from __future__ import annotations

import logging
import uuid
from typing import Mapping

from tidelake.broker.config import BrokerConfig, has_schema_registry
from tidelake.broker.config_validation import validate_topic_configs
from tidelake.broker.metadata import MetadataStore, TopicInfo
from tidelake.broker.partitions import Partitions
from tidelake.errors import (InvalidPartitions, InvalidReplicationFactor, InvalidTopic, TopicAlreadyExists,
                             UnknownTopicOrPartition)
from tidelake.log import LogConfig, LogManager

log = logging.getLogger("tidelake.broker")

_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def validate_topic_name(name: str | None) -> None:
    """Kafka's rule: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name or name in (".", "..") or len(name) > 249 or not set(name) <= _LEGAL_TOPIC_CHARS:
        raise InvalidTopic(f"invalid topic name {name!r}")


class TopicManager:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore, logs: LogManager, partitions: Partitions):
        self.config = config
        self.metadata = metadata
        self.logs = logs
        self.partitions = partitions
        # remote.log.storage.system.enable (static): whether a topic may set remote.storage.enable
        self.tiered_storage = config.get_bool("remote.log.storage.system.enable")
        # whether broker-side schema validation has a registry to ask (both settings static)
        self.schema_registry = has_schema_registry(config)

    def get(self, name: str | None) -> TopicInfo | None:
        return self.metadata.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.metadata.topics_by_id.get(topic_id)

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The topic's id (in a cluster, the controller's, once announced), None for a topic not known."""
        info = self.metadata.topics.get(name)
        return info.topic_id if info is not None else None

    def recover(self) -> None:
        """At start, after ``LogManager.load()``: a log directory with no topic in the metadata (a
        crash between mkdir and the metadata write) is adopted rather than ignored, so no data
        silently disappears; a partition whose directory vanished gets an empty log."""
        logs = self.logs.all_logs()
        for (topic, _partition), plog in logs.items():
            if topic not in self.metadata.topics:
                n = 1 + max(p for (t, p) in logs if t == topic)
                self.metadata.add_topic(TopicInfo(topic, n, internal=topic.startswith("__")))
            plog.update_config(self.log_config(topic))
        for info in list(self.metadata.topics.values()):
            for p in range(info.partitions):
                if self.logs.get(info.name, p) is None:
                    self.logs.create(info.name, p, self.log_config(info.name))

    def log_config(self, topic: str) -> LogConfig:
        info = self.metadata.topics.get(topic)
        overrides = info.configs if info is not None else {}
        return LogConfig.from_properties(self.config.effective_topic_configs(overrides))

    def min_insync_replicas(self, topic: str) -> int:
        info = self.metadata.topics.get(topic)
        value = info.configs.get("min.insync.replicas") if info is not None else None
        if value is None:
            value = self.config.topic_default("min.insync.replicas")[0]
        return int(value)

    def create(self, name: str, partitions: int | None = None, configs: Mapping[str, str] | None = None,
               internal: bool = False, *, replication_factor: int = 1, validate_only: bool = False,
               persist: bool = True) -> TopicInfo:
        """Create a topic and its partition logs. Raises TopicAlreadyExists / InvalidTopic /
        InvalidPartitions / InvalidReplicationFactor / InvalidConfig.

        ``persist=False``: the metadata file is not written here (an fsync would block the event loop);
        the caller awaits ``metadata.save_async()`` before acknowledging. A crash in between leaves
        partition directories without metadata, which ``recover()`` adopts."""
        validate_topic_name(name)
        if name in self.metadata.topics:
            raise TopicAlreadyExists(f"Topic '{name}' already exists.")
        if partitions is None or partitions == -1:
            partitions = self.config.get_int("num.partitions")
        if partitions <= 0:
            raise InvalidPartitions(f"Number of partitions must be larger than 0, got {partitions}")
        if replication_factor == -1:
            replication_factor = self.config.get_int("default.replication.factor")
        if replication_factor != 1:
            raise InvalidReplicationFactor(
                f"Replication factor {replication_factor} larger than available brokers: 1")
        overrides = validate_topic_configs(dict(configs or {}), tiered_storage=self.tiered_storage,
                                           schema_registry=self.schema_registry)
        info = TopicInfo(name, partitions, overrides, internal)
        if validate_only:
            return info
        log_config = LogConfig.from_properties(self.config.effective_topic_configs(overrides))
        for p in range(partitions):
            self.logs.create(name, p, log_config)
        self.metadata.add_topic(info, save=persist)
        log.info("created topic %s with %d partitions", name, partitions)
        return info

    def delete(self, name: str) -> None:
        if name not in self.metadata.topics:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist")
        self.metadata.remove_topic(name)
        self.logs.delete_topic(name)
        self.partitions.notify_topic(name)
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        info = self.metadata.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist")
        if count < info.partitions:
            raise InvalidPartitions(f"Topic currently has {info.partitions} partitions, which is higher than "
                                    f"the requested {count}.")
        if count == info.partitions:
            raise InvalidPartitions(f"Topic already has {info.partitions} partitions.")
        if validate_only:
            return
        cfg = self.log_config(name)
        for p in range(info.partitions, count):
            self.logs.create(name, p, cfg)
        info.partitions = count
        self.metadata.save()

    def alter_configs(self, name: str, overrides: Mapping[str, str], *, validate_only: bool = False) -> None:
        """Replace a topic's config overrides (already merged by the caller for incremental alters)."""
        info = self.metadata.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist")
        normalised = validate_topic_configs(dict(overrides), tiered_storage=self.tiered_storage,
                                            schema_registry=self.schema_registry, previous=info.configs)
        if validate_only:
            return
        info.configs = normalised
        self.metadata.save()
        self._apply_log_config(name)

    def set_dynamic_broker_configs(self, changes: Mapping[str, str | None], *, default: bool = False) -> None:
        """This broker's dynamic configs changed (``default``: the cluster-wide dynamic defaults), saved now."""
        for k, v in changes.items():
            self.config.set_dynamic(k, v, default=default)
        self.metadata.dynamic_broker_configs = dict(self.config.dynamic)
        self.metadata.dynamic_default_broker_configs = dict(self.config.dynamic_default)
        self.metadata.save()
        for name in list(self.metadata.topics):  # broker defaults back topic configs
            self._apply_log_config(name)

    def _apply_log_config(self, name: str) -> None:
        cfg = self.log_config(name)
        for p in range(self.metadata.topics[name].partitions):
            plog = self.logs.get(name, p)
            if plog is not None:
                plog.update_config(cfg)
