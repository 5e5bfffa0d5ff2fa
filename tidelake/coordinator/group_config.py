"""The group coordinator's settings, with Kafka's broker config names and defaults (the broker's config
definitions take their group defaults from here)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GroupConfig:
    """Broker settings for groups, read by Kafka's names in ``from_properties``. The defaults are
    Kafka's and are the only copy: the broker's config table shows these same values."""
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    offsets_partitions: int = 50
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes (Kafka: 7 days)
    offsets_retention_check_interval_ms: int = 600000
    # KIP-848 consumer groups
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    # the bounds a group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms must keep
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # KIP-1071 streams groups
    streams_session_timeout_ms: int = 45000
    streams_heartbeat_interval_ms: int = 5000
    streams_num_standby_replicas: int = 0

    @classmethod
    def from_properties(cls, props) -> "GroupConfig":
        def get(name, default):
            v = props.get(name) if props is not None else None
            return default if v is None else v
        c = cls()
        c.min_session_timeout_ms = int(get("group.min.session.timeout.ms", c.min_session_timeout_ms))
        c.max_session_timeout_ms = int(get("group.max.session.timeout.ms", c.max_session_timeout_ms))
        c.initial_rebalance_delay_ms = int(get("group.initial.rebalance.delay.ms", c.initial_rebalance_delay_ms))
        c.offsets_partitions = int(get("offsets.topic.num.partitions", c.offsets_partitions))
        c.offset_metadata_max_bytes = int(get("offset.metadata.max.bytes", c.offset_metadata_max_bytes))
        c.offsets_retention_ms = int(get("offsets.retention.minutes", c.offsets_retention_ms // 60000)) * 60000
        c.offsets_retention_check_interval_ms = int(get("offsets.retention.check.interval.ms",
                                                        c.offsets_retention_check_interval_ms))
        c.consumer_session_timeout_ms = int(get("group.consumer.session.timeout.ms", c.consumer_session_timeout_ms))
        c.consumer_heartbeat_interval_ms = int(get("group.consumer.heartbeat.interval.ms", c.consumer_heartbeat_interval_ms))
        c.consumer_min_session_timeout_ms = int(get("group.consumer.min.session.timeout.ms",
                                                    c.consumer_min_session_timeout_ms))
        c.consumer_max_session_timeout_ms = int(get("group.consumer.max.session.timeout.ms",
                                                    c.consumer_max_session_timeout_ms))
        c.consumer_min_heartbeat_interval_ms = int(get("group.consumer.min.heartbeat.interval.ms",
                                                       c.consumer_min_heartbeat_interval_ms))
        c.consumer_max_heartbeat_interval_ms = int(get("group.consumer.max.heartbeat.interval.ms",
                                                       c.consumer_max_heartbeat_interval_ms))
        c.streams_session_timeout_ms = int(get("group.streams.session.timeout.ms", c.streams_session_timeout_ms))
        c.streams_heartbeat_interval_ms = int(get("group.streams.heartbeat.interval.ms",
                                                  c.streams_heartbeat_interval_ms))
        c.streams_num_standby_replicas = int(get("group.streams.num.standby.replicas", c.streams_num_standby_replicas))
        assignors = get("group.consumer.assignors", None)
        if assignors:
            c.consumer_assignors = tuple(a.strip() for a in str(assignors).split(",") if a.strip())
        return c
