"""The broker as the console's pages see it: topics (partitions, watermarks, sizes, configs) and consumer groups
(members, committed offsets, lag), through confluent-kafka's AdminClient (and kafka-python's for log-dir sizes,
which librdkafka's admin API lacks, and for DescribeGroups); share groups (KIP-932), which librdkafka neither lists
nor describes, through kafka-python's ListGroups and ``tidelake.kafka_admin``'s ShareGroupDescribe and
DescribeShareGroupOffsets (a share group has start offsets, not committed ones).

Each group is described with the request its kind answers, as ListGroups names the kind: a classic group with
DescribeGroups, a KIP-848 consumer group with ConsumerGroupDescribe. (librdkafka's describe sends
ConsumerGroupDescribe first whatever the group; Kafka answers it GROUP_ID_NOT_FOUND for a classic group, so
every page view and every sample counted as an error in the broker's request metrics.)

Every admin answer is kept for ``ttl`` seconds, so a page (and the sampler, and several browsers) cost the
broker one round of requests per ``ttl``, and pages answer from memory in between.
"""
from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from cachetools import TTLCache

from tidelake.kafka_admin.share_groups import ShareAdminError, ShareGroupAdmin

TopicPartitionKey = tuple[str, int]


class BrokerUnavailable(RuntimeError):
    """The broker did not answer (or refused) an admin request; the message says which and why."""


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    start_offset: int
    end_offset: int
    size_bytes: int | None

    @property
    def messages(self) -> int:
        return max(0, self.end_offset - self.start_offset)


@dataclass(frozen=True)
class TopicSummary:
    name: str
    internal: bool
    partitions: list[PartitionRow]
    error: str | None = None

    @property
    def messages(self) -> int:
        return sum(p.messages for p in self.partitions)

    @property
    def end_offset(self) -> int:
        return sum(p.end_offset for p in self.partitions)

    @property
    def size_bytes(self) -> int | None:
        sizes = [p.size_bytes for p in self.partitions]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ConfigRow:
    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    sensitive: bool


@dataclass(frozen=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None
    end_offset: int
    lag: int
    member: str | None = None
    start_offset: int | None = None   # a share group's share-partition start offset (it commits none)


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    type: str
    protocol: str
    members: list[dict[str, Any]] = field(default_factory=list)
    offsets: list[LagRow] = field(default_factory=list)
    error: str | None = None

    @property
    def lag(self) -> int:
        return sum(r.lag for r in self.offsets)

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.offsets})


# a config's source as Kafka's admin client names it (ConfigEntry.ConfigSource), by its number in
# DescribeConfigs (confluent-kafka hands over the number, and its own enum lacks 6 and 7)
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                  7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}


def config_source(number: int) -> str:
    return CONFIG_SOURCES.get(int(number), f"UNKNOWN ({number})")


# DescribeGroups' state names, written as confluent-kafka names the states of either kind of group
CLASSIC_STATES = {"PreparingRebalance": "PREPARING_REBALANCING", "CompletingRebalance": "COMPLETING_REBALANCING",
                  "Stable": "STABLE", "Empty": "EMPTY", "Dead": "DEAD"}


SHARE_TYPE = "SHARE"   # ListGroups' name of a share group's type, as the console shows it
CLIENT_ID = "tidelake-console"


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: list[TopicPartitionKey]


@dataclass(frozen=True)
class DescribedGroup:
    """What DescribeGroups or ConsumerGroupDescribe said of a group."""
    state: str
    type: str
    protocol: str
    members: list[GroupMember]


class BrokerView:
    """Cached admin reads of one cluster (thread-safe: pages run in a thread pool)."""

    def __init__(self, client_config: Mapping[str, Any], timeout: float,
                 kafka_python_config: Mapping[str, Any] | None = None, ttl: float = 2.0):
        from confluent_kafka.admin import AdminClient
        self.client_config = dict(client_config)
        self.bootstrap = str(self.client_config["bootstrap.servers"])
        self.timeout = timeout
        self._kafka_python_config = dict(kafka_python_config or {})
        self._admin = AdminClient(self.client_config)
        self._kp_admin = None
        self._kp_lock = threading.Lock()   # kafka-python's admin client, one call at a time
        self._share_admin: ShareGroupAdmin | None = None
        self._share_lock = threading.Lock()   # its network client, one request at a time
        self._lock = threading.Lock()
        self._cache: TTLCache = TTLCache(maxsize=1024, ttl=ttl)
        self._inflight: dict[Any, threading.Lock] = {}

    def close(self) -> None:
        if self._kp_admin is not None:
            self._kp_admin.close()
        if self._share_admin is not None:
            self._share_admin.close()

    # ------------------------------------------------------------------ caching
    def _cached(self, key: Any, compute: Callable[[], Any], fresh: bool = False) -> Any:
        """``compute()``'s value, kept for the TTL; concurrent callers of one key wait for a single computation.
        ``fresh``: compute now whatever is cached (the sampler, whose samples must not repeat a cached value)."""
        with self._lock:
            if key in self._cache and not fresh:
                return self._cache[key]
            gate = self._inflight.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                if key in self._cache and not fresh:
                    return self._cache[key]
            value = compute()
            with self._lock:
                self._cache[key] = value
                self._inflight.pop(key, None)
            return value

    def invalidate(self) -> None:
        """Forget every cached answer (after an action changed the broker's state)."""
        with self._lock:
            self._cache.clear()

    def _wait(self, future, what: str) -> Any:
        from confluent_kafka import KafkaException
        try:
            return future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            raise BrokerUnavailable(f"{what}: no answer from {self.bootstrap} within {self.timeout:g}s") from None
        except KafkaException as e:
            err = e.args[0] if e.args else e
            text = f"{err.name()}: {err.str()}" if hasattr(err, "name") else str(err)
            raise BrokerUnavailable(f"{what}: {text}") from None

    # ------------------------------------------------------------------ cluster and topics
    def metadata(self, fresh: bool = False):
        """Cluster metadata (brokers, topics, partitions with leaders and replicas)."""
        from confluent_kafka import KafkaException

        def fetch():
            try:
                return self._admin.list_topics(timeout=self.timeout)
            except KafkaException as e:
                detail = e.args[0].str() if e.args and hasattr(e.args[0], "str") else str(e)
                raise BrokerUnavailable(f"no Kafka broker answered at {self.bootstrap} within "
                                        f"{self.timeout:g}s: {detail}") from None
        return self._cached("metadata", fetch, fresh)

    def cluster(self) -> dict[str, Any]:
        md = self.metadata()
        return {"cluster_id": md.cluster_id, "controller_id": md.controller_id,
                "brokers": sorted((b.id, b.host, b.port) for b in md.brokers.values()),
                "bootstrap": self.bootstrap}

    def topic_names(self, internal: bool = True) -> list[str]:
        return sorted(t for t in self.metadata().topics if internal or not t.startswith("__"))

    def list_offsets(self, partitions: list[TopicPartitionKey], spec: str,
                     fresh: bool = False) -> dict[TopicPartitionKey, int]:
        """Earliest or latest offset per partition (one ListOffsets round, cached)."""
        return self._cached(("offsets", spec, tuple(sorted(partitions))), lambda: self._list_offsets(partitions, spec),
                            fresh)

    def _list_offsets(self, partitions: list[TopicPartitionKey], spec: str) -> dict[TopicPartitionKey, int]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec
        if not partitions:
            return {}
        make = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest}[spec]
        futures = self._admin.list_offsets({TopicPartition(t, p): make() for t, p in partitions},
                                           request_timeout=self.timeout)
        return {(tp.topic, tp.partition): self._wait(f, f"ListOffsets {tp.topic}-{tp.partition}").offset
                for tp, f in futures.items()}

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first offset whose timestamp is at or after ``timestamp_ms``; None when there is none."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec
        tp = TopicPartition(topic, partition)
        futures = self._admin.list_offsets({tp: OffsetSpec.for_timestamp(timestamp_ms)}, request_timeout=self.timeout)
        offset = self._wait(next(iter(futures.values())), f"ListOffsets {topic}-{partition} by time").offset
        return offset if offset >= 0 else None

    def sizes(self) -> dict[TopicPartitionKey, int]:
        """Bytes on disk per partition (DescribeLogDirs, summed over log dirs); empty if the broker refuses it."""
        return self._cached("sizes", self._sizes)

    def _kafka_python(self, call: Callable[[Any], Any]) -> Any:
        """``call(admin)`` with kafka-python's admin client (made on first use), one call at a time."""
        with self._kp_lock:
            if self._kp_admin is None:
                from kafka.admin import KafkaAdminClient
                timeout_ms = max(1, int(self.timeout * 1000))
                self._kp_admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=CLIENT_ID,
                                                  request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms,
                                                  **self._kafka_python_config)
            return call(self._kp_admin)

    def _sizes(self) -> dict[TopicPartitionKey, int]:
        from kafka.errors import KafkaError
        try:
            answer = self._kafka_python(lambda admin: admin.describe_log_dirs())
        except (KafkaError, OSError):
            return {}  # sizes are shown as unknown; everything else still works
        out: dict[TopicPartitionKey, int] = {}
        for broker in answer:
            for log_dir in broker.get("log_dirs", []):
                for t in log_dir.get("topics", []):
                    for p in t.get("partitions", []):
                        key = (t["name"], p["partition_index"])
                        out[key] = out.get(key, 0) + int(p["partition_size"])
        return out

    def topics(self, internal: bool = False) -> list[TopicSummary]:
        return [self.topic(name) for name in self.topic_names(internal)]

    def topic(self, name: str) -> TopicSummary:
        md = self.metadata().topics.get(name)
        if md is None:   # perhaps created since the cached answer
            md = self.metadata(fresh=True).topics.get(name)
        if md is None:
            raise KeyError(name)
        keys = [(name, p) for p in sorted(md.partitions)]
        start, end = self.list_offsets(self._all_partitions(), "earliest"), self.list_offsets(
            self._all_partitions(), "latest")
        sizes = self.sizes()
        rows = [PartitionRow(p, md.partitions[p].leader, list(md.partitions[p].replicas), list(md.partitions[p].isrs),
                             start.get((name, p), 0), end.get((name, p), 0), sizes.get((name, p)) if sizes else None)
                for _, p in keys]
        return TopicSummary(name, name.startswith("__"), rows, md.error.str() if md.error is not None else None)

    def _all_partitions(self) -> list[TopicPartitionKey]:
        """Every partition of the cluster: one ListOffsets round answers every page for the TTL."""
        return sorted((t, p) for t, tm in self.metadata().topics.items() for p in tm.partitions)

    def end_offsets(self, fresh: bool = False) -> dict[TopicPartitionKey, int]:
        return self.list_offsets(self._all_partitions(), "latest", fresh)

    def configs(self, topic: str) -> list[ConfigRow]:
        return self._cached(("configs", topic), lambda: self._configs(topic))

    def _configs(self, topic: str) -> list[ConfigRow]:
        from confluent_kafka.admin import ConfigResource, ResourceType
        futures = self._admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)],
                                               request_timeout=self.timeout)
        entries = self._wait(next(iter(futures.values())), f"DescribeConfigs {topic}")
        return sorted((ConfigRow(e.name, None if e.is_sensitive else e.value, config_source(e.source),
                                 bool(e.is_default), bool(e.is_read_only), bool(e.is_sensitive))
                       for e in entries.values()),
                      key=lambda r: r.name)

    # ------------------------------------------------------------------ consumer groups
    def group_types(self, fresh: bool = False) -> dict[str, str]:
        """Every group id and its kind as ListGroups names it (CLASSIC, CONSUMER, SHARE)."""
        def fetch():
            result = self._wait(self._admin.list_consumer_groups(request_timeout=self.timeout), "ListGroups")
            kinds = {g.group_id: g.type.name for g in result.valid}
            kinds.update({g: SHARE_TYPE for g in self._share_group_ids()})
            return dict(sorted(kinds.items()))
        return self._cached("group_types", fetch, fresh)

    def _share_group_ids(self) -> list[str]:
        """The share groups, by kafka-python's ListGroups (librdkafka's asks for classic and consumer groups only)."""
        from kafka.errors import KafkaError
        try:
            listed = self._kafka_python(lambda admin: admin.list_groups(types_filter=[SHARE_TYPE.lower()]))
        except (KafkaError, OSError) as e:
            raise BrokerUnavailable(f"ListGroups (share): {e}") from None
        return [g["group_id"] for g in listed]

    def _share_request(self, call: Callable[[ShareGroupAdmin], Any]) -> Any:
        """``call(admin)`` with the share-group admin (made on first use), one request at a time."""
        with self._share_lock:
            try:
                if self._share_admin is None:
                    self._share_admin = ShareGroupAdmin(self.bootstrap, self.timeout, CLIENT_ID,
                                                        self._kafka_python_config)
                return call(self._share_admin)
            except ShareAdminError as e:
                raise BrokerUnavailable(str(e)) from None

    def group_ids(self, fresh: bool = False) -> list[str]:
        return list(self.group_types(fresh))

    def has_group(self, group_id: str) -> bool:
        """Whether the group exists (asking the broker again when the cached list lacks it)."""
        return group_id in self.group_ids() or group_id in self.group_ids(fresh=True)

    def groups(self) -> list[GroupSummary]:
        return [self.group(g) for g in self.group_ids()]

    def group(self, group_id: str, fresh: bool = False) -> GroupSummary:
        return self._cached(("group", group_id), lambda: self._group(group_id), fresh)

    def _consumer_group(self, group_id: str) -> DescribedGroup:
        """A KIP-848 group, by ConsumerGroupDescribe (librdkafka sends it first, and it answers)."""
        d = self._wait(self._admin.describe_consumer_groups([group_id], request_timeout=self.timeout)[group_id],
                       f"ConsumerGroupDescribe {group_id}")
        return DescribedGroup(d.state.name, d.type.name, d.partition_assignor or "", [
            GroupMember(m.member_id, m.client_id, m.host, m.group_instance_id,
                        sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment
                                                                    else [])))
            for m in d.members])

    def _classic_group(self, group_id: str) -> DescribedGroup:
        """A classic group, by DescribeGroups (kafka-python's admin, which decodes the members' assignments)."""
        from kafka.errors import KafkaError
        try:
            d = self._kafka_python(lambda admin: admin.describe_groups([group_id]))[group_id]
        except (KafkaError, OSError) as e:
            raise BrokerUnavailable(f"DescribeGroups {group_id}: {e}") from None
        if d["error"]:
            raise BrokerUnavailable(f"DescribeGroups {group_id}: {d['error']}")
        members = []
        for m in d["members"]:
            assignment = m["member_assignment"]   # decoded for the consumer protocol, else raw bytes
            parts = assignment.get("assigned_partitions", []) if isinstance(assignment, dict) else []
            members.append(GroupMember(m["member_id"], m["client_id"], m["client_host"], m["group_instance_id"],
                                       sorted((p["topic"], n) for p in parts for n in p["partitions"])))
        return DescribedGroup(CLASSIC_STATES.get(d["group_state"], d["group_state"].upper()), "CLASSIC",
                              d["protocol_data"], members)

    def _share_group(self, group_id: str) -> GroupSummary:
        """A share group: ShareGroupDescribe's members, DescribeShareGroupOffsets' start offsets and lag."""
        try:
            d = self._share_request(lambda admin: admin.describe(group_id))
            if d is None:
                raise BrokerUnavailable(f"ShareGroupDescribe {group_id}: the share group no longer exists")
            start = self._share_request(lambda admin: admin.start_offsets(group_id))
        except BrokerUnavailable as e:
            return GroupSummary(group_id, "UNKNOWN", SHARE_TYPE, "", error=str(e))
        owners: dict[TopicPartitionKey, list[str]] = {}
        members = []
        for m in d.members:
            for key in m.assignment:
                owners.setdefault(key, []).append(m.client_id)   # a share-partition may have several readers
            members.append({"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                            "instance_id": None, "assignment": list(m.assignment), "member_epoch": m.member_epoch})
        end = self.end_offsets()
        rows = []
        for s in start:
            log_end = end.get((s.topic, s.partition), 0)
            known = s.start_offset >= 0
            # the coordinator's lag (records not yet acknowledged); -1 when it does not know it
            lag = s.lag if s.lag >= 0 else (max(0, log_end - s.start_offset) if known else 0)
            rows.append(LagRow(s.topic, s.partition, None, log_end, lag,
                               ", ".join(owners.get((s.topic, s.partition), [])) or None,
                               s.start_offset if known else None))
        return GroupSummary(group_id, d.state.upper(), SHARE_TYPE, d.assignor, members, rows)

    def _group(self, group_id: str) -> GroupSummary:
        from confluent_kafka import ConsumerGroupTopicPartitions
        if self.group_types().get(group_id) == SHARE_TYPE:
            return self._share_group(group_id)
        try:
            if self.group_types().get(group_id) == "CONSUMER":
                d = self._consumer_group(group_id)
            else:
                d = self._classic_group(group_id)
            committed = self._wait(self._admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout)[group_id],
                f"OffsetFetch {group_id}")
        except BrokerUnavailable as e:
            return GroupSummary(group_id, "UNKNOWN", "", "", error=str(e))
        owner: dict[TopicPartitionKey, str] = {}
        members = []
        for m in d.members:
            for key in m.assignment:
                owner[key] = m.client_id
            members.append({"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                            "instance_id": m.instance_id, "assignment": m.assignment})
        offsets = {(tp.topic, tp.partition): tp.offset for tp in committed.topic_partitions
                   if tp.error is None and tp.offset >= 0}
        keys = sorted(set(offsets) | set(owner))
        end = self.end_offsets()
        rows = []
        for key in keys:
            log_end = end.get(key, 0)
            cur = offsets.get(key)
            rows.append(LagRow(key[0], key[1], cur, log_end, max(0, log_end - cur) if cur is not None else log_end,
                               owner.get(key)))
        return GroupSummary(group_id, d.state, d.type, d.protocol, members, rows)

    def reset_group_offsets(self, group_id: str, topic: str, to: str) -> dict[int, int]:
        """Move the group's offsets of ``topic`` to ``earliest`` or ``latest`` (kafka-consumer-groups
        --reset-offsets; the broker refuses it while the group has members)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        md = self.metadata().topics.get(topic)
        if md is None:
            raise KeyError(topic)
        keys = [(topic, p) for p in sorted(md.partitions)]
        target = self._list_offsets(keys, to)
        request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p, o) for (t, p), o in target.items()])
        self._wait(self._admin.alter_consumer_group_offsets([request], request_timeout=self.timeout)[group_id],
                   f"reset offsets of {group_id}")
        self.invalidate()
        return {p: o for (_, p), o in target.items()}
