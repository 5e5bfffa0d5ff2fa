"""The broker's topic table as the cluster code updates it (``cluster.settings.TopicTable``): in a
cluster, topics live in ZooKeeper and ``MetadataStore`` only mirrors what the controller announced,
so handlers read topics the same way on one broker or many."""
from __future__ import annotations

from tidelake.broker.metadata import MetadataStore, TopicInfo
from tidelake.cluster.settings import ClusterTopic
from tidelake.log import LogConfig, LogManager


class MetadataTopicTable:
    def __init__(self, metadata: MetadataStore, logs: LogManager, log_config):
        self.metadata = metadata
        self.logs = logs
        self.log_config = log_config  # topic name -> LogConfig

    def names(self) -> list[str]:
        return list(self.metadata.topics)

    def configs(self, name: str) -> dict[str, str] | None:
        info = self.metadata.topics.get(name)
        return info.configs if info is not None else None

    def put(self, topic: ClusterTopic) -> None:
        self.metadata.add_topic(TopicInfo(topic.name, topic.partitions, dict(topic.configs),
                                          topic.name.startswith("__"), topic.topic_id), save=False)
        config: LogConfig = self.log_config(topic.name)
        for p in range(topic.partitions):  # a log already on disk takes the topic's configs
            plog = self.logs.get(topic.name, p)
            if plog is not None:
                plog.update_config(config)

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self.metadata.topics.get(name)
        if info is None:
            return
        info.configs = dict(configs)
        config: LogConfig = self.log_config(name)
        for p in range(info.partitions):
            plog = self.logs.get(name, p)
            if plog is not None:
                plog.update_config(config)

    def resize(self, name: str, partitions: int) -> None:
        info = self.metadata.topics.get(name)
        if info is not None and partitions > info.partitions:
            info.partitions = partitions

    def remove(self, name: str) -> None:
        if name in self.metadata.topics:
            self.metadata.remove_topic(name)
