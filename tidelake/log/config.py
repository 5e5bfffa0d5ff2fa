"""Topic-level log configuration, with Kafka's property names mapped to fields."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

from tidelake.errors import InvalidConfig

LONG_MAX = 2**63 - 1

# Kafka topic-config name -> LogConfig field name.
PROPERTY_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "cleanup.policy": "cleanup_policy",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "delete.retention.ms": "delete_retention_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "remote.storage.enable": "remote_storage_enable",
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
    "remote.log.copy.disable": "remote_log_copy_disable",
    "remote.log.delete.on.disable": "remote_log_delete_on_disable",
}


@dataclass
class LogConfig:
    """Per-partition log settings (Kafka topic-config semantics and defaults)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 168 * 3600 * 1000  # -1 = keep forever
    retention_bytes: int = -1  # -1 = no size limit
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX  # a dirty record waits at most this long, whatever the ratio
    min_cleanable_dirty_ratio: float = 0.5  # compact once dirty bytes / cleanable bytes reach this
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000  # accepted, ignored: files are deleted at once
    # tiered storage (KIP-405): retention.* then bound the whole log, local and remote; local.retention.*
    # (-2: as retention.*) only the local part, of segments already copied
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    # KIP-950: copy nothing more; what the store holds stays readable and under retention.*, and the local
    # segments follow retention.* (deleted uncopied, the log start moving), as Kafka's
    remote_log_copy_disable: bool = False
    # KIP-950: remote.storage.enable turned off (refused without it): the remote part is deleted, the log starts
    # at the local log start
    remote_log_delete_on_disable: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: "LogConfig | None" = None) -> "LogConfig":
        """Build from Kafka topic-config names (string values). Unknown keys are ignored.

        Raises InvalidConfig for a value that does not parse or is out of range."""
        updates: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(cls)}
        for key, raw in props.items():
            name = PROPERTY_FIELDS.get(key)
            if name is None or raw is None:
                continue
            if types[name] in ("bool", bool):
                updates[name] = str(raw).strip().lower() == "true"
            elif types[name] in ("int", int):
                try:
                    updates[name] = int(str(raw).strip())
                except ValueError:
                    raise InvalidConfig(f"{key}: not an integer: {raw!r}") from None
            elif types[name] in ("float", float):
                try:
                    updates[name] = float(str(raw).strip())
                except ValueError:
                    raise InvalidConfig(f"{key}: not a number: {raw!r}") from None
            else:
                updates[name] = str(raw).strip()
        cfg = replace(base or cls(), **updates)
        cfg.validate()
        return cfg

    def to_properties(self) -> dict[str, str]:
        """The Kafka-named view (for DescribeConfigs)."""
        values = asdict(self)
        return {key: str(values[name]).lower() if isinstance(values[name], bool) else str(values[name])
                for key, name in PROPERTY_FIELDS.items()}

    def validate(self) -> None:
        if self.segment_bytes < 14:  # Kafka's minimum: one record batch header + overhead
            raise InvalidConfig(f"segment.bytes {self.segment_bytes} too small")
        if self.segment_ms < 1:
            raise InvalidConfig("segment.ms must be >= 1")
        if self.index_interval_bytes < 0:
            raise InvalidConfig("index.interval.bytes must be >= 0")
        if self.max_message_bytes < 0:
            raise InvalidConfig("max.message.bytes must be >= 0")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise InvalidConfig("flush.messages must be >= 1 and flush.ms >= 0")
        policies = {p.strip() for p in self.cleanup_policy.split(",") if p.strip()}
        if not policies or not policies <= {"delete", "compact"}:
            raise InvalidConfig(f"cleanup.policy {self.cleanup_policy!r}")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise InvalidConfig(f"message.timestamp.type {self.message_timestamp_type!r}")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise InvalidConfig(f"min.cleanable.dirty.ratio {self.min_cleanable_dirty_ratio} not in [0, 1]")
        if self.local_retention_ms < -2 or self.local_retention_bytes < -2:
            raise InvalidConfig("local.retention.ms and local.retention.bytes must be >= -2")
        if self.max_compaction_lag_ms < 1 or self.min_compaction_lag_ms < 0:
            raise InvalidConfig("max.compaction.lag.ms must be >= 1 and min.compaction.lag.ms >= 0")

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"
