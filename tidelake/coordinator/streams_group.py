"""KIP-1071 streams groups (StreamsGroupHeartbeat / StreamsGroupDescribe): a state machine, the shape of
``consumer_group.py`` with tasks in place of partitions.

A member (one Kafka Streams thread; the threads of one application instance share a *process id*) joins with epoch
0 and the application's topology. The first topology initializes the group's; a member with a newer topology epoch
replaces it, one with an older one is told STALE_TOPOLOGY. The topology is configured against the topics that exist
(``streams_topology.configure``): until the source topics exist and the internal topics (repartition, changelog)
are created with the partition counts the coordinator decided, the group is NotReady, members get no tasks, and
the heartbeat answers the status (MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS with the topics to create,
INCORRECTLY_PARTITIONED_TOPICS). Once ready, the tasks (subtopology x partition) are assigned by
``streams_assignor``.

Epochs as KIP-848's: a membership, member-metadata (process, endpoint, rack, tags), topology or topic-metadata
change bumps the *group epoch*; the target assignment is recomputed for it; each member converges through its
heartbeats: it first revokes what it keeps no more (UNREVOKED_TASKS, at its epoch, until a heartbeat no longer
reports them or its rebalance timeout expires), then moves to the target epoch and gets the target tasks nobody
else still holds: an active task while another member holds it active, or while its own process still holds it as
a standby; a standby while its process holds it in any role (UNRELEASED_TASKS until they are free).
A member not heard from within ``session_timeout_ms`` is removed; epoch -1 leaves, -2 (static member) leaves but its
instance may come back with its tasks. Offsets: OffsetCommit / OffsetFetch / TxnOffsetCommit as Kafka's
StreamsGroup validates them: the member epoch must be the member's (else STALE_MEMBER_EPOCH), an epoch -1 commit
only while the group has no members.

Durability: after every change the group calls ``persist(group)``; ``streams_group_records`` turns the group into
Kafka's StreamsGroup* records of ``__consumer_offsets`` and back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tidelake import errors
from tidelake.coordinator.streams_assignor import AssignmentMember, Task, TaskAssignment, assign
from tidelake.coordinator.streams_topology import (SHUTDOWN_APPLICATION, STALE_TOPOLOGY, ConfiguredTopology,
                                                   TopicToCreate, Topology, configure)

STABLE = "stable"
UNREVOKED_TASKS = "unrevoked_tasks"
UNRELEASED_TASKS = "unreleased_tasks"
# StreamsGroupCurrentMemberAssignmentValue.State, as Kafka's MemberState values
MEMBER_STATE_BYTES = {STABLE: 1, UNREVOKED_TASKS: 2, UNRELEASED_TASKS: 3}

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

STALE_MEMBER_EPOCH = 113
STREAMS_INVALID_TOPOLOGY = 130
STREAMS_INVALID_TOPOLOGY_EPOCH = 131

# the group states as Kafka names them (ListGroups, DescribeGroups, StreamsGroupDescribe)
EMPTY, NOT_READY, ASSIGNING, RECONCILING, STABLE_STATE, DEAD = \
    "Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"

# what Kafka 4.4 answers by default (group.streams.* settings it has and this broker does not: fixed)
ACCEPTABLE_RECOVERY_LAG = 10000
TASK_OFFSET_INTERVAL_MS = 60000
DEFAULT_REBALANCE_TIMEOUT_MS = 300000


@dataclass(frozen=True)
class Tasks:
    """Tasks by role, as the heartbeat carries them."""
    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()

    def __or__(self, o: "Tasks") -> "Tasks":
        return Tasks(self.active | o.active, self.standby | o.standby, self.warmup | o.warmup)

    def __and__(self, o: "Tasks") -> "Tasks":
        return Tasks(self.active & o.active, self.standby & o.standby, self.warmup & o.warmup)

    def __sub__(self, o: "Tasks") -> "Tasks":
        return Tasks(self.active - o.active, self.standby - o.standby, self.warmup - o.warmup)

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)

    def all(self) -> frozenset[Task]:
        return self.active | self.standby | self.warmup


NO_TASKS = Tasks()


@dataclass
class StreamsMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: dict[str, str]
    last_heartbeat_ms: int
    epoch: int = 0
    previous_epoch: int = -1
    state: str = STABLE
    assigned: Tasks = NO_TASKS
    pending_revocation: Tasks = NO_TASKS
    revocation_deadline_ms: int = 0
    last_sent: Tasks | None = None  # the tasks last answered (None: answer them next time)
    departed: bool = False  # a static member that left with epoch -2 and may come back
    task_offsets: dict[Task, int] = field(default_factory=dict)
    task_end_offsets: dict[Task, int] = field(default_factory=dict)

    def owned(self) -> Tasks:
        return self.assigned | self.pending_revocation


@dataclass
class StreamsHeartbeat:
    """One heartbeat's request fields, as the coordinator uses them (None: unchanged since the last one)."""
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    owned: Tasks | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] | None = None
    task_offsets: dict[Task, int] | None = None
    task_end_offsets: dict[Task, int] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""


@dataclass
class StreamsHeartbeatResult:
    error: int = 0
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    tasks: Tasks | None = None  # None: unchanged since the last answer
    status: list[tuple[int, str]] = field(default_factory=list)
    to_create: list[TopicToCreate] = field(default_factory=list)  # internal topics the broker must create
    endpoint_information_epoch: int = 0
    # (endpoint, active partitions, standby partitions) per member with an endpoint; None: unchanged
    partitions_by_endpoint: list[tuple[tuple[str, int], dict[str, list[int]], dict[str, list[int]]]] | None = None


def _failed(code: int, message: str) -> StreamsHeartbeatResult:
    return StreamsHeartbeatResult(error=code, error_message=message)


class StreamsGroup:
    """One KIP-1071 group. ``partitions_of(topic)`` gives a topic's partition count (None: no such topic); it is
    consulted on every heartbeat, so topics created (the internal ones too) or grown rebalance the group."""

    protocol_kind = "streams"

    def __init__(self, group_id: str, *, session_timeout_ms: int, heartbeat_interval_ms: int, num_standby_replicas: int,
                 partitions_of: Callable[[str], int | None],
                 persist: Callable[["StreamsGroup"], None] | None = None,
                 on_rebalance: Callable[[str], None] | None = None) -> None:
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.num_standby_replicas = num_standby_replicas
        self.partitions_of = partitions_of
        self.persist = persist or (lambda g: None)
        self.on_rebalance = on_rebalance or (lambda group_id: None)
        self.members: dict[str, StreamsMember] = {}
        self.static_members: dict[str, str] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target: dict[str, Tasks] = {}
        self.topology: Topology | None = None
        self.configured: ConfiguredTopology | None = None
        self._configured_for: Topology | None = None  # the topology ``configured`` was computed for
        self.metadata_snapshot: dict[str, int | None] = {}  # the counts the configured topology was computed from
        self.endpoint_information_epoch = 0
        self.shutdown_requested_by: str | None = None  # not persisted, as Kafka's (best effort)
        self.last_active_process: dict[Task, str] = {}  # where each task last ran (stickiness across restarts)
        self.dead = False

    # ---- state -------------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if self.dead:
            return DEAD
        if not self.members:
            return EMPTY
        if self.configured is None or not self.configured.ready:
            return NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(m.epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return RECONCILING
        return STABLE_STATE

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str]:
        """The topics the group reads while it has members (OffsetDelete refuses their offsets), as Kafka's."""
        if not self.members or self.topology is None:
            return set()
        return self.topology.source_topic_names()

    # ---- heartbeat ---------------------------------------------------------------------------------
    def heartbeat(self, hb: StreamsHeartbeat, now_ms: int) -> StreamsHeartbeatResult:
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(hb, now_ms)
        if hb.member_epoch == 0:
            m = self._join(hb, now_ms)
            if isinstance(m, StreamsHeartbeatResult):
                return m
        else:
            m = self.members.get(hb.member_id)
            if m is None:
                return _failed(errors.UnknownMemberId.code,
                               f"Member {hb.member_id} is not a member of group {self.group_id}.")
            if m.departed:
                return _failed(errors.FencedMemberEpoch.code, f"static member {hb.member_id} left the group")
            if hb.member_epoch != m.epoch:
                stale_ok = (hb.member_epoch == m.previous_epoch and hb.owned is not None
                            and not (hb.owned - m.assigned))
                if not stale_ok:
                    return _failed(errors.FencedMemberEpoch.code,
                                   f"The streams group member has a smaller member epoch ({hb.member_epoch}) than the "
                                   f"one known by the group coordinator ({m.epoch}). The member must abandon all its "
                                   "tasks and rejoin." if hb.member_epoch < m.epoch else
                                   f"The streams group member has a greater member epoch ({hb.member_epoch}) than the "
                                   f"one known by the group coordinator ({m.epoch}). The member must abandon all its "
                                   "tasks and rejoin.")
        m.last_heartbeat_ms = now_ms
        m.client_id, m.client_host = hb.client_id, hb.client_host
        if self._update_metadata(m, hb):
            self.group_epoch += 1
        if hb.shutdown_application:
            self.shutdown_requested_by = m.member_id
        if hb.task_offsets is not None:
            m.task_offsets = dict(hb.task_offsets)
        if hb.task_end_offsets is not None:
            m.task_end_offsets = dict(hb.task_end_offsets)
        self._configure()
        self._refresh_target()
        self._reconcile(m, hb.owned, now_ms)
        result = StreamsHeartbeatResult(member_id=m.member_id, member_epoch=m.epoch,
                                        heartbeat_interval_ms=self.heartbeat_interval_ms,
                                        endpoint_information_epoch=self.endpoint_information_epoch)
        if m.last_sent is None or m.last_sent != m.assigned:
            result.tasks = m.assigned
            m.last_sent = m.assigned
        configured = self.configured
        if configured is not None and configured.status is not None:
            result.status.append(configured.status)
            result.to_create = list(configured.to_create)
        if self.topology is not None and m.topology_epoch < self.topology.epoch:
            result.status.append((STALE_TOPOLOGY, f"The member's topology epoch {m.topology_epoch} is behind the "
                                                  f"group's topology epoch {self.topology.epoch}."))
        if self.shutdown_requested_by is not None:
            result.status.append((SHUTDOWN_APPLICATION, f"Streams group member {self.shutdown_requested_by} "
                                                        "encountered a fatal error and requested a shutdown for the "
                                                        "entire application."))
        if hb.endpoint_information_epoch < self.endpoint_information_epoch:
            result.partitions_by_endpoint = self.partitions_by_endpoint()
        self.persist(self)
        return result

    def _leave(self, hb: StreamsHeartbeat, now_ms: int) -> StreamsHeartbeatResult:
        m = self.members.get(hb.member_id)
        if m is None:
            if hb.member_epoch == STATIC_LEAVE_EPOCH:
                return _failed(errors.UnknownMemberId.code,
                               f"Member {hb.member_id} is not a member of group {self.group_id}.")
            return StreamsHeartbeatResult(member_id=hb.member_id, member_epoch=LEAVE_EPOCH)
        if hb.member_epoch == STATIC_LEAVE_EPOCH and m.instance_id is not None:
            # the instance may come back within the session timeout and take its tasks back
            m.departed = True
            m.last_heartbeat_ms = now_ms
        else:
            self._remove(m.member_id)
            self._configure()
            self._refresh_target()
        self.persist(self)
        return StreamsHeartbeatResult(member_id=hb.member_id, member_epoch=hb.member_epoch)

    def _join(self, hb: StreamsHeartbeat, now_ms: int) -> StreamsMember | StreamsHeartbeatResult:
        topology = hb.topology
        if topology is None:
            return _failed(errors.InvalidRequest.code, "Topology must be non-null when (re-)joining.")
        if self.topology is None or not self.members:
            if self.topology != topology:
                self.topology = topology
                self.group_epoch += 1
        elif topology.epoch > self.topology.epoch:
            self.topology = topology  # a newer version of the application: its topology wins
            self.group_epoch += 1
        elif topology.epoch == self.topology.epoch and topology != self.topology:
            return _failed(STREAMS_INVALID_TOPOLOGY_EPOCH,
                           f"Topology updated but topology epoch {topology.epoch} not bumped.")
        if hb.instance_id is not None and hb.instance_id in self.static_members:
            old_id = self.static_members[hb.instance_id]
            old = self.members[old_id]
            if old_id != hb.member_id and not old.departed:
                return _failed(errors.UnreleasedInstanceId.code,
                               f"Static member {old_id} with instance id {hb.instance_id} is in use.")
            del self.members[old_id]  # the static member is back: it takes its tasks and epoch over
            self.target[hb.member_id] = self.target.pop(old_id, NO_TASKS)
            old.member_id, old.departed, old.last_sent = hb.member_id, False, None
            old.topology_epoch = topology.epoch
            self.members[hb.member_id] = old
            self.static_members[hb.instance_id] = hb.member_id
            return old
        if hb.member_id in self.members:  # rejoining (fenced, or restarted with the same id): from scratch
            self._remove(hb.member_id)
        m = StreamsMember(hb.member_id, hb.instance_id, hb.rack_id, hb.client_id, hb.client_host,
                          hb.rebalance_timeout_ms if hb.rebalance_timeout_ms > 0 else DEFAULT_REBALANCE_TIMEOUT_MS,
                          topology.epoch, hb.process_id or "", hb.user_endpoint, dict(hb.client_tags or {}), now_ms)
        self.members[m.member_id] = m
        if m.instance_id is not None:
            self.static_members[m.instance_id] = m.member_id
        self.group_epoch += 1
        return m

    def _update_metadata(self, m: StreamsMember, hb: StreamsHeartbeat) -> bool:
        """Apply the member's metadata fields that came (non-null); whether the assignment may change."""
        changed = False
        if hb.rebalance_timeout_ms > 0:
            m.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.rack_id is not None and hb.rack_id != m.rack_id:
            m.rack_id, changed = hb.rack_id, True
        if hb.process_id is not None and hb.process_id != m.process_id:
            m.process_id, changed = hb.process_id, True
        if hb.user_endpoint is not None and hb.user_endpoint != m.user_endpoint:
            m.user_endpoint, changed = hb.user_endpoint, True
        if hb.client_tags is not None and hb.client_tags != m.client_tags:
            m.client_tags, changed = dict(hb.client_tags), True
        if hb.topology is not None and hb.topology.epoch != m.topology_epoch:
            m.topology_epoch, changed = hb.topology.epoch, True
        return changed

    def _remove(self, member_id: str) -> None:
        m = self.members.pop(member_id, None)
        if m is None:
            return
        for t in m.owned().active:
            self.last_active_process[t] = m.process_id
        if m.instance_id is not None and self.static_members.get(m.instance_id) == member_id:
            del self.static_members[m.instance_id]
        self.target.pop(member_id, None)
        self.group_epoch += 1
        if not self.members:
            self.shutdown_requested_by = None

    # ---- topology and assignment -------------------------------------------------------------------
    def topic_names(self) -> list[str]:
        """Every topic the topology names: the partition counts its configuration depends on."""
        if self.topology is None:
            return []
        return sorted({t for s in self.topology.subtopologies
                       for t in [*s.source_topics, *(i.name for i in s.repartition_source_topics),
                                 *(i.name for i in s.state_changelog_topics)]})

    def _configure(self) -> None:
        """Configure the topology again when the counts of the topics it names changed (or it did): a new group
        epoch, so a new assignment."""
        if self.topology is None:
            return
        snapshot = {t: self.partitions_of(t) for t in self.topic_names()}
        if self.configured is not None and self._configured_for is self.topology and snapshot == self.metadata_snapshot:
            return
        self.configure_with(snapshot)
        self.group_epoch += 1

    def configure_with(self, snapshot: dict[str, int | None]) -> None:
        """The topology configured against these partition counts (by topic name; None: no such topic)."""
        self.metadata_snapshot = snapshot
        self._configured_for = self.topology
        self.configured = configure(self.topology, lambda t: snapshot.get(t))

    def _refresh_target(self) -> None:
        if self.group_epoch == self.assignment_epoch:
            return
        configured = self.configured
        if configured is None or not configured.ready:
            self.target = {mid: NO_TASKS for mid in self.members}
        else:
            specs = {mid: AssignmentMember(m.process_id, self.target.get(mid, NO_TASKS).active,
                                           self.target.get(mid, NO_TASKS).standby)
                     for mid, m in self.members.items()}
            stateful = {s.subtopology_id for s in self.topology.subtopologies if s.state_changelog_topics}
            result = assign(specs, configured.task_ids(), self.num_standby_replicas, self.last_active_process, stateful)
            self.target = {mid: Tasks(a.active, a.standby, a.warmup) for mid, a in result.items()}
        self.assignment_epoch = self.group_epoch
        self.endpoint_information_epoch += 1
        if self.members:
            self.on_rebalance(self.group_id)

    def _holders(self, exclude: str) -> tuple[dict[Task, str], dict[Task, set[str]]]:
        """Who holds each task now, member ``exclude`` aside: active task -> its member, and task -> the processes
        holding it in any role."""
        active: dict[Task, str] = {}
        processes: dict[Task, set[str]] = {}
        for mid, o in self.members.items():
            if mid == exclude:
                continue
            owned = o.owned()
            for t in owned.active:
                active[t] = mid
            for t in owned.all():
                processes.setdefault(t, set()).add(o.process_id)
        return active, processes

    def _reconcile(self, m: StreamsMember, owned: Tasks | None, now_ms: int) -> None:
        if m.state == UNREVOKED_TASKS:
            if owned is None or (owned & m.pending_revocation):
                return  # still holding what it must give up (``tick`` fences it past its rebalance timeout)
            m.pending_revocation = NO_TASKS
            m.state = STABLE if m.epoch == self.assignment_epoch else UNRELEASED_TASKS
        target = self.target.get(m.member_id, NO_TASKS)
        if m.state == STABLE and m.epoch == self.assignment_epoch and m.assigned == target:
            return
        keep = m.assigned & target
        revoke = m.assigned - target
        if revoke and (owned is None or (owned & revoke)):
            m.assigned = keep
            m.pending_revocation = revoke
            m.state = UNREVOKED_TASKS
            m.revocation_deadline_ms = now_ms + m.rebalance_timeout_ms
            return
        active_holder, holders = self._holders(m.member_id)
        pid = m.process_id
        want = target - keep
        # an active task waits for its active owner elsewhere and for the other threads of its process to drop it
        # as a standby or warm-up; a standby or warm-up waits for its process to drop the task in any role
        add = Tasks(frozenset(t for t in want.active
                              if t not in active_holder and pid not in holders.get(t, ())),
                    frozenset(t for t in want.standby if pid not in holders.get(t, ())),
                    frozenset(t for t in want.warmup if pid not in holders.get(t, ())))
        m.assigned = keep | add
        m.pending_revocation = NO_TASKS
        if m.epoch != self.assignment_epoch:
            m.previous_epoch, m.epoch = m.epoch, self.assignment_epoch
        m.state = STABLE if m.assigned == target else UNRELEASED_TASKS

    # ---- time --------------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        removed = False
        for mid, m in list(self.members.items()):
            if now_ms - m.last_heartbeat_ms > self.session_timeout_ms:
                self._remove(mid)  # session expired (also a departed static member not back in time)
                removed = True
            elif m.state == UNREVOKED_TASKS and now_ms > m.revocation_deadline_ms:
                self._remove(mid)  # did not revoke within its rebalance timeout: fenced
                removed = True
        if removed:
            self._configure()
            self._refresh_target()
            self.persist(self)

    # ---- offsets -------------------------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, member_epoch: int) -> int:
        """OffsetCommit / OffsetFetch / TxnOffsetCommit with a member epoch, as Kafka's StreamsGroup validates
        them: the member's exact epoch (else STALE_MEMBER_EPOCH); an epoch -1 commit only while it has no members."""
        if self.dead:
            return errors.CoordinatorNotAvailable.code
        if member_epoch < 0 and not self.members:
            return 0
        m = self.members.get(member_id)
        if m is None:
            return errors.UnknownMemberId.code
        if member_epoch != m.epoch:
            return STALE_MEMBER_EPOCH
        return 0

    # ---- describe ------------------------------------------------------------------------------------
    def partitions_by_endpoint(self) -> list[tuple[tuple[str, int], dict[str, list[int]], dict[str, list[int]]]]:
        """For interactive queries: per member with an endpoint, the input partitions of its active tasks and of its
        standby and warm-up ones."""
        if self.topology is None or self.configured is None or not self.configured.ready:
            return []
        inputs = {s.subtopology_id: s.input_topics() for s in self.topology.subtopologies}
        counts = self.configured.partition_counts

        def partitions(tasks) -> dict[str, list[int]]:
            out: dict[str, set[int]] = {}
            for sid, p in tasks:
                for topic in inputs.get(sid, ()):
                    if p < counts.get(topic, 0):
                        out.setdefault(topic, set()).add(p)
            return {t: sorted(ps) for t, ps in sorted(out.items())}

        return [(m.user_endpoint, partitions(m.assigned.active), partitions(m.assigned.standby | m.assigned.warmup))
                for mid, m in sorted(self.members.items()) if m.user_endpoint is not None]


