"""The configs Kafka knows, with its names, defaults, types, documentation and synonyms, and the checks
of a name (known, secret, "did you mean"); the checks of values are ``config_validation``.

What AlterConfigs accepts is what Kafka 3.9 accepts: every topic config Kafka knows (deprecated ones
clients still send included, e.g. ``message.format.version``, kept and described but without effect,
as Kafka ignores it from 3.0 on), and no other; for a broker, any name except Kafka's static
(read-only) configs, with the values of the configs it knows type-checked. Kafka keeps unknown broker
names too (custom configs for plugins), and so do we: stored, described, without effect.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Callable

from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.security.tls import CLIENT_AUTH, DEFAULT_CLIENT_AUTH

# Group settings' defaults have one home, the coordinator's GroupConfig.
_GROUP = GroupConfig()
_SHARE = ShareGroupConfig()

# DescribeConfigs ConfigSource
SOURCE_UNKNOWN = 0
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# DescribeConfigs ConfigType (v3+)
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST, TYPE_CLASS, TYPE_PASSWORD = range(1, 10)

LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class ConfigDef:
    name: str
    default: str | None
    type: int
    doc: str = ""
    read_only: bool = False
    choices: tuple[str, ...] | None = None  # allowed values (LIST: each element)
    minimum: float | None = None
    pattern: str | None = None  # a regular expression the whole value must match
    maximum: float | None = None
    valid: Callable[[str], bool] | None = None  # a check a pattern cannot say


def _d(name, default, type_, doc="", read_only=False, choices=None, minimum=None, pattern=None,
       maximum=None, valid=None) -> ConfigDef:
    return ConfigDef(name, None if default is None else str(default), type_, doc, read_only, choices, minimum,
                     pattern, maximum, valid)


# Kafka 3.9's MetadataVersion strings (message.format.version, inter.broker.protocol.version): each
# release with its internal versions (0.10.0-IV1), and the release alone for those up to 3.9.
_RELEASE_IVS = {
    "0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3,
    "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3,
    "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1,
    "3.9": 1, "4.0": 2}
_KAFKA_VERSIONS = frozenset(
    {r for r in _RELEASE_IVS if r != "4.0"}
    | {f"{r}-IV{i}" for r, n in _RELEASE_IVS.items() for i in range(n)})


def is_kafka_version(value: str) -> bool:
    """Kafka's MetadataVersion.fromVersionString: the first three dot-separated parts of a 0.x
    version, two of a later one, name a known version (0.10.0.0 is 0.10.0, 2.8.1 is 2.8)."""
    parts = value.split(".")
    significant = 3 if value.startswith("0.") else 2
    return (value if len(parts) <= significant else ".".join(parts[:significant])) in _KAFKA_VERSIONS


# Confluent's subject name strategies (their class names, as Confluent Server's topic configs take them)
SUBJECT_NAME_STRATEGIES = ("io.confluent.kafka.serializers.subject.TopicNameStrategy",
                           "io.confluent.kafka.serializers.subject.RecordNameStrategy",
                           "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy")


# Topic-level configs (Kafka's TopicConfig) and the broker config each falls back to, in order.
TOPIC_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in [
    _d("cleanup.policy", "delete", TYPE_LIST, "delete and/or compact old segments", choices=("delete", "compact")),
    _d("compression.type", "producer", TYPE_STRING, "final compression of the topic's data",
       choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
    _d("delete.retention.ms", 86400000, TYPE_LONG, "how long tombstones are kept in compacted topics", minimum=0),
    _d("file.delete.delay.ms", 60000, TYPE_LONG, "delay before deleting a file from the filesystem", minimum=0),
    _d("flush.messages", LONG_MAX, TYPE_LONG, "fsync after this many messages", minimum=1),
    _d("flush.ms", LONG_MAX, TYPE_LONG, "fsync after this much time", minimum=0),
    _d("index.interval.bytes", 4096, TYPE_INT, "bytes between offset index entries", minimum=0),
    _d("max.compaction.lag.ms", LONG_MAX, TYPE_LONG, "max time a message stays ineligible for compaction", minimum=1),
    _d("max.message.bytes", 1048588, TYPE_INT, "largest record batch size allowed", minimum=0),
    _d("message.timestamp.type", "CreateTime", TYPE_STRING, "CreateTime or LogAppendTime",
       choices=("CreateTime", "LogAppendTime")),
    _d("message.timestamp.before.max.ms", LONG_MAX, TYPE_LONG, "max allowed timestamp in the past", minimum=0),
    _d("message.timestamp.after.max.ms", LONG_MAX, TYPE_LONG, "max allowed timestamp in the future", minimum=0),
    _d("min.cleanable.dirty.ratio", 0.5, TYPE_DOUBLE, "dirty ratio that triggers compaction", minimum=0),
    _d("min.compaction.lag.ms", 0, TYPE_LONG, "min time a message stays uncompacted", minimum=0),
    _d("min.insync.replicas", 1, TYPE_INT, "replicas that must acknowledge acks=all writes", minimum=1),
    _d("preallocate", "false", TYPE_BOOLEAN, "preallocate segment files"),
    _d("retention.bytes", -1, TYPE_LONG, "max partition size before old segments are deleted"),
    _d("retention.ms", 604800000, TYPE_LONG, "max age of a closed segment before deletion", minimum=-1),
    _d("segment.bytes", 1073741824, TYPE_INT, "segment file size", minimum=14),
    _d("segment.index.bytes", 10485760, TYPE_INT, "offset index size", minimum=4),
    _d("segment.jitter.ms", 0, TYPE_LONG, "random jitter subtracted from segment.ms", minimum=0),
    _d("segment.ms", 604800000, TYPE_LONG, "time after which a segment is rolled", minimum=1),
    _d("unclean.leader.election.enable", "false", TYPE_BOOLEAN, "elect out-of-sync replicas as leader"),
    _d("message.downconversion.enable", "true", TYPE_BOOLEAN, "down-convert for old consumers"),
    _d("compression.gzip.level", -1, TYPE_INT, "gzip level of compression.type=gzip", minimum=-1, maximum=9),
    _d("compression.lz4.level", 9, TYPE_INT, "lz4 level of compression.type=lz4", minimum=1, maximum=17),
    _d("compression.zstd.level", 3, TYPE_INT, "zstd level of compression.type=zstd", minimum=-131072, maximum=22),
    _d("follower.replication.throttled.replicas", "", TYPE_LIST, "replicas throttled on the follower side"),
    _d("leader.replication.throttled.replicas", "", TYPE_LIST, "replicas throttled on the leader side"),
    _d("local.retention.bytes", -2, TYPE_LONG, "tiered storage: local size limit (-2: retention.bytes)", minimum=-2),
    _d("local.retention.ms", -2, TYPE_LONG, "tiered storage: local age limit (-2: retention.ms)", minimum=-2),
    _d("message.format.version", "3.0-IV1", TYPE_STRING,
       "deprecated: ignored since Kafka 3.0 (records are always written in format v2)", valid=is_kafka_version),
    _d("message.timestamp.difference.max.ms", LONG_MAX, TYPE_LONG,
       "deprecated: message.timestamp.before.max.ms / after.max.ms replace it", minimum=0),
    _d("remote.storage.enable", "false", TYPE_BOOLEAN, "tiered storage for this topic"),
    _d("remote.log.copy.disable", "false", TYPE_BOOLEAN, "tiered storage: stop copying segments"),
    _d("remote.log.delete.on.disable", "false", TYPE_BOOLEAN, "tiered storage: delete remote data on disable"),
    # Confluent Server's broker-side schema validation (produce-time check of the records' schema ids)
    _d("confluent.key.schema.validation", "false", TYPE_BOOLEAN,
       "refuse records whose key does not carry a schema id registered for the topic's key subject"),
    _d("confluent.value.schema.validation", "false", TYPE_BOOLEAN,
       "refuse records whose value does not carry a schema id registered for the topic's value subject"),
    _d("confluent.key.subject.name.strategy", SUBJECT_NAME_STRATEGIES[0], TYPE_STRING,
       "how the key subject is named", choices=SUBJECT_NAME_STRATEGIES),
    _d("confluent.value.subject.name.strategy", SUBJECT_NAME_STRATEGIES[0], TYPE_STRING,
       "how the value subject is named", choices=SUBJECT_NAME_STRATEGIES),
]}

TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.type": ("compression.type",),
    "confluent.key.schema.validation": ("confluent.key.schema.validation",),
    "confluent.value.schema.validation": ("confluent.value.schema.validation",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "min.insync.replicas": ("min.insync.replicas",),
    "preallocate": ("log.preallocate",),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.bytes": ("log.segment.bytes",),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "local.retention.bytes": ("log.local.retention.bytes",),
    "local.retention.ms": ("log.local.retention.ms",),
    "message.format.version": ("log.message.format.version",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
}

# Broker configs whose value is in another unit than the topic config they back.
UNIT_TO_MS = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
               "log.roll.hours": 3_600_000, "log.roll.jitter.hours": 3_600_000}

BROKER_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in [
    _d("node.id", 1, TYPE_INT, "this broker's id", read_only=True),
    _d("broker.id", 1, TYPE_INT, "this broker's id", read_only=True),
    _d("log.dirs", None, TYPE_STRING, "data directory", read_only=True),
    _d("listeners", "PLAINTEXT://127.0.0.1:9092", TYPE_LIST, "listen address", read_only=True),
    _d("advertised.listeners", None, TYPE_LIST, "address clients are told to use", read_only=True),
    _d("num.partitions", 1, TYPE_INT, "default partitions of an auto-created topic", minimum=1),
    _d("default.replication.factor", 1, TYPE_INT, "default replication factor", minimum=1),
    _d("auto.create.topics.enable", "true", TYPE_BOOLEAN, "create topics on Metadata requests"),
    _d("delete.topic.enable", "true", TYPE_BOOLEAN, "allow DeleteTopics"),
    _d("connections.max.idle.ms", 600000, TYPE_LONG, "close connections idle this long", minimum=1),
    _d("socket.request.max.bytes", 104857600, TYPE_INT, "largest request accepted (else disconnect)", minimum=1),
    _d("message.max.bytes", 1048588, TYPE_INT, "default max.message.bytes", minimum=0),
    _d("compression.type", "producer", TYPE_STRING, "default compression.type"),
    _d("confluent.key.schema.validation", "false", TYPE_BOOLEAN, "default confluent.key.schema.validation "
       "(needs schema.registry.listen or confluent.schema.registry.url)"),
    _d("confluent.value.schema.validation", "false", TYPE_BOOLEAN, "default confluent.value.schema.validation "
       "(needs schema.registry.listen or confluent.schema.registry.url)"),
    _d("log.cleanup.policy", "delete", TYPE_LIST, "default cleanup.policy"),
    _d("log.cleaner.enable", "true", TYPE_BOOLEAN, "run the log cleaner"),
    _d("log.cleaner.delete.retention.ms", 86400000, TYPE_LONG, "default delete.retention.ms"),
    _d("log.cleaner.max.compaction.lag.ms", LONG_MAX, TYPE_LONG, "default max.compaction.lag.ms"),
    _d("log.cleaner.min.cleanable.ratio", 0.5, TYPE_DOUBLE, "default min.cleanable.dirty.ratio"),
    _d("log.cleaner.min.compaction.lag.ms", 0, TYPE_LONG, "default min.compaction.lag.ms"),
    _d("log.flush.interval.messages", LONG_MAX, TYPE_LONG, "default flush.messages"),
    _d("log.flush.interval.ms", None, TYPE_LONG, "default flush.ms"),
    _d("log.flush.scheduler.interval.ms", LONG_MAX, TYPE_LONG, "how often the flusher checks logs"),
    _d("log.index.interval.bytes", 4096, TYPE_INT, "default index.interval.bytes"),
    _d("log.index.size.max.bytes", 10485760, TYPE_INT, "default segment.index.bytes"),
    _d("log.message.timestamp.type", "CreateTime", TYPE_STRING, "default message.timestamp.type"),
    _d("log.message.timestamp.before.max.ms", LONG_MAX, TYPE_LONG, "default message.timestamp.before.max.ms"),
    _d("log.message.timestamp.after.max.ms", LONG_MAX, TYPE_LONG, "default message.timestamp.after.max.ms"),
    _d("log.message.downconversion.enable", "true", TYPE_BOOLEAN, "default message.downconversion.enable"),
    _d("log.preallocate", "false", TYPE_BOOLEAN, "default preallocate"),
    _d("log.retention.bytes", -1, TYPE_LONG, "default retention.bytes"),
    _d("log.retention.ms", None, TYPE_LONG, "default retention.ms"),
    _d("log.retention.minutes", None, TYPE_INT, "default retention.ms in minutes"),
    _d("log.retention.hours", 168, TYPE_INT, "default retention.ms in hours"),
    _d("log.retention.check.interval.ms", 300000, TYPE_LONG, "how often retention is applied", minimum=1),
    _d("log.roll.ms", None, TYPE_LONG, "default segment.ms"),
    _d("log.roll.hours", 168, TYPE_INT, "default segment.ms in hours"),
    _d("log.roll.jitter.ms", None, TYPE_LONG, "default segment.jitter.ms"),
    _d("log.roll.jitter.hours", 0, TYPE_INT, "default segment.jitter.ms in hours"),
    _d("log.segment.bytes", 1073741824, TYPE_INT, "default segment.bytes"),
    _d("log.segment.delete.delay.ms", 60000, TYPE_LONG, "default file.delete.delay.ms"),
    _d("min.insync.replicas", 1, TYPE_INT, "default min.insync.replicas"),
    _d("unclean.leader.election.enable", "false", TYPE_BOOLEAN, "default unclean.leader.election.enable"),
    _d("offsets.topic.num.partitions", _GROUP.offsets_partitions, TYPE_INT, "partitions of __consumer_offsets", read_only=True),
    _d("offsets.topic.replication.factor", 1, TYPE_SHORT, "replication of __consumer_offsets", read_only=True),
    _d("offsets.retention.minutes", _GROUP.offsets_retention_ms // 60000, TYPE_INT, "committed offset retention"),
    _d("transaction.state.log.num.partitions", 50, TYPE_INT, "partitions of __transaction_state", read_only=True),
    _d("transaction.state.log.replication.factor", 1, TYPE_SHORT, "replication of __transaction_state",
       read_only=True),
    _d("transaction.state.log.min.isr", 2, TYPE_INT, "min.insync.replicas of __transaction_state (at most its "
       "replication factor)", read_only=True),
    _d("transaction.max.timeout.ms", 900000, TYPE_INT, "largest transaction.timeout.ms allowed"),
    _d("transaction.version", 2, TYPE_SHORT, "the transaction.version feature level finalized in ApiVersions: 2 "
       "(Kafka 4.0's) runs transactions v2 (KIP-890: epoch bump per transaction, implicit AddPartitions), 0 or 1 "
       "the v1 protocol only", read_only=True, choices=("0", "1", "2")),
    _d("transactional.id.expiration.ms", 604800000, TYPE_INT, "transactional id expiry"),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, TYPE_INT, "txn timeout check period",
       minimum=1),
    _d("producer.id.expiration.ms", 86400000, TYPE_INT, "idle producer state expiry"),
    _d("group.initial.rebalance.delay.ms", _GROUP.initial_rebalance_delay_ms, TYPE_INT, "delay of a new group's first rebalance"),
    _d("group.min.session.timeout.ms", _GROUP.min_session_timeout_ms, TYPE_INT, "smallest session timeout"),
    _d("group.max.session.timeout.ms", _GROUP.max_session_timeout_ms, TYPE_INT, "largest session timeout"),
    _d("group.consumer.assignors", ",".join(_GROUP.consumer_assignors), TYPE_LIST, "server-side assignors (KIP-848)"),
    _d("group.consumer.heartbeat.interval.ms", _GROUP.consumer_heartbeat_interval_ms, TYPE_INT, "KIP-848 heartbeat interval"),
    _d("group.consumer.session.timeout.ms", _GROUP.consumer_session_timeout_ms, TYPE_INT, "KIP-848 session timeout"),
    _d("group.consumer.min.session.timeout.ms", _GROUP.consumer_min_session_timeout_ms, TYPE_INT,
       "smallest KIP-848 session timeout a group's consumer.session.timeout.ms may set", minimum=1),
    _d("group.consumer.max.session.timeout.ms", _GROUP.consumer_max_session_timeout_ms, TYPE_INT,
       "largest KIP-848 session timeout a group's consumer.session.timeout.ms may set", minimum=1),
    _d("group.consumer.min.heartbeat.interval.ms", _GROUP.consumer_min_heartbeat_interval_ms, TYPE_INT,
       "smallest KIP-848 heartbeat interval a group's consumer.heartbeat.interval.ms may set", minimum=1),
    _d("group.consumer.max.heartbeat.interval.ms", _GROUP.consumer_max_heartbeat_interval_ms, TYPE_INT,
       "largest KIP-848 heartbeat interval a group's consumer.heartbeat.interval.ms may set", minimum=1),
    _d("group.streams.session.timeout.ms", _GROUP.streams_session_timeout_ms, TYPE_INT,
       "streams-group session timeout (KIP-1071)", minimum=1),
    _d("group.streams.heartbeat.interval.ms", _GROUP.streams_heartbeat_interval_ms, TYPE_INT,
       "streams-group heartbeat interval", minimum=1),
    _d("group.streams.num.standby.replicas", _GROUP.streams_num_standby_replicas, TYPE_INT,
       "standby replicas of each task of a streams group", minimum=0),
    _d("group.share.session.timeout.ms", _SHARE.session_timeout_ms, TYPE_INT, "share-group session timeout (KIP-932)",
       minimum=1),
    _d("group.share.heartbeat.interval.ms", _SHARE.heartbeat_interval_ms, TYPE_INT, "share-group heartbeat interval",
       minimum=1),
    _d("group.share.record.lock.duration.ms", _SHARE.record_lock_duration_ms, TYPE_INT,
       "how long a share consumer holds a record it acquired", minimum=1),
    _d("group.share.delivery.count.limit", _SHARE.delivery_count_limit, TYPE_INT,
       "deliveries of a record before it is archived", minimum=1),
    _d("group.share.partition.max.record.locks", _SHARE.partition_max_record_locks, TYPE_INT,
       "in-flight records of one share-partition", minimum=1),
    _d("share.coordinator.state.topic.num.partitions", _SHARE.state_partitions, TYPE_INT,
       "partitions of __share_group_state", read_only=True),
    _d("share.coordinator.state.topic.replication.factor", 1, TYPE_SHORT, "replication of __share_group_state "
       "in a cluster", read_only=True),
    _d("share.coordinator.state.topic.min.isr", 2, TYPE_INT, "min.insync.replicas of __share_group_state (at most "
       "its replication factor)", read_only=True),
    _d("broker.maintenance.interval.ms", 1000, TYPE_LONG, "tidelake: how often roll/flush/retention run"),
    _d("metrics.listen", None, TYPE_STRING, "tidelake: HOST:PORT serving /metrics (Prometheus) and /health/live, "
       "/health/ready; off unless set", read_only=True, pattern=r"|(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):\d{1,5}"),
    _d("schema.registry.listen", None, TYPE_STRING, "tidelake: http://HOST:PORT where this broker also serves a "
       "schema registry (its schemas in _schemas on this broker); off unless set", read_only=True,
       pattern=r"|https?://(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/]+):\d{1,5}"),
    _d("confluent.schema.registry.url", None, TYPE_STRING, "the schema registry that broker-side schema validation "
       "asks (default: the one schema.registry.listen serves)", read_only=True),
    _d("confluent.basic.auth.user.info", None, TYPE_PASSWORD, "USER:PASSWORD for the schema registry's basic auth",
       read_only=True),
    _d("confluent.schema.registry.cache.ms", 300000, TYPE_LONG, "how long the broker remembers that a schema id "
       "is registered for a subject", minimum=0),
    _d("connection.failed.authentication.delay.ms", 100, TYPE_INT,
       "how long a connection whose login failed stays open (muted) before it is closed", minimum=0),
    _d("cluster.id", "tidelake-cluster", TYPE_STRING, "cluster id reported in Metadata", read_only=True),
    _d("offset.metadata.max.bytes", _GROUP.offset_metadata_max_bytes, TYPE_INT, "largest committed offset metadata", read_only=True),
    _d("compression.gzip.level", -1, TYPE_INT, "default compression.gzip.level", minimum=-1, maximum=9),
    _d("compression.lz4.level", 9, TYPE_INT, "default compression.lz4.level", minimum=1, maximum=17),
    _d("compression.zstd.level", 3, TYPE_INT, "default compression.zstd.level", minimum=-131072, maximum=22),
    _d("log.local.retention.bytes", -2, TYPE_LONG, "default local.retention.bytes", minimum=-2),
    _d("log.local.retention.ms", -2, TYPE_LONG, "default local.retention.ms", minimum=-2),
    # deprecated in Kafka 3.9: accepted, described, without effect (Kafka 3.x ignores them too); static there
    _d("log.message.format.version", "3.0-IV1", TYPE_STRING, "deprecated default message.format.version",
       read_only=True, valid=is_kafka_version),
    _d("offsets.commit.required.acks", -1, TYPE_SHORT, "deprecated: commits wait for the offsets topic's ISR",
       read_only=True),
    _d("delegation.token.master.key", None, TYPE_PASSWORD, "deprecated alias of delegation.token.secret.key",
       read_only=True),
    _d("log.message.timestamp.difference.max.ms", LONG_MAX, TYPE_LONG,
       "deprecated default message.timestamp.difference.max.ms", minimum=0),
    # dynamic in Kafka (DynamicBrokerConfig): accepted here, no effect on a plaintext single node
    _d("max.connections", 2**31 - 1, TYPE_INT, "connection limit", minimum=0),
    _d("max.connections.per.ip", 2**31 - 1, TYPE_INT, "connection limit per client address", minimum=0),
    _d("max.connections.per.ip.overrides", "", TYPE_STRING, "per-address connection limits"),
    _d("max.connection.creation.rate", 2**31 - 1, TYPE_INT, "connection rate limit", minimum=0),
    _d("num.io.threads", 8, TYPE_INT, "request handler threads", minimum=1),
    _d("max.request.partition.size.limit", 2000, TYPE_INT,
       "most partitions one DescribeTopicPartitions response describes", read_only=True, minimum=1),
    _d("num.network.threads", 3, TYPE_INT, "network threads", minimum=1),
    _d("num.replica.fetchers", 1, TYPE_INT, "replica fetcher threads"),
    _d("num.recovery.threads.per.data.dir", 2, TYPE_INT, "log recovery threads", minimum=1),
    _d("background.threads", 10, TYPE_INT, "background task threads", minimum=1),
    _d("log.cleaner.threads", 1, TYPE_INT, "log cleaner threads", minimum=0),
    _d("log.cleaner.io.max.bytes.per.second", 1.7976931348623157e308, TYPE_DOUBLE, "cleaner I/O limit"),
    _d("log.cleaner.dedupe.buffer.size", 134217728, TYPE_LONG, "cleaner dedupe memory"),
    _d("log.cleaner.io.buffer.size", 524288, TYPE_INT, "cleaner I/O buffers", minimum=0),
    _d("log.cleaner.io.buffer.load.factor", 0.9, TYPE_DOUBLE, "cleaner dedupe buffer load factor"),
    _d("log.cleaner.backoff.ms", 15000, TYPE_LONG, "cleaner sleep when idle", minimum=0),
    _d("sasl.kerberos.service.name", None, TYPE_STRING, "Kerberos principal name Kafka runs as"),
    _d("sasl.kerberos.kinit.cmd", "/usr/bin/kinit", TYPE_STRING, "Kerberos kinit command path"),
    _d("sasl.kerberos.ticket.renew.window.factor", 0.8, TYPE_DOUBLE, "Kerberos ticket renew window"),
    _d("sasl.kerberos.ticket.renew.jitter", 0.05, TYPE_DOUBLE, "Kerberos ticket renew jitter"),
    _d("sasl.kerberos.min.time.before.relogin", 60000, TYPE_LONG, "Kerberos time between refresh attempts"),
    _d("sasl.kerberos.principal.to.local.rules", "DEFAULT", TYPE_LIST, "principal name mapping rules"),
    _d("sasl.enabled.mechanisms", "GSSAPI", TYPE_LIST, "enabled SASL mechanisms"),
    _d("sasl.jaas.config", None, TYPE_PASSWORD, "JAAS login context"),
    _d("sasl.login.refresh.window.factor", 0.8, TYPE_DOUBLE, "login refresh window", minimum=0.5, maximum=1.0),
    _d("sasl.login.refresh.window.jitter", 0.05, TYPE_DOUBLE, "login refresh jitter", minimum=0.0, maximum=0.25),
    _d("sasl.login.refresh.min.period.seconds", 60, TYPE_SHORT, "login refresh minimum period", minimum=0,
       maximum=900),
    _d("sasl.login.refresh.buffer.seconds", 300, TYPE_SHORT, "login refresh buffer", minimum=0, maximum=3600),
    _d("sasl.mechanism.inter.broker.protocol", "GSSAPI", TYPE_STRING, "inter-broker SASL mechanism"),
    _d("ssl.keystore.password", None, TYPE_PASSWORD, "keystore password"),
    _d("ssl.key.password", None, TYPE_PASSWORD, "private key password"),
    _d("ssl.truststore.password", None, TYPE_PASSWORD, "truststore password"),
    _d("ssl.keystore.location", None, TYPE_STRING, "keystore file"),
    _d("ssl.truststore.location", None, TYPE_STRING, "truststore file"),
    _d("ssl.endpoint.identification.algorithm", "https", TYPE_STRING, "server hostname verification"),
    _d("ssl.client.auth", DEFAULT_CLIENT_AUTH, TYPE_STRING, "client authentication", choices=tuple(CLIENT_AUTH)),
    _d("principal.builder.class", None, TYPE_CLASS, "principal builder"),
    _d("ssl.principal.mapping.rules", "DEFAULT", TYPE_STRING, "how a certificate's subject DN becomes a principal "
       "(only DEFAULT: the DN itself)"),
    _d("sasl.server.callback.handler.class", None, TYPE_CLASS, "the SASL server's callback handler "
       "(OAUTHBEARER: Kafka's OAuthBearerValidatorCallbackHandler selects the JWKS validator)"),
    # SASL/OAUTHBEARER as Kafka 3.9 defines them (SaslConfigs); read per listener as
    # listener.name.<l>.oauthbearer.<name> first (security/oauth_config.py)
    _d("sasl.oauthbearer.jwks.endpoint.url", None, TYPE_STRING, "where the broker fetches the provider's JSON Web "
       "Key Set (https:, http: or file:); set: tokens are verified with it"),
    _d("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3600000, TYPE_LONG, "how often the JWKS is fetched again",
       minimum=0),
    _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100, TYPE_LONG,
       "the least wait between two fetches of the JWKS", minimum=0),
    _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10000, TYPE_LONG,
       "the longest wait between JWKS fetch attempts", minimum=0),
    _d("sasl.oauthbearer.expected.issuer", None, TYPE_STRING, "the iss a token must carry (unset: any)"),
    _d("sasl.oauthbearer.expected.audience", None, TYPE_LIST, "the aud values a token must name one of (unset: any)"),
    _d("sasl.oauthbearer.clock.skew.seconds", 30, TYPE_INT, "allowed clock difference with the token's issuer",
       minimum=0),
    _d("sasl.oauthbearer.sub.claim.name", "sub", TYPE_STRING, "the claim naming the principal"),
    _d("sasl.oauthbearer.scope.claim.name", "scope", TYPE_STRING, "the claim holding the token's scope"),
    _d("sasl.oauthbearer.token.endpoint.url", None, TYPE_STRING, "the provider's token endpoint (clients' login)"),
    _d("sasl.oauthbearer.header.urlencode", "false", TYPE_BOOLEAN,
       "URL-encode client_id and client_secret in the token request's header (clients' login)"),
    _d("metric.reporters", "", TYPE_LIST, "metric reporter classes"),
    _d("follower.replication.throttled.rate", LONG_MAX, TYPE_LONG, "follower replication throttle", minimum=0),
    _d("leader.replication.throttled.rate", LONG_MAX, TYPE_LONG, "leader replication throttle", minimum=0),
    _d("replica.alter.log.dirs.io.max.bytes.per.second", LONG_MAX, TYPE_LONG, "log dir move throttle", minimum=0),
    _d("producer.id.expiration.check.interval.ms", 600000, TYPE_INT, "producer id expiry check", minimum=1,
       read_only=True),
    _d("remote.log.manager.copy.max.bytes.per.second", LONG_MAX, TYPE_LONG, "tiered storage copy throttle",
       minimum=1),
    # tiered storage (KIP-405): Kafka's plug-in class names reduced to one URL and a table storage's options
    _d("remote.log.storage.system.enable", "false", TYPE_BOOLEAN, "tiered storage on this broker", read_only=True),
    _d("remote.log.storage.url", None, TYPE_STRING, "tidelake: where closed segments are copied "
       "(s3://bucket/prefix, or a path)", read_only=True),
    _d("remote.log.storage.endpoint", None, TYPE_STRING, "tidelake: the S3 endpoint of remote.log.storage.url",
       read_only=True),
    _d("remote.log.storage.region", None, TYPE_STRING, "tidelake: the S3 region", read_only=True),
    _d("remote.log.storage.access_key_id", None, TYPE_STRING, "tidelake: the S3 access key id", read_only=True),
    _d("remote.log.storage.secret_access_key", None, TYPE_PASSWORD, "tidelake: the S3 secret access key",
       read_only=True),
    _d("remote.log.storage.session_token", None, TYPE_PASSWORD, "tidelake: the S3 session token", read_only=True),
    _d("remote.log.storage.allow_http", None, TYPE_BOOLEAN, "tidelake: allow an http:// endpoint", read_only=True),
    _d("remote.log.manager.task.interval.ms", 30000, TYPE_LONG, "how often segments are copied and remote "
       "retention applied", read_only=True, minimum=1),
    _d("remote.log.index.file.cache.total.size.bytes", 1073741824, TYPE_LONG, "remote index cache size",
       read_only=True, minimum=1),
    _d("remote.log.reader.cache.bytes", 268435456, TYPE_LONG, "tidelake: bytes of remote segment data kept "
       "(ranged reads and prefetch of the next chunks)", read_only=True, minimum=1),
    _d("remote.list.offsets.request.timeout.ms", 30000, TYPE_INT, "how long a ListOffsets by timestamp waits "
       "on the remote segments (then REQUEST_TIMED_OUT)", read_only=True, minimum=1),
    # static in Kafka: refused as dynamic updates ("Cannot update these configs dynamically")
    _d("process.roles", None, TYPE_LIST, "KRaft roles of this node", read_only=True),
    _d("controller.quorum.voters", "", TYPE_LIST, "KRaft controller quorum", read_only=True),
    _d("controller.listener.names", None, TYPE_STRING, "listeners of the KRaft controller", read_only=True),
    _d("inter.broker.listener.name", None, TYPE_STRING, "listener between brokers", read_only=True),
    _d("inter.broker.protocol.version", "3.9-IV0", TYPE_STRING, "inter-broker protocol", read_only=True,
       valid=is_kafka_version),
    _d("listener.security.protocol.map", "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
       TYPE_STRING, "listener protocols", read_only=True),
    _d("super.users", None, TYPE_STRING, "principals allowed everything (User:a;User:b)", read_only=True),
    _d("allow.everyone.if.no.acl.found", "false", TYPE_BOOLEAN, "allow a resource without ACLs", read_only=True),
    _d("sasl.server.max.receive.size", 524288, TYPE_INT, "largest frame before authentication", read_only=True,
       minimum=1),
    _d("connections.max.reauth.ms", 0, TYPE_LONG,
       "most milliseconds a SASL session lasts before the client re-authenticates (KIP-368; 0: no limit)",
       read_only=True, minimum=0),
    _d("zookeeper.connect", None, TYPE_STRING, "ZooKeeper address (ZooKeeper mode: a cluster)", read_only=True),
    _d("zookeeper.session.timeout.ms", 18000, TYPE_INT, "ZooKeeper session timeout", read_only=True, minimum=1),
    _d("zookeeper.connection.timeout.ms", 18000, TYPE_INT, "wait for ZooKeeper at start", read_only=True,
       minimum=1),
    _d("replica.lag.time.max.ms", 30000, TYPE_LONG, "a follower not caught up this long leaves the ISR",
       read_only=True, minimum=1),
    _d("replica.fetch.wait.max.ms", 500, TYPE_INT, "followers' Fetch max wait", read_only=True, minimum=0),
    _d("replica.fetch.max.bytes", 1048576, TYPE_INT, "followers' Fetch bytes per partition", read_only=True,
       minimum=0),
    _d("broker.rack", None, TYPE_STRING, "rack of this broker", read_only=True),
    _d("log.dir", "/tmp/kafka-logs", TYPE_STRING, "data directory", read_only=True),
    _d("authorizer.class.name", "", TYPE_STRING, "authorizer", read_only=True),
    _d("request.timeout.ms", 30000, TYPE_INT, "inter-broker request timeout", read_only=True),
    _d("replica.high.watermark.checkpoint.interval.ms", 5000, TYPE_LONG,
       "how often a broker records its partitions' high watermarks", read_only=True, minimum=1),
    _d("offsets.commit.timeout.ms", 5000, TYPE_INT, "how long an offset commit waits for the offsets topic's ISR",
       read_only=True, minimum=1),
    _d("offsets.retention.check.interval.ms", _GROUP.offsets_retention_check_interval_ms, TYPE_LONG,
       "how often expired committed offsets are removed", read_only=True, minimum=1),
    # the controller (ZooKeeper mode)
    _d("auto.leader.rebalance.enable", "true", TYPE_BOOLEAN,
       "the controller moves leadership back to preferred replicas", read_only=True),
    _d("leader.imbalance.check.interval.seconds", 300, TYPE_LONG, "how often the controller checks leader balance",
       read_only=True, minimum=1),
    _d("leader.imbalance.per.broker.percentage", 10, TYPE_INT,
       "share of a broker's partitions led elsewhere before a rebalance", read_only=True, minimum=0),
    _d("controlled.shutdown.enable", "true", TYPE_BOOLEAN, "hand leadership over before a broker stops",
       read_only=True),
    _d("controlled.shutdown.max.retries", 3, TYPE_INT, "attempts at a controlled shutdown", read_only=True,
       minimum=1),
    _d("controlled.shutdown.retry.backoff.ms", 5000, TYPE_LONG, "wait between controlled shutdown attempts",
       read_only=True, minimum=0),
]}


# Every other broker config Kafka 3.9 defines: accepted in server.properties and --set (a stock Kafka
# file starts), stored and described, without effect on a single plaintext node.
KAFKA_UNTYPED_BROKER_CONFIGS = frozenset({
    "advertised.host.name", "advertised.port", "alter.config.policy.class.name",
    "alter.log.dirs.replication.quota.window.num", "alter.log.dirs.replication.quota.window.size.seconds",
    "auto.include.jmx.reporter", "broker.heartbeat.interval.ms",
    "broker.id.generation.enable", "broker.session.timeout.ms", "client.quota.callback.class",
    "client.telemetry.max.bytes",
    "control.plane.listener.name", "controller.quorum.append.linger.ms",
    "controller.quorum.bootstrap.servers", "controller.quorum.election.backoff.max.ms",
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms",
    "controller.quota.window.num", "controller.quota.window.size.seconds", "controller.socket.timeout.ms",
    "create.topic.policy.class.name", "delegation.token.expiry.check.interval.ms",
    "delegation.token.expiry.time.ms", "delegation.token.max.lifetime.ms",
    "delegation.token.secret.key", "delete.records.purgatory.purge.interval.requests", "early.start.listeners",
    "eligible.leader.replicas.enable", "fetch.max.bytes", "fetch.purgatory.purge.interval.requests",
    "group.consumer.max.size", "group.consumer.migration.policy", "group.coordinator.append.linger.ms",
    "group.coordinator.new.enable", "group.coordinator.rebalance.protocols", "group.coordinator.threads",
    "group.max.size", "group.share.enable",
    "group.share.max.groups", "group.share.max.heartbeat.interval.ms",
    "group.share.max.record.lock.duration.ms", "group.share.max.session.timeout.ms", "group.share.max.size",
    "group.share.min.heartbeat.interval.ms", "group.share.min.record.lock.duration.ms",
    "group.share.min.session.timeout.ms",
    "host.name",
    "initial.broker.registration.timeout.ms", "kafka.metrics.polling.interval.secs", "kafka.metrics.reporters",
    "log.dir.failure.timeout.ms", "log.flush.offset.checkpoint.interval.ms",
    "log.flush.start.offset.checkpoint.interval.ms", "log.initial.task.delay.ms", "log.remote.copy.lag.bytes",
    "log.remote.copy.lag.ms", "max.incremental.fetch.session.cache.slots",
    "metadata.log.dir", "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms", "metadata.log.segment.bytes", "metadata.log.segment.min.bytes",
    "metadata.log.segment.ms", "metadata.max.idle.interval.ms", "metadata.max.retention.bytes",
    "metadata.max.retention.ms", "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms",
    "num.replica.alter.log.dirs.threads",
    "offsets.load.buffer.size", "offsets.topic.compression.codec",
    "offsets.topic.segment.bytes", "password.encoder.cipher.algorithm", "password.encoder.iterations",
    "password.encoder.key.length", "password.encoder.keyfactory.algorithm", "password.encoder.old.secret",
    "password.encoder.secret", "port", "producer.purgatory.purge.interval.requests",
    "queued.max.request.bytes", "queued.max.requests", "quota.window.num", "quota.window.size.seconds",
    "remote.fetch.max.wait.ms",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.copy.quota.window.num", "remote.log.manager.copy.quota.window.size.seconds",
    "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.fetch.quota.window.num", "remote.log.manager.fetch.quota.window.size.seconds",
    "remote.log.manager.thread.pool.size",
    "remote.log.metadata.custom.metadata.max.bytes", "remote.log.metadata.manager.class.name",
    "remote.log.metadata.manager.class.path", "remote.log.metadata.manager.impl.prefix",
    "remote.log.metadata.manager.listener.name", "remote.log.reader.max.pending.tasks",
    "remote.log.reader.threads", "remote.log.storage.manager.class.name",
    "remote.log.storage.manager.class.path", "remote.log.storage.manager.impl.prefix",
    "replica.fetch.backoff.ms",
    "replica.fetch.min.bytes", "replica.fetch.response.max.bytes",
    "replica.selector.class",
    "replica.socket.receive.buffer.bytes", "replica.socket.timeout.ms", "replication.quota.window.num",
    "replication.quota.window.size.seconds", "reserved.broker.max.id", "sasl.client.callback.handler.class",
    "sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms", "sasl.login.retry.backoff.max.ms", "sasl.login.retry.backoff.ms",
    "security.inter.broker.protocol",
    "security.providers", "server.max.startup.time.ms", "socket.connection.setup.timeout.max.ms",
    "socket.connection.setup.timeout.ms", "socket.listen.backlog.size", "socket.receive.buffer.bytes",
    "socket.send.buffer.bytes", "ssl.allow.dn.changes", "ssl.allow.san.changes", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.engine.factory.class", "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.type",
    "ssl.protocol", "ssl.provider", "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates", "ssl.truststore.type", "telemetry.max.bytes",
    "transaction.partition.verification.enable", "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transaction.state.log.load.buffer.size",
    "transaction.state.log.segment.bytes", "unstable.api.versions.enable", "unstable.feature.versions.enable",
    "zookeeper.clientCnxnSocket", "zookeeper.max.in.flight.requests",
    "zookeeper.metadata.migration.enable", "zookeeper.metadata.migration.min.batch.size",
    "zookeeper.set.acl", "zookeeper.ssl.cipher.suites",
    "zookeeper.ssl.client.enable", "zookeeper.ssl.crl.enable", "zookeeper.ssl.enabled.protocols",
    "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.keystore.location",
    "zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type", "zookeeper.ssl.ocsp.enable",
    "zookeeper.ssl.protocol", "zookeeper.ssl.truststore.location", "zookeeper.ssl.truststore.password",
    "zookeeper.ssl.truststore.type",
})
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's per-listener overrides (listener.name.<listener>.<config>) are accepted the same way.
_PER_LISTENER_PREFIX = "listener.name."
# What a name in server.properties / --set may be close to: every broker name and topic default.
_KNOWN_STATIC = frozenset(BROKER_CONFIGS) | KAFKA_UNTYPED_BROKER_CONFIGS | frozenset(
    name for synonyms in TOPIC_SYNONYMS.values() for name in synonyms)


class ConfigError(ValueError):
    """A static broker config (server.properties, --set) the broker cannot start with; the message
    says which key, where it came from, and what would be accepted."""


# Kafka's PASSWORD configs among the untyped and per-listener ones (listener.name.<l>.<mechanism>.
# sasl.jaas.config holds PLAIN's passwords): described as sensitive, never with their value
_SECRET_SUFFIXES = ("sasl.jaas.config", "password", "ssl.keystore.key", "secret.key", "encoder.secret",
                    "encoder.old.secret")


def is_secret_name(name: str) -> bool:
    return name.endswith(_SECRET_SUFFIXES)


def broker_definition(name: str) -> ConfigDef | None:
    """The definition of a broker config, or of the config a per-listener name overrides (Kafka's
    ``listener.name.<listener>.<config>`` and, for SASL settings, ``listener.name.<listener>.<mechanism>.<config>``),
    named as given so that a bad value's message names the key that holds it; None for a name without one."""
    defn = BROKER_CONFIGS.get(name)
    if defn is not None or not name.startswith(_PER_LISTENER_PREFIX):
        return defn
    _listener, _, rest = name[len(_PER_LISTENER_PREFIX):].partition(".")
    base = BROKER_CONFIGS.get(rest) or BROKER_CONFIGS.get(rest.partition(".")[2])
    return None if base is None else replace(base, name=name)


def is_known_static_name(name: str) -> bool:
    return name in _KNOWN_STATIC or name.startswith(_PER_LISTENER_PREFIX)


def unknown_name_message(name: str) -> str:
    """``unknown broker config 'x'``, with the closest known name(s) when there are any."""
    close = difflib.get_close_matches(name, _KNOWN_STATIC, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    if not close and name in TOPIC_CONFIGS:
        hint = f" ({name} is a topic config; its broker default is {TOPIC_SYNONYMS[name][0]})"
    return f"unknown broker config '{name}'{hint}"


def is_list_config(name: str) -> bool:
    """Whether a topic or broker config is a list (IncrementalAlterConfigs APPEND/SUBTRACT need one)."""
    defn = TOPIC_CONFIGS.get(name) or BROKER_CONFIGS.get(name)
    return defn is not None and defn.type == TYPE_LIST
