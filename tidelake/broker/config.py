"""Broker and topic configuration with Kafka's names, defaults, types and synonyms.

Broker configs come from (lowest to highest precedence) built-in defaults, a ``server.properties``
file, ``--set key=value`` overrides, and dynamic updates via AlterConfigs on a broker resource.
A topic config's effective value is the topic override if any, else its broker synonym
(``segment.bytes`` <- ``log.segment.bytes``; ``retention.ms`` <- ``log.retention.ms`` /
``log.retention.minutes`` / ``log.retention.hours``), else Kafka's default. DescribeConfigs reports
that value with its source, exactly as Kafka's ``ConfigSource`` enumerates them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from tidelake.errors import InvalidConfig

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


def _d(name, default, type_, doc="", read_only=False, choices=None, minimum=None) -> ConfigDef:
    return ConfigDef(name, None if default is None else str(default), type_, doc, read_only, choices, minimum)


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
]}

TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.type": ("compression.type",),
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
}

# Broker configs whose value is in another unit than the topic config they back.
_UNIT_TO_MS = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
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
    _d("offsets.topic.num.partitions", 50, TYPE_INT, "partitions of __consumer_offsets", read_only=True),
    _d("offsets.topic.replication.factor", 1, TYPE_SHORT, "replication of __consumer_offsets", read_only=True),
    _d("offsets.retention.minutes", 10080, TYPE_INT, "committed offset retention"),
    _d("transaction.state.log.num.partitions", 50, TYPE_INT, "partitions of __transaction_state", read_only=True),
    _d("transaction.state.log.replication.factor", 1, TYPE_SHORT, "replication of __transaction_state",
       read_only=True),
    _d("transaction.max.timeout.ms", 900000, TYPE_INT, "largest transaction.timeout.ms allowed"),
    _d("transactional.id.expiration.ms", 604800000, TYPE_INT, "transactional id expiry"),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, TYPE_INT, "txn timeout check period"),
    _d("producer.id.expiration.ms", 86400000, TYPE_INT, "idle producer state expiry"),
    _d("group.initial.rebalance.delay.ms", 3000, TYPE_INT, "delay of a new group's first rebalance"),
    _d("group.min.session.timeout.ms", 6000, TYPE_INT, "smallest session timeout"),
    _d("group.max.session.timeout.ms", 1800000, TYPE_INT, "largest session timeout"),
    _d("group.consumer.assignors", "uniform,range", TYPE_LIST, "server-side assignors (KIP-848)"),
    _d("group.consumer.heartbeat.interval.ms", 5000, TYPE_INT, "KIP-848 heartbeat interval"),
    _d("group.consumer.session.timeout.ms", 45000, TYPE_INT, "KIP-848 session timeout"),
    _d("broker.maintenance.interval.ms", 1000, TYPE_LONG, "tidelake: how often roll/flush/retention run"),
    _d("cluster.id", "tidelake-cluster", TYPE_STRING, "cluster id reported in Metadata", read_only=True),
]}


def _validate(defn: ConfigDef, value: str | None) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    try:
        if defn.type in (TYPE_INT, TYPE_LONG, TYPE_SHORT):
            n = int(value)
            if defn.minimum is not None and n < defn.minimum:
                raise InvalidConfig(f"{defn.name}={value} is below the minimum {defn.minimum}")
            if defn.type == TYPE_INT and not -2**31 <= n < 2**31:
                raise InvalidConfig(f"{defn.name}={value} is out of int range")
        elif defn.type == TYPE_DOUBLE:
            x = float(value)
            if defn.minimum is not None and x < defn.minimum:
                raise InvalidConfig(f"{defn.name}={value} is below the minimum {defn.minimum}")
        elif defn.type == TYPE_BOOLEAN:
            if value.lower() not in ("true", "false"):
                raise InvalidConfig(f"{defn.name}={value} is not a boolean")
            value = value.lower()
    except ValueError:
        raise InvalidConfig(f"{defn.name}={value!r} is not a valid {defn.type and 'number'}") from None
    if defn.choices is not None:
        items = [v.strip() for v in value.split(",")] if defn.type == TYPE_LIST else [value]
        bad = [v for v in items if v not in defn.choices]
        if bad or not items:
            raise InvalidConfig(f"{defn.name}={value!r}: allowed values are {', '.join(defn.choices)}")
        value = ",".join(items)
    return value


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values of topic configs; return them normalised. Raises InvalidConfig."""
    out = {}
    for name, value in configs.items():
        defn = TOPIC_CONFIGS.get(name)
        if defn is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic config {name}")
        out[name] = _validate(defn, value)
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` subset: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    props = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep_pos, ch in enumerate(line):
            if ch in "=:":
                props[line[:sep_pos].strip()] = line[sep_pos + 1:].strip()
                break
        else:
            props[line] = ""
    return props


@dataclass
class ConfigEntry:
    """One config as DescribeConfigs reports it."""
    name: str
    value: str | None
    source: int
    read_only: bool
    type: int
    doc: str
    synonyms: list[tuple[str, str | None, int]]  # (name, value, source), highest precedence first

    @property
    def is_default(self) -> bool:
        return self.source == SOURCE_DEFAULT

    @property
    def sensitive(self) -> bool:
        return self.type == TYPE_PASSWORD


def is_list_config(name: str) -> bool:
    """Whether a topic or broker config is a list (IncrementalAlterConfigs APPEND/SUBTRACT need one)."""
    defn = TOPIC_CONFIGS.get(name) or BROKER_CONFIGS.get(name)
    return defn is not None and defn.type == TYPE_LIST


class BrokerConfig:
    """The broker's own configs: defaults < static (file, --set) < dynamic (AlterConfigs)."""

    def __init__(self, static: Mapping[str, str] | None = None, dynamic: Mapping[str, str] | None = None):
        self.static: dict[str, str] = {k: str(v) for k, v in (static or {}).items()}
        self.dynamic: dict[str, str] = dict(dynamic or {})
        for name, value in self.static.items():
            if name in BROKER_CONFIGS:
                self.static[name] = _validate(BROKER_CONFIGS[name], value)

    @classmethod
    def from_file(cls, path: str | Path | None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        props = parse_properties(Path(path).read_text()) if path else {}
        props.update(overrides or {})
        return cls(props)

    def lookup(self, name: str) -> tuple[str | None, int]:
        """(value, source) of a broker config; (None, SOURCE_UNKNOWN) if unset and without default."""
        if name in self.dynamic:
            return self.dynamic[name], SOURCE_DYNAMIC_BROKER
        if name in self.static:
            return self.static[name], SOURCE_STATIC_BROKER
        defn = BROKER_CONFIGS.get(name)
        if defn is not None:  # Kafka lists unset configs (e.g. log.retention.ms) as null defaults
            return defn.default, SOURCE_DEFAULT
        return None, SOURCE_UNKNOWN

    def get(self, name: str, default: str | None = None) -> str | None:
        value, _ = self.lookup(name)
        return default if value is None else value

    def get_int(self, name: str, default: int = 0) -> int:
        value = self.get(name)
        return default if value is None or value == "" else int(value)

    def get_bool(self, name: str, default: bool = False) -> bool:
        value = self.get(name)
        return default if value is None else value.strip().lower() == "true"

    def set_dynamic(self, name: str, value: str | None) -> None:
        defn = BROKER_CONFIGS.get(name)
        if defn is None:
            raise InvalidConfig(f"Unknown broker config name: {name}")
        if defn.read_only:
            raise InvalidConfig(f"Cannot update read-only broker config {name} dynamically")
        if value is None:
            self.dynamic.pop(name, None)
        else:
            self.dynamic[name] = _validate(defn, value)

    def validate_dynamic(self, name: str, value: str | None) -> None:
        defn = BROKER_CONFIGS.get(name)
        if defn is None:
            raise InvalidConfig(f"Unknown broker config name: {name}")
        if defn.read_only:
            raise InvalidConfig(f"Cannot update read-only broker config {name} dynamically")
        _validate(defn, value)

    def describe(self, names: Iterable[str] | None = None, with_synonyms: bool = False) -> list[ConfigEntry]:
        keys = list(BROKER_CONFIGS) + sorted(k for k in {*self.static, *self.dynamic} if k not in BROKER_CONFIGS)
        wanted = set(names) if names else None
        out = []
        for name in keys:
            if wanted is not None and name not in wanted:
                continue
            defn = BROKER_CONFIGS.get(name, ConfigDef(name, None, TYPE_STRING))
            value, source = self.lookup(name)
            synonyms = []
            if with_synonyms:
                if name in self.dynamic:
                    synonyms.append((name, self.dynamic[name], SOURCE_DYNAMIC_BROKER))
                if name in self.static:
                    synonyms.append((name, self.static[name], SOURCE_STATIC_BROKER))
                if defn.default is not None:
                    synonyms.append((name, defn.default, SOURCE_DEFAULT))
            out.append(ConfigEntry(name, value, source, defn.read_only, defn.type, defn.doc, synonyms))
        return out

    # -- topic defaults ------------------------------------------------------------------------
    def _synonym_chain(self, topic_name: str) -> list[tuple[str, str | None, int]]:
        """Broker-level values backing a topic config, highest precedence first, converted to the
        topic config's unit (e.g. ``log.retention.hours`` -> ms)."""
        chain = []
        for broker_name in TOPIC_SYNONYMS.get(topic_name, ()):
            for store, source in ((self.dynamic, SOURCE_DYNAMIC_BROKER), (self.static, SOURCE_STATIC_BROKER)):
                if broker_name in store:
                    chain.append((broker_name, _to_topic_unit(broker_name, store[broker_name]), source))
        # Kafka's defaults for the broker synonyms, e.g. log.retention.hours=168
        for broker_name in TOPIC_SYNONYMS.get(topic_name, ()):
            defn = BROKER_CONFIGS.get(broker_name)
            if defn is not None and defn.default is not None:
                chain.append((broker_name, _to_topic_unit(broker_name, defn.default), SOURCE_DEFAULT))
                break
        return chain

    def topic_default(self, topic_name: str) -> tuple[str | None, int]:
        for _name, value, source in self._synonym_chain(topic_name):
            if source != SOURCE_DEFAULT:
                return value, SOURCE_DYNAMIC_BROKER if source == SOURCE_DYNAMIC_BROKER else SOURCE_STATIC_BROKER
        defn = TOPIC_CONFIGS[topic_name]
        return defn.default, SOURCE_DEFAULT

    def effective_topic_configs(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Every topic config's effective value for a topic with these overrides."""
        out = {}
        for name in TOPIC_CONFIGS:
            out[name] = overrides[name] if name in overrides else self.topic_default(name)[0]
        return out

    def describe_topic(self, overrides: Mapping[str, str], names: Iterable[str] | None = None,
                       with_synonyms: bool = False) -> list[ConfigEntry]:
        wanted = set(names) if names else None
        out = []
        for name, defn in TOPIC_CONFIGS.items():
            if wanted is not None and name not in wanted:
                continue
            if name in overrides:
                value, source = overrides[name], SOURCE_TOPIC
            else:
                value, source = self.topic_default(name)
            synonyms = []
            if with_synonyms:
                if name in overrides:
                    synonyms.append((name, overrides[name], SOURCE_TOPIC))
                synonyms.extend(self._synonym_chain(name))
            out.append(ConfigEntry(name, value, source, False, defn.type, defn.doc, synonyms))
        return out


def _to_topic_unit(broker_name: str, value: str) -> str:
    factor = _UNIT_TO_MS.get(broker_name)
    if factor is None or value in (None, ""):
        return value
    n = int(value)
    return str(n * factor) if n >= 0 else str(n)
