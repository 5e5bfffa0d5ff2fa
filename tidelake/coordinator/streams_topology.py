"""A streams group's topology (KIP-1071) and its configuration against the topics that exist.

A Kafka Streams application sends its topology when a member joins: subtopologies, each reading source topics
(the user's) and repartition source topics (internal, written by other subtopologies), keeping state in changelog
topics (internal). The group coordinator, not the client, decides the internal topics' partition counts, as
Kafka's ``InternalTopicManager`` does:

1. every source topic must exist (else MISSING_SOURCE_TOPICS, no tasks);
2. a repartition topic without a fixed count gets the largest count among the topics read by the subtopologies
   writing to it (repeated until every count is known: a repartition topic may feed another);
3. the topics of a copartition group must have one count: the user's topics must already agree
   (else INCORRECTLY_PARTITIONED_TOPICS), repartition topics without a fixed count take theirs;
4. a subtopology has as many tasks as its largest input topic has partitions, and each of its changelog topics as
   many partitions as it has tasks;
5. internal topics that do not exist are to be created (MISSING_INTERNAL_TOPICS until they are: no tasks yet);
   an existing one with another partition count is INCORRECTLY_PARTITIONED_TOPICS.

Pure: ``configure`` reads partition counts through ``partitions_of(topic)`` (None: no such topic).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

# the heartbeat response's status codes (StreamsGroupHeartbeatResponse.Status)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4


@dataclass(frozen=True)
class TopicInfo:
    """An internal topic as the topology asks for it: 0 partitions is "the coordinator decides", 0 replication
    factor the broker's default."""
    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CopartitionGroup:
    """Indexes into the subtopology's source topics and repartition source topics."""
    source_topics: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    def input_topics(self) -> list[str]:
        """The topics a task of this subtopology reads from: its source and repartition source topics."""
        return list(self.source_topics) + [t.name for t in self.repartition_source_topics]


@dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def source_topic_names(self) -> set[str]:
        """Every topic a task reads (the group "subscribes" to these: OffsetDelete refuses them)."""
        return {t for s in self.subtopologies for t in s.input_topics()}


@dataclass(frozen=True)
class TopicToCreate:
    name: str
    partitions: int
    replication_factor: int  # -1: the broker's default
    configs: Mapping[str, str]


@dataclass
class ConfiguredTopology:
    """The outcome of ``configure``: tasks per subtopology (empty unless ``ready``), the internal topics to create,
    and the status to tell members while it is not ready."""
    epoch: int
    tasks: dict[str, int] = field(default_factory=dict)  # subtopology id -> number of tasks (partitions)
    to_create: list[TopicToCreate] = field(default_factory=list)
    status: tuple[int, str] | None = None  # (status code, detail) while not ready
    # the partition count of every input topic of a ready topology (which partitions a task reads)
    partition_counts: dict[str, int] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return self.status is None

    def task_ids(self) -> list[tuple[str, int]]:
        return [(sid, p) for sid, n in sorted(self.tasks.items()) for p in range(n)]


class TopicConfigurationError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _summary(names) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def configure(topology: Topology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics if partitions_of(t) is None})
        if missing:
            raise TopicConfigurationError(MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing.")
        decided: dict[str, int] = {}

        def count(topic: str) -> int | None:
            n = partitions_of(topic)
            return n if n is not None else decided.get(topic)

        _decide_repartition_topics(topology, count, decided)
        _enforce_copartitioning(topology, count, decided)
        tasks: dict[str, int] = {}
        for s in topology.subtopologies:
            counts = [count(t) for t in s.input_topics()]
            if not counts or any(c is None for c in counts):
                raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS,
                                              f"Subtopology {s.subtopology_id} has an input topic without a partition "
                                              "count")
            tasks[s.subtopology_id] = max(counts)
        wanted: dict[str, TopicToCreate] = {}
        for s in topology.subtopologies:
            for t in s.repartition_source_topics:
                wanted[t.name] = _to_create(t, count(t.name))
            for t in s.state_changelog_topics:
                wanted[t.name] = _to_create(t, tasks[s.subtopology_id])
        to_create = []
        for name, t in sorted(wanted.items()):
            existing = partitions_of(name)
            if existing is None:
                to_create.append(t)
            elif existing != t.partitions:
                raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS,
                                              f"Existing topic {name} has different number of partitions: expected "
                                              f"{t.partitions}, found {existing}")
        counts = {t: count(t) for s in topology.subtopologies for t in s.input_topics()}
        if to_create:
            return ConfiguredTopology(topology.epoch, to_create=to_create, status=(
                MISSING_INTERNAL_TOPICS, "Internal topics are missing: " + _summary(t.name for t in to_create)))
        return ConfiguredTopology(topology.epoch, tasks=tasks, partition_counts=counts)
    except TopicConfigurationError as e:
        return ConfiguredTopology(topology.epoch, status=(e.status, e.detail))


def _to_create(t: TopicInfo, partitions: int) -> TopicToCreate:
    return TopicToCreate(t.name, partitions, t.replication_factor if t.replication_factor > 0 else -1, dict(t.configs))


def _decide_repartition_topics(topology: Topology, count: Callable[[str], int | None], decided: dict[str, int]) -> None:
    """Kafka's ``RepartitionTopics.setup``: fixed counts as given; the others from the subtopologies writing to them."""
    flexible = set()
    for s in topology.subtopologies:
        for t in s.repartition_source_topics:
            if t.partitions > 0:
                decided.setdefault(t.name, t.partitions)
            elif count(t.name) is None:
                flexible.add(t.name)
    writers = {name: [s for s in topology.subtopologies if name in s.repartition_sink_topics] for name in flexible}
    while flexible:
        progress = False
        for name in sorted(flexible):
            upstream = [count(t) for s in writers[name] for t in s.input_topics()]
            known = [c for c in upstream if c is not None]
            if known and len(known) == len(upstream):
                decided[name] = max(known)
                flexible.discard(name)
                progress = True
        if not progress:
            raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS,
                                          "No partition count can be decided for repartition topics "
                                          + _summary(flexible))


def _enforce_copartitioning(topology: Topology, count: Callable[[str], int | None], decided: dict[str, int]) -> None:
    """Kafka's ``CopartitionedTopicsEnforcer``: a copartition group's user topics must agree; its repartition topics
    with no fixed count take their count (else the largest of the group's repartition topics)."""
    fixed = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if t.partitions > 0}
    for s in topology.subtopologies:
        for group in s.copartition_groups:
            sources = [s.source_topics[i] for i in group.source_topics if 0 <= i < len(s.source_topics)]
            repartition = [s.repartition_source_topics[i].name for i in group.repartition_source_topics
                           if 0 <= i < len(s.repartition_source_topics)]
            external = {t: count(t) for t in sources + [r for r in repartition if r in fixed]}
            if len(set(external.values())) > 1:
                raise TopicConfigurationError(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    "The following topics are not copartitioned: " + _summary(f"{t}={n}" for t, n in external.items()))
            if external:
                target = next(iter(external.values()))
            else:
                known = [c for r in repartition if (c := count(r)) is not None]
                if not known:
                    continue
                target = max(known)
            for r in repartition:
                if r not in fixed:
                    decided[r] = target
