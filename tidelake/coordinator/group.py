"""Classic consumer groups (JoinGroup / SyncGroup / Heartbeat / LeaveGroup): a state machine.

Driven only by requests and an injected clock (``now_ms`` arguments and ``tick(now_ms)``): no
sockets, no sleeping. JoinGroup and SyncGroup answers are asyncio futures that the state machine
completes when the rebalance phase they wait for ends (every member rejoined / the leader sent the
assignment / the rebalance timeout expired).

States (Kafka's names): Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and Dead
after DeleteGroups. Error codes are Kafka's (see tidelake.errors).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from tidelake import errors
from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.offsets import GroupMetadataRecord, MemberRecord

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

NONE = 0

log = logging.getLogger(__name__)


@dataclass
class JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # only for the leader
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_heartbeat_ms: int
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


def _new_future() -> asyncio.Future:
    return asyncio.get_running_loop().create_future()


def _done(value) -> asyncio.Future:
    f = _new_future()
    f.set_result(value)
    return f


def _resolve(fut: asyncio.Future | None, value) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)


class ClassicGroup:
    """One classic group. ``persist(group)`` is called whenever the durable state changes
    (a generation becomes Stable, the group becomes Empty); it writes GroupMetadataValue."""

    protocol_kind = "classic"

    def __init__(self, group_id: str, config: GroupConfig, now_ms: int,
                 persist: Callable[["ClassicGroup"], None] | None = None,
                 on_rebalance: Callable[[str], None] | None = None) -> None:
        self.group_id = group_id
        self.config = config
        self.persist = persist or (lambda g: None)
        self.on_rebalance = on_rebalance or (lambda group_id: None)  # a generation with members began
        self.state = EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        # member id handed out by MEMBER_ID_REQUIRED -> (since, session timeout): it must rejoin in time
        self.pending_members: dict[str, tuple[int, int]] = {}
        self.rebalance_deadline_ms = 0
        self.initial_delay_until_ms = 0
        self.state_timestamp_ms = now_ms

    # ---- helpers -----------------------------------------------------------------------------
    def _set_state(self, state: str, now_ms: int) -> None:
        if state != self.state:  # an operator follows joins and rebalances by these lines
            log.info("group %s: %s -> %s (generation %d, %d member%s)", self.group_id, self.state, state,
                     self.generation, len(self.members), "" if len(self.members) == 1 else "s")
        self.state = state
        self.state_timestamp_ms = now_ms

    def _supported_protocols(self) -> set[str]:
        sets = [set(n for n, _ in m.protocols) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def _select_protocol(self) -> str | None:
        candidates = self._supported_protocols()
        if not candidates:
            return None
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in candidates)
            if choice not in votes:
                order.append(choice)
            votes[choice] = votes.get(choice, 0) + 1
        return max(order, key=lambda p: votes[p])  # ties: the first voted

    def _join_result_for(self, member_id: str) -> JoinResult:
        members = []
        if member_id == self.leader:
            members = [(m.member_id, m.group_instance_id, m.metadata(self.protocol)) for m in self.members.values()]
        return JoinResult(NONE, member_id, self.generation, self.protocol_type, self.protocol,
                          self.leader or "", members)

    def _fence_check(self, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is not None and current != member_id:
                return errors.FencedInstanceId.code
        if member_id not in self.members:
            return errors.UnknownMemberId.code
        return NONE

    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    # ---- JoinGroup -----------------------------------------------------------------------------
    def join(self, *, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: Sequence[tuple[str, bytes]], require_known_member_id: bool, now_ms: int) -> asyncio.Future:
        protocols = [(n, bytes(m or b"")) for n, m in protocols]
        if rebalance_timeout_ms is None or rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has no rebalance timeout
        if self.state == DEAD:
            return _done(JoinResult(errors.CoordinatorNotAvailable.code, member_id))
        if not (self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms):
            return _done(JoinResult(errors.InvalidSessionTimeout.code, member_id))
        if not protocols or not protocol_type:
            return _done(JoinResult(errors.InconsistentGroupProtocol.code, member_id))
        if self.members:
            others = [m for m in self.members.values() if m.member_id != member_id]
            if others and (protocol_type != self.protocol_type or
                           not (set(n for n, _ in protocols) & set.intersection(*[set(n for n, _ in m.protocols) for m in others]))):
                return _done(JoinResult(errors.InconsistentGroupProtocol.code, member_id))

        fields = dict(client_id=client_id, client_host=client_host, session_timeout_ms=session_timeout_ms,
                      rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type, protocols=protocols)

        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if group_instance_id is not None and group_instance_id in self.static_members:
                return self._replace_static_member(group_instance_id, new_id, fields, now_ms)
            if require_known_member_id and group_instance_id is None:
                self.pending_members[new_id] = (now_ms, session_timeout_ms)
                return _done(JoinResult(errors.MemberIdRequired.code, new_id))
            return self._add_member_and_rebalance(new_id, group_instance_id, fields, now_ms)

        if member_id in self.pending_members:
            del self.pending_members[member_id]
            return self._add_member_and_rebalance(member_id, group_instance_id, fields, now_ms)
        err = self._fence_check(member_id, group_instance_id)
        if err:
            return _done(JoinResult(err, member_id))

        member = self.members[member_id]
        changed = member.protocols != protocols
        for k, v in fields.items():
            setattr(member, k, v)
        member.last_heartbeat_ms = now_ms
        fut = _new_future()
        if self.state == PREPARING_REBALANCE:
            _resolve(member.join_future, JoinResult(errors.RebalanceInProgress.code, member_id))
            member.join_future = fut
            self._maybe_complete_join(now_ms)
        elif self.state == COMPLETING_REBALANCE and not changed:
            fut.set_result(self._join_result_for(member_id))
        elif self.state == STABLE and not changed and member_id != self.leader:
            fut.set_result(self._join_result_for(member_id))
        else:
            member.join_future = fut
            self._prepare_rebalance(now_ms)
        return fut

    def _add_member_and_rebalance(self, member_id: str, instance_id: str | None, fields: dict, now_ms: int) -> asyncio.Future:
        member = ClassicMember(member_id=member_id, group_instance_id=instance_id, last_heartbeat_ms=now_ms, **fields)
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member_id] = member
        if instance_id is not None:
            self.static_members[instance_id] = member_id
        member.join_future = _new_future()
        fut = member.join_future
        if self.state == PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms)
        else:
            self._prepare_rebalance(now_ms)
        return fut

    def _replace_static_member(self, instance_id: str, new_id: str, fields: dict, now_ms: int) -> asyncio.Future:
        """A static member came back with a new member id: it takes over the old member's place;
        the old member id is fenced. No rebalance unless something changed (KIP-345)."""
        old_id = self.static_members[instance_id]
        old = self.members.pop(old_id)
        _resolve(old.join_future, JoinResult(errors.FencedInstanceId.code, old_id))
        _resolve(old.sync_future, SyncResult(errors.FencedInstanceId.code))
        changed = old.protocols != fields["protocols"]
        member = ClassicMember(member_id=new_id, group_instance_id=instance_id, last_heartbeat_ms=now_ms,
                               assignment=old.assignment, **fields)
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        was_leader = self.leader == old_id
        if was_leader:
            self.leader = new_id
        fut = _new_future()
        if self.state == STABLE and not changed:
            result = self._join_result_for(new_id)
            if was_leader:
                result.skip_assignment = True  # the leader must not recompute (KIP-814)
            fut.set_result(result)
            self.persist(self)
        elif self.state == COMPLETING_REBALANCE and not changed:
            fut.set_result(self._join_result_for(new_id))
        else:
            member.join_future = fut
            if self.state == PREPARING_REBALANCE:
                self._maybe_complete_join(now_ms)
            else:
                self._prepare_rebalance(now_ms)
        return fut

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state == COMPLETING_REBALANCE:
            for m in self.members.values():  # the assignment being synced is obsolete
                _resolve(m.sync_future, SyncResult(errors.RebalanceInProgress.code))
                m.sync_future = None
        if self.state == EMPTY:
            self.initial_delay_until_ms = now_ms + self.config.initial_rebalance_delay_ms
        self._set_state(PREPARING_REBALANCE, now_ms)
        self.rebalance_deadline_ms = now_ms + max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self._maybe_complete_join(now_ms)

    def _maybe_complete_join(self, now_ms: int) -> None:
        if self.state != PREPARING_REBALANCE or now_ms < self.initial_delay_until_ms:
            return
        all_joined = all(m.join_future is not None for m in self.members.values()) and not self.pending_members
        if all_joined or now_ms >= self.rebalance_deadline_ms:
            self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> None:
        for mid in [mid for mid, m in self.members.items() if m.join_future is None]:
            self._remove_member(mid)  # did not rejoin within the rebalance timeout
        self.pending_members.clear()
        self.generation += 1
        if not self.members:  # the protocol type stays, as in Kafka: the group is still a consumer group
            self.protocol = None
            self.leader = None
            self._set_state(EMPTY, now_ms)
            self.persist(self)
            return
        self.protocol = self._select_protocol()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self._set_state(COMPLETING_REBALANCE, now_ms)
        self.on_rebalance(self.group_id)
        for m in self.members.values():
            m.last_heartbeat_ms = now_ms  # session timers restart with the new generation
            m.assignment = b""
            fut, m.join_future = m.join_future, None
            _resolve(fut, self._join_result_for(m.member_id))

    def _remove_member(self, member_id: str) -> None:
        m = self.members.pop(member_id, None)
        if m is None:
            return
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        _resolve(m.join_future, JoinResult(errors.UnknownMemberId.code, member_id))
        _resolve(m.sync_future, SyncResult(errors.UnknownMemberId.code))
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)

    # ---- SyncGroup -----------------------------------------------------------------------------
    def sync(self, *, member_id: str, group_instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes] | None,
             now_ms: int) -> asyncio.Future:
        err = self._fence_check(member_id, group_instance_id) if self.state != DEAD else errors.CoordinatorNotAvailable.code
        if err:
            return _done(SyncResult(err))
        if generation_id != self.generation:
            return _done(SyncResult(errors.IllegalGeneration.code))
        if (protocol_type is not None and protocol_type != self.protocol_type) or \
                (protocol_name is not None and protocol_name != self.protocol):
            return _done(SyncResult(errors.InconsistentGroupProtocol.code))
        member = self.members[member_id]
        member.last_heartbeat_ms = now_ms
        if self.state == PREPARING_REBALANCE:
            return _done(SyncResult(errors.RebalanceInProgress.code))
        if self.state == STABLE:
            return _done(SyncResult(NONE, member.assignment, self.protocol_type, self.protocol))
        fut = _new_future()
        _resolve(member.sync_future, SyncResult(errors.RebalanceInProgress.code))
        member.sync_future = fut
        if member_id == self.leader and assignments is not None:
            for m in self.members.values():
                m.assignment = bytes(assignments.get(m.member_id, b"") or b"")
            self._set_state(STABLE, now_ms)
            self.persist(self)
            for m in self.members.values():
                f, m.sync_future = m.sync_future, None
                _resolve(f, SyncResult(NONE, m.assignment, self.protocol_type, self.protocol))
        return fut

    # ---- Heartbeat / LeaveGroup ------------------------------------------------------------------
    def heartbeat(self, *, member_id: str, group_instance_id: str | None, generation_id: int, now_ms: int) -> int:
        if self.state == DEAD:
            return errors.CoordinatorNotAvailable.code
        err = self._fence_check(member_id, group_instance_id)
        if err:
            return err
        if generation_id != self.generation:
            return errors.IllegalGeneration.code
        self.members[member_id].last_heartbeat_ms = now_ms
        if self.state == PREPARING_REBALANCE:
            return errors.RebalanceInProgress.code
        return NONE

    def leave(self, members: Sequence[tuple[str, str | None]], now_ms: int) -> list[int]:
        results = []
        removed = False
        for member_id, instance_id in members:
            if instance_id is not None:
                current = self.static_members.get(instance_id)
                if current is None:
                    results.append(errors.UnknownMemberId.code)
                elif member_id and member_id != current:
                    results.append(errors.FencedInstanceId.code)
                else:
                    self._remove_member(current); removed = True; results.append(NONE)
            elif member_id in self.pending_members:
                del self.pending_members[member_id]; results.append(NONE)
            elif member_id in self.members:
                self._remove_member(member_id); removed = True; results.append(NONE)
            else:
                results.append(errors.UnknownMemberId.code)
        if removed:
            log.info("group %s: %d member(s) left; %d remain", self.group_id,
                     sum(1 for r in results if r == NONE), len(self.members))
            self._after_removal(now_ms)
        return results

    def _after_removal(self, now_ms: int) -> None:
        if self.state == PREPARING_REBALANCE:
            if not self.members:
                self._complete_join(now_ms)
            else:
                self._maybe_complete_join(now_ms)
        elif self.members:
            self._prepare_rebalance(now_ms)
        elif self.state != EMPTY:
            self._complete_join(now_ms)  # last member gone: new generation, Empty, persisted

    # ---- time ----------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """Expire sessions and rebalance timeouts as of ``now_ms``."""
        for mid, (since, session_ms) in list(self.pending_members.items()):
            if now_ms - since > session_ms:
                del self.pending_members[mid]
                self._maybe_complete_join(now_ms)  # the join may have been waiting for it
        expired = [mid for mid, m in self.members.items()
                   if m.join_future is None and m.sync_future is None
                   and now_ms - m.last_heartbeat_ms > m.session_timeout_ms]
        for mid in expired:
            self._remove_member(mid)
        if expired:
            self._after_removal(now_ms)
        if self.state == PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms)

    # ---- offsets -------------------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        if self.state == DEAD:
            return errors.CoordinatorNotAvailable.code
        if generation_id < 0 and self.state == EMPTY:
            # a commit from outside the group management (manual assignment, the admin client) is
            # allowed while nobody is in the group, whatever member id it carries (a KIP-848
            # consumer that only assign()s sends its own), as Kafka's
            return NONE
        if generation_id < 0 and not member_id and group_instance_id is None:
            return errors.UnknownMemberId.code
        err = self._fence_check(member_id, group_instance_id)
        if err:
            return err
        if generation_id != self.generation:
            return errors.IllegalGeneration.code
        if self.state == COMPLETING_REBALANCE:
            return errors.RebalanceInProgress.code
        return NONE

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None if unknown."""
        if self.protocol_type != "consumer" or not self.members:
            return set()
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics |= set(ConsumerProtocolSubscription.decode(m.metadata(self.protocol)).topics)
        except Exception:
            return None
        return topics

    # ---- persistence -----------------------------------------------------------------------------
    def to_record(self) -> GroupMetadataRecord:
        return GroupMetadataRecord(
            protocol_type=self.protocol_type or "", generation=self.generation, protocol=self.protocol,
            leader=self.leader, current_state_timestamp_ms=self.state_timestamp_ms,
            members=[MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(self.protocol),
                                  m.assignment) for m in self.members.values()])

    @classmethod
    def from_record(cls, group_id: str, rec: GroupMetadataRecord, config: GroupConfig, now_ms: int,
                    persist: Callable[["ClassicGroup"], None] | None = None,
                    on_rebalance: Callable[[str], None] | None = None) -> "ClassicGroup":
        """Reload after a restart: members keep their generation and assignment and must keep
        heart-beating (their session timers start now)."""
        g = cls(group_id, config, now_ms, persist, on_rebalance)
        g.generation = rec.generation
        g.protocol_type = rec.protocol_type or None
        g.protocol = rec.protocol
        g.leader = rec.leader
        for mr in rec.members:
            g.members[mr.member_id] = ClassicMember(
                mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host, mr.session_timeout_ms,
                mr.rebalance_timeout_ms if mr.rebalance_timeout_ms >= 0 else mr.session_timeout_ms,
                rec.protocol_type, [(rec.protocol or "", mr.subscription)], now_ms, mr.assignment)
            if mr.group_instance_id is not None:
                g.static_members[mr.group_instance_id] = mr.member_id
        g.state = STABLE if g.members else EMPTY
        return g
