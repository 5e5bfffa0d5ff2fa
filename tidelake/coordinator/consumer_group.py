"""KIP-848 consumer groups (ConsumerGroupHeartbeat / ConsumerGroupDescribe): a state machine.

The coordinator computes the assignment (seed 000's "central coordinator"): a membership or
subscription change bumps the *group epoch*; the target assignment is then recomputed by the
server-side assignor (``range`` / ``roundrobin`` / ``sticky`` alias ``uniform``) and stamped with
that epoch. Each member then converges towards its target through its heartbeats, per the KIP:

1. partitions it owns but no longer targets are *revoked first*: the member is told its kept
   partitions and stays at its epoch (UNREVOKED_PARTITIONS) until a heartbeat reports it no longer
   owns them (or its rebalance timeout expires: it is fenced);
2. then it moves to the target epoch and receives the target partitions that no other member still
   holds; those still held elsewhere arrive on later heartbeats (UNRELEASED_PARTITIONS).

So a partition never has two owners. Fencing: a heartbeat with an epoch other than the member's
(or its previous one, with nothing extra owned) gets FENCED_MEMBER_EPOCH; an unknown member id gets
UNKNOWN_MEMBER_ID. Clock injected through ``now_ms`` arguments and ``tick``.

Durability: after every change the group calls ``persist(group)``; the coordinator turns
``to_records`` into Kafka's KIP-848 records in ``__consumer_offsets`` (only what changed), and
``from_records`` rebuilds the group after a restart: members keep their ids, epochs, assignments and
pending revocations, so a member that keeps heart-beating is not rebalanced; session and revocation
timers restart at load time.
"""
from __future__ import annotations

import base64
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from tidelake import errors
from tidelake.coordinator.assignors import ASSIGNORS, Subscription, TopicPartition
from tidelake.coordinator.offsets import (MEMBER_STATE_STABLE, MEMBER_STATE_UNRELEASED_PARTITIONS,
                                          MEMBER_STATE_UNREVOKED_PARTITIONS, ConsumerGroupRecords,
                                          ConsumerMemberAssignment, ConsumerMemberMetadata, PartitionsById)

STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"
_STATE_BYTES = {STABLE: MEMBER_STATE_STABLE, UNREVOKED_PARTITIONS: MEMBER_STATE_UNREVOKED_PARTITIONS,
                UNRELEASED_PARTITIONS: MEMBER_STATE_UNRELEASED_PARTITIONS}
_STATES_BY_BYTE = {b: name for name, b in _STATE_BYTES.items()}

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

STALE_MEMBER_EPOCH = 113  # OffsetCommit/OffsetFetch v9+: epoch older than the member's


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_topics: list[str]
    subscribed_regex: str | None
    server_assignor: str | None
    last_heartbeat_ms: int
    epoch: int = 0
    previous_epoch: int = -1
    state: str = STABLE
    assigned: set[TopicPartition] = field(default_factory=set)
    pending_revocation: set[TopicPartition] = field(default_factory=set)
    revocation_deadline_ms: int = 0
    last_sent: frozenset[TopicPartition] | None = None
    departed: bool = False  # static member that left with epoch -2 and may come back


@dataclass
class HeartbeatResult:
    error: int
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: list[TopicPartition] | None = None  # None: unchanged since the last answer
    error_message: str | None = None


class ConsumerGroup:
    """One KIP-848 group. ``partitions_of(topic)`` gives a topic's partition count (None if the
    topic does not exist); it is consulted on every heartbeat so new topics/partitions rebalance."""

    protocol_kind = "consumer"

    def __init__(self, group_id: str, *, session_timeout_ms: int, heartbeat_interval_ms: int,
                 assignors: Sequence[str], partitions_of: Callable[[str], int | None],
                 list_topics: Callable[[], Iterable[str]] | None = None,
                 persist: Callable[["ConsumerGroup"], None] | None = None,
                 on_rebalance: Callable[[str], None] | None = None) -> None:
        self.group_id = group_id
        self.persist = persist or (lambda g: None)
        self.on_rebalance = on_rebalance or (lambda group_id: None)  # a new target assignment with members
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.assignors = list(assignors)
        self.partitions_of = partitions_of
        self.list_topics = list_topics or (lambda: ())  # for regex subscriptions (non-internal topics)
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target: dict[str, set[TopicPartition]] = {}
        self.assignor_name = self.assignors[0]
        self._topic_snapshot: dict[str, int] = {}
        self._stale_metadata = False  # replayed metadata names a topic since deleted or re-created
        # members whose durable state may have changed since the last persist (None: any of them),
        # so a heartbeat costs O(1) members to persist, not O(group)
        self._dirty: set[str] | None = None
        self.dead = False

    # ---- state ---------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if self.dead:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def member_topics(self, m: ConsumerMember) -> list[str]:
        """Topic names plus the existing topics matching the member's regex (KIP-848 v1)."""
        topics = set(m.subscribed_topics)
        if m.subscribed_regex:
            try:
                pattern = re.compile(m.subscribed_regex)
            except re.error:
                pattern = None
            if pattern is not None:
                topics |= {t for t in self.list_topics() if not t.startswith("__") and pattern.fullmatch(t)}
        return sorted(topics)

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in self.member_topics(m)}

    def _owner_elsewhere(self, tp: TopicPartition, member_id: str) -> bool:
        return any(tp in o.assigned or tp in o.pending_revocation
                   for mid, o in self.members.items() if mid != member_id)

    # ---- heartbeat -------------------------------------------------------------------------------
    def heartbeat(self, *, member_id: str, member_epoch: int, instance_id: str | None, rack_id: str | None,
                  rebalance_timeout_ms: int, subscribed_topic_names: Sequence[str] | None,
                  subscribed_topic_regex: str | None, server_assignor: str | None,
                  owned: Iterable[TopicPartition] | None, client_id: str, client_host: str,
                  now_ms: int) -> HeartbeatResult:
        if server_assignor is not None and server_assignor not in ASSIGNORS:
            return HeartbeatResult(errors.UnsupportedAssignor.code,
                                   error_message=f"assignor {server_assignor!r} is not one of {sorted(ASSIGNORS)}")
        owned_set = None if owned is None else set(owned)

        if member_epoch == LEAVE_EPOCH or member_epoch == STATIC_LEAVE_EPOCH:
            m = self.members.get(member_id)
            if m is None:
                return HeartbeatResult(errors.UnknownMemberId.code)
            self._touch(member_id)
            if member_epoch == STATIC_LEAVE_EPOCH and m.instance_id is not None:
                m.departed = True  # keeps its assignment until it returns or its session expires
                m.previous_epoch = -1  # its next incarnation starts from the epoch it gets back
                m.last_heartbeat_ms = now_ms
            else:
                self._remove(member_id)
            self.persist(self)
            return HeartbeatResult(0, member_id, member_epoch, self.heartbeat_interval_ms)

        if member_epoch == 0:
            if subscribed_topic_names is None and subscribed_topic_regex is None:
                return HeartbeatResult(errors.InvalidRequest.code,
                                       error_message="a joining member must send its subscription")
            member_id = member_id or new_member_id()
            m = self._join(member_id, instance_id, client_id, client_host, rebalance_timeout_ms, now_ms)
            if isinstance(m, HeartbeatResult):
                return m
            m.last_sent = None  # a (re)joining member always gets its assignment
        else:
            m = self.members.get(member_id)
            if m is None:
                return HeartbeatResult(errors.UnknownMemberId.code)
            if m.departed:  # left with epoch -2 (as Kafka records it): only a rejoin (epoch 0) comes back
                return HeartbeatResult(errors.FencedMemberEpoch.code,
                                       error_message=f"static member {member_id} left the group")
            if member_epoch != m.epoch:
                acceptable_stale = (member_epoch == m.previous_epoch and owned_set is not None
                                    and owned_set <= m.assigned)
                if not acceptable_stale:
                    return HeartbeatResult(errors.FencedMemberEpoch.code,
                                           error_message=f"epoch {member_epoch} is not the member's {m.epoch}")
        self._touch(m.member_id)
        m.last_heartbeat_ms = now_ms
        m.client_id, m.client_host = client_id, client_host
        if rack_id is not None:
            m.rack_id = rack_id
        if rebalance_timeout_ms is not None and rebalance_timeout_ms > 0:
            m.rebalance_timeout_ms = rebalance_timeout_ms
        changed = False
        if subscribed_topic_names is not None and sorted(subscribed_topic_names) != sorted(m.subscribed_topics):
            m.subscribed_topics = sorted(set(subscribed_topic_names)); changed = True
        if subscribed_topic_regex is not None and subscribed_topic_regex != m.subscribed_regex:
            m.subscribed_regex = subscribed_topic_regex or None; changed = True
        if server_assignor is not None and server_assignor != m.server_assignor:
            m.server_assignor = server_assignor; changed = True
        self._refresh_target(now_ms, bump=changed or member_epoch == 0)
        self._reconcile(m, owned_set, now_ms)
        assignment = None
        current = frozenset(m.assigned)
        if m.last_sent is None or current != m.last_sent:
            assignment = sorted(current)
            m.last_sent = current
        self.persist(self)
        return HeartbeatResult(0, m.member_id, m.epoch, self.heartbeat_interval_ms, assignment)

    def _join(self, member_id: str, instance_id: str | None, client_id: str, client_host: str,
              rebalance_timeout_ms: int, now_ms: int) -> ConsumerMember | HeartbeatResult:
        if instance_id is not None and instance_id in self.static_members:
            old_id = self.static_members[instance_id]
            old = self.members[old_id]
            if old_id != member_id and not old.departed:
                return HeartbeatResult(errors.UnreleasedInstanceId.code,
                                       error_message=f"instance {instance_id} is in use by {old_id}")
            # the static member comes back: it takes over its previous assignment and epoch
            del self.members[old_id]
            self._touch(old_id)
            self.target[member_id] = self.target.pop(old_id, set())  # (touched by the heartbeat)
            old.member_id, old.departed = member_id, False
            self.members[member_id] = old
            self.static_members[instance_id] = member_id
            return old
        if member_id in self.members:  # a member rejoining with epoch 0 starts afresh
            self._remove(member_id, bump=False)
        m = ConsumerMember(member_id, instance_id, None, client_id, client_host,
                           rebalance_timeout_ms if rebalance_timeout_ms and rebalance_timeout_ms > 0 else 300000,
                           [], None, None, now_ms)
        self.members[member_id] = m
        if instance_id is not None:
            self.static_members[instance_id] = member_id
        return m

    def _touch(self, member_id: str) -> None:
        if self._dirty is not None:
            self._dirty.add(member_id)

    def _remove(self, member_id: str, bump: bool = True) -> None:
        m = self.members.pop(member_id, None)
        if m is None:
            return
        self._touch(member_id)
        if m.instance_id is not None and self.static_members.get(m.instance_id) == member_id:
            del self.static_members[m.instance_id]
        self.target.pop(member_id, None)
        if bump:
            self.group_epoch += 1

    # ---- assignment ------------------------------------------------------------------------------
    def _select_assignor(self) -> str:
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        return votes.most_common(1)[0][0] if votes else self.assignors[0]

    def _refresh_target(self, now_ms: int, bump: bool = False) -> None:
        topics = sorted(self.subscribed_topics())
        snapshot = {t: n for t in topics if (n := self.partitions_of(t))}
        if snapshot != self._topic_snapshot or self._stale_metadata:
            self._topic_snapshot = snapshot
            self._stale_metadata = False
            bump = True  # topics created / deleted / partitions added: a new assignment
        if bump:
            self.group_epoch += 1
        if self.group_epoch == self.assignment_epoch:
            return
        self.assignor_name = self._select_assignor()
        subs = {mid: Subscription(tuple(self.member_topics(m)), tuple(sorted(self.target.get(mid, ()))))
                for mid, m in self.members.items()}
        result = ASSIGNORS[self.assignor_name](subs, snapshot)
        self.target = {mid: set(tps) for mid, tps in result.items()}
        self._dirty = None  # every member's target may have moved
        self.assignment_epoch = self.group_epoch
        if self.members:
            self.on_rebalance(self.group_id)

    def _reconcile(self, m: ConsumerMember, owned: set[TopicPartition] | None, now_ms: int) -> None:
        if m.state == UNREVOKED_PARTITIONS:
            if owned is None or owned & m.pending_revocation:
                return  # still holding what it must give up
            m.pending_revocation = set()
            m.state = STABLE if m.epoch == self.assignment_epoch else UNRELEASED_PARTITIONS
        target = self.target.get(m.member_id, set())
        if m.epoch == self.assignment_epoch and m.state == STABLE and m.assigned == target:
            return
        revoke = m.assigned - target
        if revoke:
            m.assigned -= revoke
            m.pending_revocation = revoke
            m.state = UNREVOKED_PARTITIONS
            m.revocation_deadline_ms = now_ms + m.rebalance_timeout_ms
            return
        m.assigned |= {tp for tp in target - m.assigned if not self._owner_elsewhere(tp, m.member_id)}
        if m.epoch != self.assignment_epoch:
            m.previous_epoch, m.epoch = m.epoch, self.assignment_epoch
        m.state = STABLE if m.assigned == target else UNRELEASED_PARTITIONS

    # ---- time --------------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        removed = False
        for mid, m in list(self.members.items()):
            if now_ms - m.last_heartbeat_ms > self.session_timeout_ms:
                self._remove(mid)  # session expired (also a departed static member not back in time)
                removed = True
            elif m.state == UNREVOKED_PARTITIONS and now_ms > m.revocation_deadline_ms:
                self._remove(mid)  # did not revoke within its rebalance timeout: fenced
                removed = True
        if removed:
            self.persist(self)

    # ---- offsets -------------------------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, member_epoch: int) -> int:
        if self.dead:
            return errors.CoordinatorNotAvailable.code
        if member_epoch < 0 and not self.members:
            return 0  # a simple commit (manual assignment): accepted while the group has no member, as Kafka's
        m = self.members.get(member_id)
        if m is None:
            return errors.UnknownMemberId.code
        if member_epoch > m.epoch:
            return errors.FencedMemberEpoch.code
        if member_epoch < m.epoch:
            return STALE_MEMBER_EPOCH
        return 0

    def target_of(self, member_id: str) -> list[TopicPartition]:
        return sorted(self.target.get(member_id, ()))

    # ---- durability ----------------------------------------------------------------------------------
    def to_records(self, topic_id_of: Callable[[str], object | None],
                   base: ConsumerGroupRecords | None = None) -> ConsumerGroupRecords:
        """This group's durable state as its ``__consumer_offsets`` records hold it (topic ids).
        A dead group has none (every record tombstoned). With ``base`` (the records as of the last
        ``persisted()``), only the members touched since are recomputed."""
        if self.dead:
            return ConsumerGroupRecords()

        def by_id(tps: Iterable[TopicPartition]) -> PartitionsById:
            out: dict = {}
            for tp in tps:
                tid = topic_id_of(tp.topic)
                if tid is not None:
                    out.setdefault(tid, []).append(tp.partition)
            return {tid: tuple(sorted(ps)) for tid, ps in out.items()}

        if base is not None and self._dirty is not None:
            members, current, target = dict(base.members), dict(base.current), dict(base.target)
            for mid in self._dirty:
                for records in (members, current, target):
                    records.pop(mid, None)
            recompute = [mid for mid in self._dirty if mid in self.members]
        else:
            members, current, target = {}, {}, {}
            recompute = list(self.members)
        for mid in recompute:
            m = self.members[mid]
            if mid in self.target:
                target[mid] = by_id(self.target[mid])
            members[mid] = ConsumerMemberMetadata(
                m.instance_id, m.rack_id, m.client_id, m.client_host, sorted(m.subscribed_topics), m.subscribed_regex,
                m.rebalance_timeout_ms, m.server_assignor)
            # a departed static member is recorded with epoch -2 as Kafka does; its epoch in PreviousMemberEpoch
            epoch, previous = (STATIC_LEAVE_EPOCH, m.epoch) if m.departed else (m.epoch, m.previous_epoch)
            current[mid] = ConsumerMemberAssignment(epoch, previous, _STATE_BYTES[m.state], by_id(m.assigned),
                                                    by_id(m.pending_revocation))
        subscription = {t: (tid, n) for t, n in self._topic_snapshot.items() if (tid := topic_id_of(t)) is not None}
        return ConsumerGroupRecords(epoch=self.group_epoch, subscription_metadata=subscription, members=members,
                                    assignment_epoch=self.assignment_epoch, target=target, current=current)

    def touched_members(self) -> set[str] | None:
        """Member ids whose records may have changed since ``persisted()`` (None: any)."""
        return None if self._dirty is None else set(self._dirty)

    def persisted(self) -> None:
        """The records of ``to_records`` are written: track changes from here."""
        self._dirty = set()

    @classmethod
    def from_records(cls, group_id: str, rec: ConsumerGroupRecords, *, topic_name_of: Callable[[object], str | None],
                     now_ms: int, **kwargs) -> "ConsumerGroup":
        """Rebuild a group from its replayed records (``kwargs``: the constructor's settings). Every
        member's session starts now, as does the rebalance timeout of one still revoking."""
        g = cls(group_id, **kwargs)
        g.group_epoch = rec.epoch or 0
        g.assignment_epoch = rec.assignment_epoch if rec.assignment_epoch is not None else 0

        def names(pbi: PartitionsById) -> set[TopicPartition]:
            return {TopicPartition(name, p) for tid, ps in pbi.items()
                    if (name := topic_name_of(tid)) is not None for p in ps}

        # a topic deleted or re-created since (another id) is left out, and the next heartbeat
        # computes a new assignment
        recorded = rec.subscription_metadata or {}
        g._topic_snapshot = {name: n for name, (tid, n) in recorded.items() if topic_name_of(tid) == name}
        g._stale_metadata = len(g._topic_snapshot) != len(recorded)
        for mid, mm in rec.members.items():
            m = ConsumerMember(mid, mm.instance_id, mm.rack_id, mm.client_id, mm.client_host,
                               mm.rebalance_timeout_ms if mm.rebalance_timeout_ms > 0 else 300000,
                               list(mm.subscribed_topic_names), mm.subscribed_topic_regex, mm.server_assignor,
                               last_heartbeat_ms=now_ms)
            a = rec.current.get(mid)
            if a is not None:
                if a.member_epoch == STATIC_LEAVE_EPOCH:
                    m.departed, m.epoch = True, a.previous_member_epoch
                else:
                    m.epoch, m.previous_epoch = a.member_epoch, a.previous_member_epoch
                m.state = _STATES_BY_BYTE.get(a.state, STABLE)
                m.assigned = names(a.assigned)
                m.pending_revocation = names(a.pending_revocation)
                if m.state == UNREVOKED_PARTITIONS:
                    m.revocation_deadline_ms = now_ms + m.rebalance_timeout_ms
            g.members[mid] = m
            if m.instance_id is not None:
                g.static_members[m.instance_id] = mid
        g.target = {mid: names(t) for mid, t in rec.target.items() if mid in g.members}
        g.assignor_name = g._select_assignor()
        return g


def owned_from_wire(topic_partitions, name_of: Callable[[object], str | None]) -> list[TopicPartition] | None:
    """Owned partitions from a heartbeat's TopicPartitions (topic ids) — None stays None."""
    if topic_partitions is None:
        return None
    out = []
    for tp in topic_partitions:
        name = name_of(tp.topic_id)
        if name is not None:
            out.extend(TopicPartition(name, p) for p in tp.partitions)
    return out


def group_by_topic(tps: Iterable[TopicPartition]) -> Mapping[str, list[int]]:
    by: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by.setdefault(tp.topic, []).append(tp.partition)
    return by
