"""The task assignor of streams groups (KIP-1071's server-side assignment): active tasks balanced over the members,
sticky, then ``num_standby`` standby replicas of each task on other processes.

Balance: with T tasks and M members every member gets T // M active tasks, T % M of them one more. Stickiness: a
member keeps the active tasks it had in the previous target, up to its share, before the rest are dealt to the
least-loaded members; a task whose previous owner left goes first to another member of the same process (a Streams
instance restarted, or another of its threads: its state is there). Only stateful tasks (of subtopologies with
changelog topics) get standbys, as Kafka's: a stateless task has nothing to keep warm. A standby is never placed on
the process that
runs the task's active copy nor twice on one process (its state would be the same disk); it stays where it was when
it can, else goes to the least-loaded member that qualifies. No warm-up tasks (Kafka's assignor moves an active task
to a caught-up standby first; this one moves it at once).

Pure: ``assign`` takes the members' processes and previous targets and returns the new targets.
"""
from __future__ import annotations

from dataclasses import dataclass

Task = tuple[str, int]  # (subtopology id, partition)


@dataclass(frozen=True)
class AssignmentMember:
    process_id: str
    previous_active: frozenset[Task] = frozenset()
    previous_standby: frozenset[Task] = frozenset()


@dataclass(frozen=True)
class TaskAssignment:
    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()


def assign(members: dict[str, AssignmentMember], tasks: list[Task], num_standby: int = 0,
           previous_process: dict[Task, str] | None = None,
           stateful: set[str] | None = None) -> dict[str, TaskAssignment]:
    """``previous_process``: where each task last ran actively, for tasks whose member is gone; ``stateful``: the
    subtopologies whose tasks get standbys (None: all)."""
    if not members:
        return {}
    ids = sorted(members)
    total = len(tasks)
    base, extra = divmod(total, len(ids))
    active: dict[str, set[Task]] = {m: set() for m in ids}
    free = set(tasks)
    # 1. each member keeps up to its base share of its previous tasks (those with most history first)
    kept = {m: sorted(members[m].previous_active & free) for m in ids}
    for m in sorted(ids, key=lambda m: -len(kept[m])):
        for t in kept[m][:base]:
            if t in free:
                active[m].add(t)
                free.discard(t)
    # 2. the T % M members with one more: those who had more of their previous tasks
    for m in sorted(ids, key=lambda m: -len(kept[m])):
        if extra == 0:
            break
        more = [t for t in kept[m] if t in free]
        if more and len(active[m]) == base:
            active[m].add(more[0])
            free.discard(more[0])
            extra -= 1

    def cap(m: str) -> bool:
        return len(active[m]) < base or (len(active[m]) == base and extra > 0)

    # 3. the rest: a task first to a member of the process it last ran on, else to the least-loaded member
    by_process: dict[str, list[str]] = {}
    for m in ids:
        by_process.setdefault(members[m].process_id, []).append(m)
    for t in sorted(free):
        home = (previous_process or {}).get(t)
        candidates = [m for m in by_process.get(home, ()) if cap(m)] if home is not None else []
        if not candidates:
            candidates = [m for m in ids if cap(m)]
        m = min(candidates, key=lambda m: (len(active[m]), m))
        if len(active[m]) == base:
            extra -= 1
        active[m].add(t)
    standby: dict[str, set[Task]] = {m: set() for m in ids}
    if num_standby > 0:
        owner = {t: m for m, ts in active.items() for t in ts}
        for t in sorted(tasks):
            if stateful is not None and t[0] not in stateful:
                continue
            processes = {members[owner[t]].process_id}
            for _ in range(num_standby):
                candidates = [m for m in ids if members[m].process_id not in processes]
                if not candidates:
                    break  # fewer processes than replicas: as Kafka, the standby is left out
                sticky = [m for m in candidates if t in members[m].previous_standby]
                m = min(sticky or candidates, key=lambda m: (len(active[m]) + len(standby[m]), m))
                standby[m].add(t)
                processes.add(members[m].process_id)
    return {m: TaskAssignment(frozenset(active[m]), frozenset(standby[m])) for m in ids}
