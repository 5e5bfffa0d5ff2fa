"""The configs of a GROUP config resource (Kafka 4.x's ``GroupConfig``): the KIP-848 ``consumer.*`` ones, which
override the broker's ``group.consumer.session.timeout.ms`` / ``group.consumer.heartbeat.interval.ms`` for one
consumer group within the broker's ``group.consumer.min/max.*`` bounds, and the KIP-932 ``share.*`` ones
(``share_config``). One dict of overrides per group holds both kinds, as Kafka's ``/config/groups`` does."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from tidelake import errors
from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.share_config import SHARE_GROUP_CONFIGS, validate_share_group_configs

SESSION_TIMEOUT, HEARTBEAT_INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


@dataclass(frozen=True)
class Bound:
    name: str   # the broker config
    field: str  # its GroupConfig field


@dataclass(frozen=True)
class ConsumerGroupConfigDef:
    field: str  # the GroupConfig field it overrides (the broker's group.<name> is the default)
    minimum: Bound
    maximum: Bound
    doc: str


CONSUMER_GROUP_CONFIGS: dict[str, ConsumerGroupConfigDef] = {
    SESSION_TIMEOUT: ConsumerGroupConfigDef(
        "consumer_session_timeout_ms",
        Bound("group.consumer.min.session.timeout.ms", "consumer_min_session_timeout_ms"),
        Bound("group.consumer.max.session.timeout.ms", "consumer_max_session_timeout_ms"),
        "the time a KIP-848 member may go without heartbeating before it is fenced"),
    HEARTBEAT_INTERVAL: ConsumerGroupConfigDef(
        "consumer_heartbeat_interval_ms",
        Bound("group.consumer.min.heartbeat.interval.ms", "consumer_min_heartbeat_interval_ms"),
        Bound("group.consumer.max.heartbeat.interval.ms", "consumer_max_heartbeat_interval_ms"),
        "the heartbeat interval the coordinator gives the group's KIP-848 members"),
}
GROUP_CONFIG_NAMES = tuple(sorted((*CONSUMER_GROUP_CONFIGS, *SHARE_GROUP_CONFIGS)))


def consumer_group_value(groups: GroupConfig, overrides: Mapping[str, str] | None, name: str) -> int:
    """A ``consumer.*`` config's value for a group: its own, else the broker's."""
    own = (overrides or {}).get(name)
    return int(own) if own is not None else getattr(groups, CONSUMER_GROUP_CONFIGS[name].field)


def validate_group_configs(overrides: Mapping[str, str], groups: GroupConfig) -> None:
    """InvalidConfig naming the first config that is not a group config, or whose value is bad or outside the
    broker's bound (named, as Kafka's GroupConfig does), or a session timeout not above the heartbeat interval."""
    for name in overrides:
        if name not in CONSUMER_GROUP_CONFIGS and name not in SHARE_GROUP_CONFIGS:
            raise errors.InvalidConfig(f"Unknown group config name: {name} (group configs: "
                                       f"{', '.join(GROUP_CONFIG_NAMES)})")
    validate_share_group_configs({k: v for k, v in overrides.items() if k in SHARE_GROUP_CONFIGS})
    for name, d in CONSUMER_GROUP_CONFIGS.items():
        if name not in overrides:
            continue
        try:
            value = int(overrides[name])
        except (TypeError, ValueError):
            raise errors.InvalidConfig(f"{name}={overrides[name]}: expected an integer") from None
        low, high = getattr(groups, d.minimum.field), getattr(groups, d.maximum.field)
        if value < low:
            raise errors.InvalidConfig(f"{name} must be greater than or equal to {d.minimum.name} ({low})")
        if value > high:
            raise errors.InvalidConfig(f"{name} must be less than or equal to {d.maximum.name} ({high})")
    if any(name in overrides for name in CONSUMER_GROUP_CONFIGS) and \
            consumer_group_value(groups, overrides, SESSION_TIMEOUT) <= \
            consumer_group_value(groups, overrides, HEARTBEAT_INTERVAL):
        raise errors.InvalidConfig(f"{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}")
