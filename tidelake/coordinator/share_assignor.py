"""Kafka's simple share-group assignor (KIP-932, "simple"): balance first, then stickiness.

Share groups let several members read one partition, so the assignor spreads members over partitions as
well as partitions over members. With M members and P partitions each partition is read by
``ceil(M / P)`` members; the ``ceil(M / P) * P`` assignments are dealt so that no two members' counts differ
by more than one. Among the assignments that keep that balance, the current ones are kept (a member joining
or leaving moves as few partitions as it can). When every member subscribes to the same topics their
partitions are balanced together, as Kafka's homogeneous builder does; otherwise each topic's partitions are
balanced over the members subscribed to it.

A pure function; members and partitions are taken in sorted order, so the result is deterministic.
"""
from __future__ import annotations

import uuid
from typing import Mapping

TopicIdPartition = tuple[uuid.UUID, int]


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], assignable: Mapping[uuid.UUID, tuple[int, ...]],
           current: Mapping[str, Mapping[uuid.UUID, tuple[int, ...]]]) -> dict[str, dict[uuid.UUID, tuple[int, ...]]]:
    """The target assignment of every member: ``subscriptions`` the topic ids each member subscribes to,
    ``assignable`` the partitions of each topic that may be assigned (Kafka's: those whose share state is
    initialized; a topic missing from it is not assigned), ``current`` each member's assignment now."""
    held = {m: {(t, p) for t, parts in current.get(m, {}).items() for p in parts} for m in subscriptions}
    out: dict[str, set[TopicIdPartition]] = {m: set() for m in subscriptions}
    pools = ([(sorted(subscriptions), sorted(next(iter(subscriptions.values()))))]
             if len(set(subscriptions.values())) == 1
             else [(sorted(m for m, topics in subscriptions.items() if t in topics), [t])
                   for t in sorted({t for topics in subscriptions.values() for t in topics})])
    for members, topics in pools:
        partitions = [(t, p) for t in topics for p in assignable.get(t, ())]
        for member, got in _balance(members, partitions, held).items():
            out[member] |= got
    return {m: _by_topic(tps) for m, tps in out.items()}


def _balance(members: list[str], partitions: list[TopicIdPartition],
             held: Mapping[str, set[TopicIdPartition]]) -> dict[str, set[TopicIdPartition]]:
    if not members or not partitions:
        return {m: set() for m in members}
    sharing = -(-len(members) // len(partitions))  # members per partition: ceil(M / P)
    floor, extra = divmod(sharing * len(partitions), len(members))  # ``extra`` members get floor + 1

    out: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    readers: dict[TopicIdPartition, int] = dict.fromkeys(partitions, 0)

    def may_take(member: str) -> bool:
        n = len(out[member])
        return n < floor or (n == floor and sum(1 for g in out.values() if len(g) > floor) < extra)

    for member in members:  # stickiness: keep what still fits the balance
        for tp in sorted(held.get(member, set())):
            if tp in readers and readers[tp] < sharing and may_take(member):
                out[member].add(tp)
                readers[tp] += 1
    for tp in partitions:  # then each partition's missing readers: the members holding fewest first
        while readers[tp] < sharing:
            candidates = [m for m in members if tp not in out[m]]
            fitting = [m for m in candidates if may_take(m)] or candidates
            member = min(fitting, key=lambda m: (len(out[m]), m))
            out[member].add(tp)
            readers[tp] += 1
    return out


def _by_topic(tps: set[TopicIdPartition]) -> dict[uuid.UUID, tuple[int, ...]]:
    out: dict[uuid.UUID, list[int]] = {}
    for t, p in sorted(tps):
        out.setdefault(t, []).append(p)
    return {t: tuple(ps) for t, ps in out.items()}
