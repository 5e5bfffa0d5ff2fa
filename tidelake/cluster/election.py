"""Partition leader election (Kafka's ``PartitionLeaderElectionAlgorithms``): pure functions that choose a
partition's leader, and the ISR that goes with it, from its replicas in assignment order, its current state, the
live brokers and the brokers in controlled shutdown. The controller writes what they choose (a new leader epoch)
and tells the brokers.

Kafka's rule throughout: the leader is the first replica in assignment order that is alive and in the ISR (and
not shutting down). Unclean election, only where allowed, takes the first live replica even out of the ISR, which
may lose acknowledged data; the ISR is then that replica alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

from tidelake import errors
from tidelake.cluster.znodes import NO_LEADER, PartitionState

Partition = tuple[str, int]


@dataclass(frozen=True)
class Election:
    """The chosen leader (``NO_LEADER``: none can lead) and ISR."""
    leader: int
    isr: list[int]
    unclean: bool = False  # the leader was not in the ISR: data may have been lost


@dataclass(frozen=True)
class Refused:
    """Why ElectLeaders elects nothing for a partition: the error code and message it answers."""
    code: int
    message: str


def new_partition_election(replicas: Sequence[int], live: Collection[int]) -> Election:
    """A partition being created: its live replicas are the ISR, the first of them leads; with none alive the
    ISR is the first replica, so that it leads when it comes."""
    alive = [r for r in replicas if r in live]
    return Election(alive[0] if alive else NO_LEADER, alive or list(replicas[:1]))


def offline_election(replicas: Sequence[int], state: PartitionState, live: Collection[int],
                     shutting_down: Collection[int], *, unclean: bool = False) -> Election:
    """After brokers came or went: dead replicas leave the ISR, and a leader that is gone is replaced by the first
    live ISR member not shutting down; with none, and ``unclean``, by the first live replica. The ISR never becomes
    empty: Kafka keeps its last member so that it can return as leader."""
    isr = [r for r in state.isr if r in live]
    leader = state.leader
    was_unclean = False
    if leader not in live:
        candidates = [r for r in replicas if r in isr and r not in shutting_down]
        alive = [r for r in replicas if r in live]
        if candidates:
            leader = candidates[0]
        elif alive and unclean:
            leader, isr, was_unclean = alive[0], [alive[0]], True
        else:
            leader = NO_LEADER
    return Election(leader, isr or list(state.isr[-1:]), was_unclean)


def unclean_would_elect(election: Election, replicas: Sequence[int], live: Collection[int]) -> bool:
    """Whether a clean ``offline_election`` left the partition leaderless while one of its replicas is alive, so
    that only an unclean one would give it a leader."""
    return election.leader == NO_LEADER and any(r in live for r in replicas)


def preferred_election(replicas: Sequence[int], state: PartitionState, live: Collection[int],
                       shutting_down: Collection[int]) -> Election | Refused:
    """ElectLeaders (preferred) and the auto rebalance: the first assigned replica, if it is alive and in the ISR."""
    leader = replicas[0]
    if state.leader == leader:
        return Refused(errors.ElectionNotNeeded.code, "the preferred replica leads already")
    if leader not in live or leader not in state.isr or leader in shutting_down:
        return Refused(errors.PreferredLeaderNotAvailable.code,
                       f"preferred replica {leader} is not alive and in the ISR {state.isr}")
    return Election(leader, list(state.isr))


def unclean_election(replicas: Sequence[int], state: PartitionState, live: Collection[int]) -> Election | Refused:
    """ElectLeaders (unclean) of a partition without a live leader: the first live ISR member, else the first live
    replica, which becomes the whole ISR."""
    if state.leader in live:
        return Refused(errors.ElectionNotNeeded.code, "the partition has a live leader")
    alive = [r for r in replicas if r in live]
    if not alive:
        return Refused(errors.EligibleLeadersNotAvailable.code, "no replica is alive")
    in_isr = [r for r in alive if r in state.isr]
    if in_isr:
        return Election(in_isr[0], list(state.isr))
    return Election(alive[0], [alive[0]], unclean=True)


def controlled_shutdown_election(replicas: Sequence[int], state: PartitionState, live: Collection[int],
                                 shutting_down: Collection[int], broker_id: int) -> Election | None:
    """Broker ``broker_id`` is stopping: it leaves the ISR, and if it leads, the first other live ISR member not
    shutting down takes over. None: nothing changes (it leads with no one to take over, or it is not in an ISR it
    could leave)."""
    isr = [r for r in state.isr if r != broker_id]
    if state.leader == broker_id:
        others = [r for r in replicas if r in isr and r in live and r not in shutting_down]
        return Election(others[0], isr) if others else None
    if broker_id in state.isr and len(state.isr) > 1:
        return Election(state.leader, isr)
    return None


def reassignment_election(replicas: Sequence[int], leader_from: Sequence[int], removed: Collection[int],
                          state: PartitionState, live: Collection[int], shutting_down: Collection[int]) -> Election:
    """A reassignment step: the ISR without ``removed`` (and within ``replicas``); the leader kept if it is in
    ``leader_from``, alive and not shutting down, else the first of ``leader_from`` alive and in that ISR."""
    isr = [r for r in state.isr if r not in removed and r in replicas]
    leader = state.leader
    if leader not in leader_from or leader not in live or leader in shutting_down:
        candidates = [r for r in leader_from if r in isr and r in live and r not in shutting_down]
        leader = candidates[0] if candidates else NO_LEADER
    return Election(leader, isr or list(state.isr[-1:]))


def imbalanced_partitions(replicas: Mapping[Partition, Sequence[int]], states: Mapping[Partition, PartitionState],
                          live: Collection[int], shutting_down: Collection[int], imbalance_percentage: float
                          ) -> list[Partition]:
    """Kafka's auto leader rebalance: for each live broker that does not lead more than ``imbalance_percentage``
    % of the partitions (among ``replicas``) it is the preferred replica of, those of them where it is in the
    ISR, to hand back to it by preferred election."""
    preferred: dict[int, list[Partition]] = {}
    for key, assigned in replicas.items():
        preferred.setdefault(assigned[0], []).append(key)
    wanted = []
    for broker, keys in preferred.items():
        if broker not in live or broker in shutting_down:
            continue
        not_led = [k for k in keys if states[k].leader != broker]
        if not_led and 100 * len(not_led) / len(keys) > imbalance_percentage:
            wanted += [k for k in not_led if broker in states[k].isr]
    return sorted(wanted)
