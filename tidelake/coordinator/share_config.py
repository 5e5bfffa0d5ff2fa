"""Share groups' settings (KIP-932): the broker's ``group.share.*`` configs (Kafka's names and defaults, the
only copy of the defaults: the broker's config table shows these same values) and the per-group ``share.*``
configs Kafka lets IncrementalAlterConfigs set on a GROUP resource, which override them for one group."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from tidelake import errors

READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
EARLIEST, LATEST = "earliest", "latest"


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks (Kafka 4.2)
    # per group only (Kafka has no broker-wide setting for these two): share.isolation.level,
    # share.auto.offset.reset, with Kafka's defaults
    isolation_level: str = READ_UNCOMMITTED
    auto_offset_reset: str = LATEST
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
                   state_partitions=get("share.coordinator.state.topic.num.partitions", c.state_partitions))

    def with_group_configs(self, overrides: Mapping[str, str]) -> "ShareGroupConfig":
        """These settings with one group's ``share.*`` configs applied (validated; its other group configs,
        the KIP-848 ``consumer.*`` ones, are the consumer group coordinator's)."""
        own = {k: v for k, v in overrides.items() if k in SHARE_GROUP_CONFIGS}
        validate_share_group_configs(own)
        return dataclasses.replace(self, **{SHARE_GROUP_CONFIGS[k].field: SHARE_GROUP_CONFIGS[k].parse(v)
                                            for k, v in own.items()})


@dataclass(frozen=True)
class GroupConfigDef:
    field: str  # the ShareGroupConfig field it overrides
    parse: type
    choices: tuple[str, ...] | None = None
    doc: str = ""


# Kafka's share-group configs (GroupConfig), settable per group
SHARE_GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "share.session.timeout.ms": GroupConfigDef("session_timeout_ms", int, doc="share-group session timeout"),
    "share.heartbeat.interval.ms": GroupConfigDef("heartbeat_interval_ms", int, doc="share-group heartbeat interval"),
    "share.record.lock.duration.ms": GroupConfigDef("record_lock_duration_ms", int,
                                                    doc="how long a consumer holds a record it acquired"),
    "share.delivery.count.limit": GroupConfigDef("delivery_count_limit", int,
                                                 doc="deliveries of a record before it is archived"),
    "share.partition.max.record.locks": GroupConfigDef("partition_max_record_locks", int,
                                                       doc="in-flight records of one share-partition"),
    "share.isolation.level": GroupConfigDef("isolation_level", str, (READ_UNCOMMITTED, READ_COMMITTED),
                                            "read_committed: aborted transactions' records are never delivered"),
    "share.auto.offset.reset": GroupConfigDef("auto_offset_reset", str, (EARLIEST, LATEST),
                                              "where a share group starts reading a partition it has no state for"),
}


def validate_share_group_configs(overrides: Mapping[str, str]) -> None:
    """InvalidConfig naming the first config that is not a share-group config or has a bad value."""
    for name, value in overrides.items():
        d = SHARE_GROUP_CONFIGS.get(name)
        if d is None:
            raise errors.InvalidConfig(f"{name} is not a share-group config "
                                       f"(one of {', '.join(sorted(SHARE_GROUP_CONFIGS))})")
        if d.choices is not None and value not in d.choices:
            raise errors.InvalidConfig(f"{name}={value}: expected one of {', '.join(d.choices)}")
        if d.parse is int:
            try:
                ok = int(value) > 0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise errors.InvalidConfig(f"{name}={value}: expected a positive integer")
