"""Share groups' settings (KIP-932), with Kafka's broker config names and defaults: the only copy of
the defaults (the broker's config table shows these same values)."""
from __future__ import annotations

from dataclasses import dataclass

READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
EARLIEST, LATEST = "earliest", "latest"


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks (Kafka 4.2)
    # Kafka sets these two per group (share.isolation.level, share.auto.offset.reset); here they are the
    # broker's default for every share group, with Kafka's defaults.
    isolation_level: str = READ_UNCOMMITTED  # group.share.isolation.level
    auto_offset_reset: str = LATEST  # group.share.auto.offset.reset
    state_partitions: int = 50  # share.coordinator.state.topic.num.partitions

    @classmethod
    def from_properties(cls, props) -> "ShareGroupConfig":
        c = cls()

        def get(name: str, default):
            v = props.get(name) if props is not None else None
            return default if v is None else type(default)(v)
        return cls(session_timeout_ms=get("group.share.session.timeout.ms", c.session_timeout_ms),
                   heartbeat_interval_ms=get("group.share.heartbeat.interval.ms", c.heartbeat_interval_ms),
                   record_lock_duration_ms=get("group.share.record.lock.duration.ms", c.record_lock_duration_ms),
                   delivery_count_limit=get("group.share.delivery.count.limit", c.delivery_count_limit),
                   partition_max_record_locks=get("group.share.partition.max.record.locks",
                                                  c.partition_max_record_locks),
                   isolation_level=get("group.share.isolation.level", c.isolation_level),
                   auto_offset_reset=get("group.share.auto.offset.reset", c.auto_offset_reset),
                   state_partitions=get("share.coordinator.state.topic.num.partitions", c.state_partitions))
