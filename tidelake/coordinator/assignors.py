"""Partition assignors: pure functions from subscriptions to an assignment (seed 004, SPEC B8).

Every assignor takes the members' subscriptions and the partition count of each topic and returns
``{member_id: [TopicPartition, ...]}`` with every member present (possibly with an empty list).
Members are ordered by member id, as Kafka's assignors do, so the result is deterministic.

- ``range``: per topic, partitions split into contiguous ranges over the members subscribed to it
  (Kafka's RangeAssignor; seed 004's C0:[T0P0,T0P1,T1P0,T1P1] C1:[T0P2,T1P2] C2:[T0P3,T1P3]).
- ``roundrobin``: all partitions of all topics, sorted, dealt in turn to the subscribed members.
- ``sticky`` (Kafka's server-side name ``uniform``): as balanced as possible, then keeping as many
  previously owned partitions as possible — a membership change moves the minimum.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:  # seed 004 writes T0P1
        return f"{self.topic}P{self.partition}"


@dataclass(frozen=True)
class Subscription:
    """What a member asks for: topic names, and (for sticky) the partitions it owns now."""
    topics: Sequence[str]
    owned: Sequence[TopicPartition] = field(default_factory=tuple)


Assignment = dict[str, list[TopicPartition]]
Assignor = Callable[[Mapping[str, Subscription], Mapping[str, int]], Assignment]


def _empty(members: Iterable[str]) -> Assignment:
    return {m: [] for m in sorted(members)}


def _members_per_topic(subs: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]) -> dict[str, list[str]]:
    per_topic: dict[str, list[str]] = defaultdict(list)
    for member in sorted(subs):
        for topic in set(subs[member].topics):
            if topic in partitions_per_topic:
                per_topic[topic].append(member)
    return per_topic


def range_assign(subs: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]) -> Assignment:
    """Kafka's RangeAssignor: each topic independently, contiguous ranges, first members get the extra."""
    result = _empty(subs)
    for topic, members in sorted(_members_per_topic(subs, partitions_per_topic).items()):
        n_parts = partitions_per_topic[topic]
        per_member, extra = divmod(n_parts, len(members))
        for i, member in enumerate(members):  # already sorted by member id
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            result[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
    return result


def roundrobin_assign(subs: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]) -> Assignment:
    """Kafka's RoundRobinAssignor: sorted partitions dealt over a circular list of sorted members,
    skipping members not subscribed to the partition's topic."""
    result = _empty(subs)
    members = sorted(subs)
    if not members:
        return result
    subscribed = {m: set(subs[m].topics) for m in members}
    cursor = 0
    for topic in sorted({t for m in members for t in subscribed[m] if t in partitions_per_topic}):
        for p in range(partitions_per_topic[topic]):
            for _ in range(len(members)):  # advance to the next member subscribed to topic
                member = members[cursor % len(members)]
                cursor += 1
                if topic in subscribed[member]:
                    result[member].append(TopicPartition(topic, p))
                    break
    return result


def sticky_assign(subs: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]) -> Assignment:
    """Balanced first, sticky second (Kafka's StickyAssignor / server-side ``uniform``).

    1. Keep each member's still-valid owned partitions (topic subscribed, partition exists, claimed
       by no earlier member), within its quota when subscriptions are identical.
    2. Hand out the remaining partitions, those with the fewest eligible members first, each to the
       eligible member with the fewest partitions.
    3. Move partitions from a member to an eligible one with at least two fewer until no such move
       exists (only needed when subscriptions differ).
    """
    members = sorted(subs)
    result = _empty(members)
    if not members:
        return result
    eligible: dict[str, list[str]] = _members_per_topic(subs, partitions_per_topic)
    all_parts = [TopicPartition(t, p) for t in sorted(eligible) for p in range(partitions_per_topic[t])]
    owner: dict[TopicPartition, str] = {}

    identical = len({frozenset(t for t in subs[m].topics if t in partitions_per_topic) for m in members}) == 1
    quota: dict[str, int] = {}
    if identical:
        base, extra = divmod(len(all_parts), len(members))
        # The members owning the most valid partitions get the `extra` larger quotas: this keeps
        # the most partitions where they are (the minimum number of moves).
        valid_owned = {m: _valid_owned(subs[m], partitions_per_topic) for m in members}
        by_owned = sorted(members, key=lambda m: (-len(valid_owned[m]), m))
        quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_owned)}

    for m in members:
        for tp in _valid_owned(subs[m], partitions_per_topic):
            if tp in owner:
                continue  # claimed twice (stale generation): the first claimant keeps it
            if identical and len(result[m]) >= quota[m]:
                break
            owner[tp] = m
            result[m].append(tp)

    unassigned = [tp for tp in all_parts if tp not in owner]
    unassigned.sort(key=lambda tp: (len(eligible[tp.topic]), tp))
    for tp in unassigned:
        candidates = eligible[tp.topic]
        if identical:
            candidates = [m for m in candidates if len(result[m]) < quota[m]] or candidates
        target = min(candidates, key=lambda m: (len(result[m]), m))
        owner[tp] = target
        result[target].append(tp)

    if not identical:
        _rebalance_general(result, owner, eligible)
    for m in members:
        result[m].sort()
    return result


def _valid_owned(sub: Subscription, partitions_per_topic: Mapping[str, int]) -> list[TopicPartition]:
    topics = set(sub.topics)
    return [TopicPartition(*tp) for tp in sub.owned
            if tp[0] in topics and 0 <= tp[1] < partitions_per_topic.get(tp[0], 0)]


def _rebalance_general(result: Assignment, owner: dict[TopicPartition, str], eligible: dict[str, list[str]]) -> None:
    # Each move lowers the sum of squared counts, so this terminates; the bound is a safety net.
    for _ in range(10 * max(1, len(owner)) ** 2):
        moved = False
        for src in sorted(result, key=lambda m: (-len(result[m]), m)):
            for tp in sorted(result[src]):
                dst = min(eligible[tp.topic], key=lambda m: (len(result[m]), m))
                if len(result[dst]) + 1 < len(result[src]):
                    result[src].remove(tp)
                    result[dst].append(tp)
                    owner[tp] = dst
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "sticky": sticky_assign,
    "uniform": sticky_assign,  # Kafka's server-side name for its sticky assignor
}


def partitions_moved(before: Mapping[str, Iterable[TopicPartition]], after: Mapping[str, Iterable[TopicPartition]]) -> int:
    """How many partitions that had an owner before have a different owner after."""
    old = {tp: m for m, tps in before.items() for tp in tps}
    new = {tp: m for m, tps in after.items() for tp in tps}
    return sum(1 for tp, m in old.items() if tp in new and new[tp] != m)
