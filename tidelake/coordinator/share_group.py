"""Share groups (KIP-932): membership by ShareGroupHeartbeat and the share-partitions of each group.

A state machine, clock injected through ``now_ms`` arguments and ``tick``; the topic metadata it needs
(ids, partition counts, whether a topic id still exists) and the persistence of share-partition state are
injected callables.

A share-partition belongs to a topic id, not a name (as Kafka keys it, and as ShareFetch names topics): a
topic deleted and created again under its name is a new topic whose records start undelivered. A deleted
topic's share-partitions are forgotten, with tombstones in the state topic, at the next ``tick``.

Membership: a member joins with epoch 0 (the client chose its member id), leaves with -1; any other
epoch must be the member's current one (else FENCED_MEMBER_EPOCH), an unknown member id gets
UNKNOWN_MEMBER_ID. A member that sends no heartbeat for ``session_timeout_ms`` is removed. Every
membership or subscription change, and every change of the target assignment (a topic created, grown or
deleted), bumps the group epoch; a member hears its new assignment on its next heartbeat. The assignor is
Kafka's simple assignor (``share_assignor.py``): partitions balanced over the members, and members over the
partitions when there are more members than partitions (share groups let many members read one partition;
records, not partitions, are what is handed out).

As in Kafka, only a partition whose share state is initialized is assigned: a group's first heartbeat for a
topic queues its partitions, ``tick`` initializes them (the share-partition at its start offset by
``share.auto.offset.reset``, persisted), and the heartbeats after that carry them. In a cluster the share-partitions
live with the partitions' leaders: the group's coordinator initializes their state at the share coordinators
(the broker's ``SharePersister.initialize_pending``, which reports each with ``mark_initialized``). So members that join
together are balanced from their first records on, instead of the first to fetch taking every partition's
records before the others are counted. Meanwhile members are asked to heartbeat sooner, to start reading soon.

The group's state (epoch, members with their subscriptions, epochs and assignments, the partitions initialized or
being initialized) is written as Kafka's records (``share_group_records.py``) through the injected group writer on
every change, before a heartbeat is answered; ``load_groups`` rebuilds groups from them (a restarted broker, a new
coordinator in a cluster), each member's session starting at the load.

A member whose session expires releases the records it had acquired (back to AVAILABLE, or ARCHIVED at
the delivery-count limit); one that leaves keeps them until its share session closes with its last
acknowledgements (or their locks expire), as a client closing sends its leave and its final
acknowledgements side by side.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

from tidelake import errors
from tidelake.coordinator import share_assignor
from tidelake.coordinator.share_config import EARLIEST, ShareGroupConfig
from tidelake.coordinator.share_group_records import (ShareGroupRecords, ShareMemberAssignment, ShareMemberMetadata,
                                                      SharePartitionsMetadata, share_group_records)
from tidelake.coordinator.share_partition import SharePartition
from tidelake.coordinator.share_session import ShareSessionCache
from tidelake.coordinator.share_state import ShareStateKey, snapshot_record, state_partition, tombstone_key

JOIN_EPOCH, LEAVE_EPOCH = 0, -1
STABLE, EMPTY = "Stable", "Empty"
SIMPLE_ASSIGNOR = "simple"
# the heartbeat interval told to members while partitions they subscribe to are being initialized: a new
# group's first records then wait this long, not a whole group.share.heartbeat.interval.ms (5 s); members that
# join within it are still balanced from the start
INITIALIZING_HEARTBEAT_INTERVAL_MS = 500

SharePartitionKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
# a new share-partition's start offset: (topic id, partition, earliest?) -> the log start (earliest) or the
# high watermark; None while the partition is not readable here
StartOffset = Callable[[uuid.UUID, int, bool], int | None]
StateWriter = Callable[[int, list[tuple[bytes, bytes | None]]], None]  # state-topic partition, (key, value)s
# a group's records to its __consumer_offsets partition (raises NotCoordinator where it is not the coordinator's)
GroupWriter = Callable[[str, list[tuple[bytes, bytes | None]]], None]
PartitionsByTopic = dict[uuid.UUID, list[int]]  # topic id -> partitions


@dataclass
class ShareMember:
    member_id: str
    epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    assignment: dict[uuid.UUID, tuple[int, ...]]  # topic id -> partitions (the target)
    deadline_ms: int
    previous_epoch: int = 0
    told: dict[uuid.UUID, tuple[int, ...]] = field(default_factory=dict)  # the assignment last sent to the member


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    initializing: set[tuple[uuid.UUID, int]] = field(default_factory=set)  # assigned once ``tick`` initializes them

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY


@dataclass(frozen=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[uuid.UUID, tuple[int, ...]] | None  # None: unchanged since the member's last heartbeat


class ShareGroupCoordinator:
    def __init__(self, config: ShareGroupConfig, *, topic_id_of: Callable[[str], uuid.UUID | None],
                 partitions_of: Callable[[str], int | None], topic_exists: Callable[[uuid.UUID], bool],
                 start_offset: StartOffset, write: StateWriter | None = None,
                 group_configs: Mapping[str, Mapping[str, str]] | None = None,
                 save_group_configs: Callable[[dict[str, dict[str, str]]], None] | None = None,
                 holds_group_partitions: bool = True, write_group: GroupWriter | None = None,
                 topic_name_of: Callable[[uuid.UUID], str | None] | None = None):
        self.config = config  # the broker's settings (group.share.*)
        # whether the share-partitions of the groups coordinated here are held here too (a broker alone): then a
        # partition is assigned once its share-partition is initialized here (``tick``), and a share-partition's
        # group is known here. Not in a cluster, where they live with each partition's leader, not the group's
        # coordinator: there a partition is assigned once its state is initialized at its share coordinator.
        self.holds_group_partitions = holds_group_partitions
        # each group's share.* configs (IncrementalAlterConfigs on its GROUP resource), persisted by the caller
        self.group_configs: dict[str, dict[str, str]] = {g: dict(c) for g, c in (group_configs or {}).items()}
        self.save_group_configs = save_group_configs
        self.topic_id_of = topic_id_of
        self.partitions_of = partitions_of
        self.topic_exists = topic_exists
        self.start_offset = start_offset
        self.write = write  # None: nothing persisted (the state machine alone, in tests)
        # the groups' records in __consumer_offsets (None: membership not persisted, the state machine alone) and
        # what was last written of each group, which the next records are diffed against
        self.write_group = write_group
        self.topic_name_of = topic_name_of
        self.records: dict[str, ShareGroupRecords] = {}
        self.groups: dict[str, ShareGroup] = {}
        self.share_partitions: dict[SharePartitionKey, SharePartition] = {}
        # in a cluster, the share-partitions of the groups coordinated here whose state is known to be initialized
        # at their share coordinators (Kafka keeps this in __consumer_offsets; here a new coordinator learns it again)
        self.initialized: set[SharePartitionKey] = set()
        self.sessions = ShareSessionCache()

    # -- per-group settings -----------------------------------------------------------------------
    def config_for(self, group_id: str) -> ShareGroupConfig:
        overrides = self.group_configs.get(group_id)
        return self.config.with_group_configs(overrides) if overrides else self.config

    def set_group_configs(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """Replace a group's ``share.*`` configs (validated; InvalidConfig otherwise); its share-partitions
        use the new lock duration, delivery limit and record-lock bound from their next request on."""
        config = self.config.with_group_configs(overrides)
        if overrides:
            self.group_configs[group_id] = dict(overrides)
        else:
            self.group_configs.pop(group_id, None)
        for (gid, _t, _p), sp in self.share_partitions.items():
            if gid == group_id:
                sp.config = config
        if self.save_group_configs is not None:
            self.save_group_configs({g: dict(c) for g, c in self.group_configs.items()})

    # -- membership -------------------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, *, subscribed: list[str] | None,
                  rack_id: str | None, client_id: str, client_host: str, now_ms: int) -> HeartbeatAnswer:
        if not member_id:
            raise errors.InvalidRequest("ShareGroupHeartbeat without a member id (the client chooses it)")
        group = self.groups.setdefault(group_id, ShareGroup(group_id))
        member = group.members.get(member_id)
        if member_epoch == LEAVE_EPOCH:
            if member is not None:  # its records stay acquired until its share session closes (the client
                del group.members[member_id]  # sends its last acknowledgements then) or their locks expire
                group.epoch += 1
                self.persist_group(group_id)
            return HeartbeatAnswer(member_id, LEAVE_EPOCH, self.config_for(group_id).heartbeat_interval_ms, None)
        if member_epoch == JOIN_EPOCH:
            if not subscribed:
                raise errors.InvalidRequest("a joining share-group member must name the topics it subscribes to")
            if member is None:
                member = ShareMember(member_id, 0, client_id, client_host, rack_id, (), {}, 0)
                group.members[member_id] = member
                group.epoch += 1
        elif member is None:
            raise errors.UnknownMemberId(f"member {member_id} is not in share group {group_id}")
        elif member_epoch != member.epoch:
            raise errors.FencedMemberEpoch(f"member {member_id} of share group {group_id} sent epoch "
                                           f"{member_epoch}, its epoch is {member.epoch}")
        config = self.config_for(group_id)
        member.deadline_ms = now_ms + config.session_timeout_ms
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed is not None and tuple(sorted(set(subscribed))) != member.subscribed:
            member.subscribed = tuple(sorted(set(subscribed)))
            group.epoch += 1
        self._reassign(group)
        changed = member_epoch == JOIN_EPOCH or member.epoch != group.epoch
        if member.epoch != group.epoch:
            member.previous_epoch, member.epoch = member.epoch, group.epoch
            group.assignment_epoch = group.epoch
        if changed:
            member.told = dict(member.assignment)
        self.persist_group(group_id)  # before the member hears it, as Kafka writes its records first
        # while the group waits for partitions to be initialized, its members come back sooner for them
        interval = (min(config.heartbeat_interval_ms, INITIALIZING_HEARTBEAT_INTERVAL_MS) if group.initializing
                    else config.heartbeat_interval_ms)
        return HeartbeatAnswer(member_id, member.epoch, interval,
                               dict(member.assignment) if changed else None)

    def _reassign(self, group: ShareGroup) -> None:
        """Compute the group's target assignment; a change for any member bumps the group epoch (each member
        hears its own at its next heartbeat)."""
        subscriptions, assignable, pending = {}, {}, set()
        for member in group.members.values():
            ids = set()
            for name in member.subscribed:
                topic_id, n = self.topic_id_of(name), self.partitions_of(name)
                if topic_id is None or not n:
                    continue
                ids.add(topic_id)
                if topic_id not in assignable:
                    held = self.share_partitions if self.holds_group_partitions else self.initialized
                    ready = [p for p in range(n) if (group.group_id, topic_id, p) in held]
                    pending.update((topic_id, p) for p in range(n) if p not in ready)
                    assignable[topic_id] = tuple(ready)
            subscriptions[member.member_id] = frozenset(ids)
        group.initializing = pending  # what the members subscribe to now (a deleted topic's partitions drop out)
        target = share_assignor.assign(subscriptions, assignable,
                                       {m.member_id: m.assignment for m in group.members.values()})
        if any(target[m.member_id] != m.assignment for m in group.members.values()):
            for member in group.members.values():
                member.assignment = target[member.member_id]
            group.epoch += 1

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.epoch += 1
        self.sessions.drop_member(group.group_id, member_id)
        self.release_member(group.group_id, member_id)

    def release_member(self, group_id: str, member_id: str) -> int:
        """Release every record ``member_id`` holds in the group's share-partitions; how many."""
        return sum(sp.release_member(member_id) for (gid, _t, _p), sp in self.share_partitions.items()
                   if gid == group_id)

    def forget_members(self, chosen: Callable[[str], bool]) -> list[str]:
        """This broker no longer coordinates the groups ``chosen`` picks (a cluster's coordinator moved): forget
        their members (their share-partitions stay with the partitions' leaders); the group ids."""
        gone = sorted(g.group_id for g in self.groups.values() if chosen(g.group_id))
        for group_id in gone:
            del self.groups[group_id]  # the new coordinator has them from __consumer_offsets
            self.records.pop(group_id, None)
        self.initialized = {key for key in self.initialized if not chosen(key[0])}
        return gone

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def tick(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove members whose session expired, release locks that expired, initialize the share-partitions
        heartbeats asked for and forget those of deleted topics; the (group, member) pairs removed."""
        self.forget_deleted_topics()
        self.initialized = {key for key in self.initialized if self.topic_exists(key[1])}
        for group in self.groups.values() if self.holds_group_partitions else ():
            for topic_id, partition in sorted(group.initializing):
                if (not self.topic_exists(topic_id)
                        or self.initialize_partition(group.group_id, topic_id, partition) is not None):
                    group.initializing.discard((topic_id, partition))
        removed = []
        for group in self.groups.values():
            for member_id in [m.member_id for m in group.members.values() if m.deadline_ms <= now_ms]:
                self._remove(group, member_id)
                removed.append((group.group_id, member_id))
        for sp in self.share_partitions.values():
            sp.expire_locks(now_ms)
        initialized = self._initialized_by_group()   # one pass over the share-partitions, not one per group
        for group_id in list(self.groups):
            self._persist_or_retry(group_id, initialized.get(group_id, {}))
        return removed

    def pending_initializations(self) -> list[ShareStateKey]:
        """In a cluster, the share-partitions the groups coordinated here wait for (to initialize at their share
        coordinators)."""
        return [ShareStateKey(group.group_id, topic_id, partition) for group in self.groups.values()
                for topic_id, partition in sorted(group.initializing) if self.topic_exists(topic_id)]

    def mark_initialized(self, key: ShareStateKey) -> None:
        """In a cluster, the share-partition's state is initialized: its group's next heartbeats assign it."""
        self.initialized.add((key.group_id, key.topic_id, key.partition))
        group = self.groups.get(key.group_id)
        if group is not None:
            group.initializing.discard((key.topic_id, key.partition))
            self._persist_or_retry(key.group_id)

    def offsets_altered(self, key: ShareStateKey) -> None:
        """AlterShareGroupOffsets set the share-partition's state at its share coordinator: the group exists (an
        empty one is created, as Kafka's coordinator does) and, in a cluster, the partition counts as initialized,
        so DescribeShareGroupOffsets lists it and the group's next members are assigned it at once."""
        self.groups.setdefault(key.group_id, ShareGroup(key.group_id))
        if not self.holds_group_partitions:
            self.initialized.add((key.group_id, key.topic_id, key.partition))
        self.persist_group(key.group_id)

    def forget_initialized(self, group_id: str, topic_id: uuid.UUID) -> None:
        """In a cluster, the group's state of a topic was deleted: its partitions are initialized again before
        they are assigned again."""
        self.initialized = {key for key in self.initialized if key[:2] != (group_id, topic_id)}
        if group_id in self.groups:
            self.persist_group(group_id)

    # -- the groups' records in __consumer_offsets -------------------------------------------------
    def persist_group(self, group_id: str, initialized: PartitionsByTopic | None = None) -> None:
        """Write what changed in the group's records since they were last written (nothing without a
        ``write_group``); ``initialized``: the group's initialized partitions, when the caller has them."""
        group = self.groups.get(group_id)
        if self.write_group is None or group is None:
            return
        old = self.records.get(group_id) or ShareGroupRecords()
        new = self.records_of(group, initialized)
        records = share_group_records(group_id, old, new)
        if records:
            self.write_group(group_id, records)
            self.records[group_id] = new

    def _persist_or_retry(self, group_id: str, initialized: PartitionsByTopic | None = None) -> None:
        """``persist_group`` off a request: a write refused (the partition's leadership moving) is tried again at the
        next tick, if the group is still coordinated here."""
        try:
            self.persist_group(group_id, initialized)
        except errors.KafkaApiError:
            pass

    def _initialized_by_group(self, group_id: str | None = None) -> dict[str, PartitionsByTopic]:
        """Each group's (or only ``group_id``'s) partitions whose share state is initialized: held here (a broker
        alone) or known initialized at the share coordinators (a cluster)."""
        held = self.share_partitions if self.holds_group_partitions else self.initialized
        out: dict[str, PartitionsByTopic] = {}
        for gid, topic_id, partition in held:
            if group_id is None or gid == group_id:
                out.setdefault(gid, {}).setdefault(topic_id, []).append(partition)
        return out

    def records_of(self, group: ShareGroup, initialized: PartitionsByTopic | None = None) -> ShareGroupRecords:
        """The group's state as its records in __consumer_offsets hold it (``initialized``: its initialized
        partitions, found here when not given)."""
        members = sorted(group.members.values(), key=lambda m: m.member_id)
        if initialized is None:
            initialized = self._initialized_by_group(group.group_id).get(group.group_id, {})
        initializing: dict[uuid.UUID, list[int]] = {}
        for topic_id, partition in group.initializing:
            initializing.setdefault(topic_id, []).append(partition)
        return ShareGroupRecords(
            epoch=group.epoch,
            members={m.member_id: ShareMemberMetadata(m.rack_id, m.client_id, m.client_host, m.subscribed)
                     for m in members},
            assignment_epoch=group.assignment_epoch,
            target={m.member_id: dict(m.assignment) for m in members},
            current={m.member_id: ShareMemberAssignment(m.epoch, m.previous_epoch, dict(m.told)) for m in members},
            partitions=SharePartitionsMetadata(self._named(initializing), self._named(initialized)))

    def _named(self, partitions: dict[uuid.UUID, list[int]]) -> dict[uuid.UUID, tuple[str, tuple[int, ...]]]:
        return {topic_id: ((self.topic_name_of(topic_id) if self.topic_name_of else None) or "", tuple(sorted(ps)))
                for topic_id, ps in partitions.items()}

    def load_groups(self, groups: Mapping[str, ShareGroupRecords], now_ms: int) -> list[str]:
        """Rebuild groups from their records in __consumer_offsets (a broker starting, or becoming the coordinator
        of their partition); each member's session starts now. The group ids."""
        for group_id, rec in groups.items():
            if rec.epoch is None:
                continue  # member records without the group's own: not a group
            group = self.groups.setdefault(group_id, ShareGroup(group_id))
            group.epoch, group.assignment_epoch = rec.epoch, rec.assignment_epoch or 0
            session_ms = self.config_for(group_id).session_timeout_ms
            group.members = {}
            for member_id, meta in sorted(rec.members.items()):
                current = rec.current.get(member_id) or ShareMemberAssignment(JOIN_EPOCH, JOIN_EPOCH, {})
                group.members[member_id] = ShareMember(
                    member_id, current.member_epoch, meta.client_id, meta.client_host, meta.rack_id,
                    meta.subscribed_topic_names, dict(rec.target.get(member_id, {})), now_ms + session_ms,
                    current.previous_member_epoch, dict(current.assigned))
            partitions = rec.partitions or SharePartitionsMetadata()
            group.initializing = {(tid, p) for tid, (_name, ps) in partitions.initializing.items() for p in ps}
            if not self.holds_group_partitions:
                self.initialized = {key for key in self.initialized if key[0] != group_id}
                self.initialized.update((group_id, tid, p) for tid, (_name, ps) in partitions.initialized.items()
                                        for p in ps)
            self.records[group_id] = rec
        return sorted(g for g, r in groups.items() if r.epoch is not None)

    def topics_with_state(self, group_id: str) -> list[uuid.UUID]:
        """The topics whose share state the group has (or is being given): to delete with the group."""
        group = self.groups.get(group_id)
        held = self.share_partitions if self.holds_group_partitions else self.initialized
        ids = {topic_id for gid, topic_id, _p in held if gid == group_id}
        ids.update(topic_id for topic_id, _p in (group.initializing if group is not None else ()))
        return sorted(ids, key=str)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups on a share group: its records tombstoned, and a broker alone forgets its share-partitions
        (their state tombstoned too). GroupIdNotFound / NonEmptyGroup otherwise."""
        group = self.groups.get(group_id)
        if group is None:
            raise errors.GroupIdNotFound(f"share group {group_id} does not exist")
        if group.members:
            raise errors.NonEmptyGroup(f"share group {group_id} has members")
        old = self.records.get(group_id)
        if self.write_group is not None and old is not None:
            self.write_group(group_id, share_group_records(group_id, old, ShareGroupRecords()))
        self.records.pop(group_id, None)
        del self.groups[group_id]
        self._forget([key for key in self.share_partitions if key[0] == group_id])
        self.initialized = {key for key in self.initialized if key[0] != group_id}

    # -- share-partitions -------------------------------------------------------------------------
    def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        return self.share_partitions.get((group_id, topic_id, partition))

    def initialize_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The group's share-partition, initialized at the start offset ``share.auto.offset.reset`` picks if it
        has none; None while the partition cannot be read here (its topic deleted, not led here)."""
        sp = self.share_partitions.get((group_id, topic_id, partition))
        if sp is not None:
            return sp
        start = self.reset_offset(group_id, topic_id, partition)
        return None if start is None else self.initialize(group_id, topic_id, partition, start)

    def reset_offset(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        """Where the group starts reading a partition it has no state for (``share.auto.offset.reset``); None
        while the partition cannot be read here."""
        return self.start_offset(topic_id, partition, self.config_for(group_id).auto_offset_reset == EARLIEST)

    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int) -> SharePartition:
        """The share-partition of a group reading a partition for the first time, starting at
        ``start_offset`` (share.auto.offset.reset's answer: the log start or its end)."""
        sp = SharePartition(self.config_for(group_id), start_offset, changed=True)
        self.share_partitions[(group_id, topic_id, partition)] = sp
        if self.holds_group_partitions:
            self.groups.setdefault(group_id, ShareGroup(group_id))
        return sp

    def restore(self, group_id: str, topic_id: uuid.UUID, partition: int, sp: SharePartition) -> None:
        """A share-partition rebuilt from ``__share_group_state``."""
        sp.config = self.config_for(group_id)
        self.share_partitions[(group_id, topic_id, partition)] = sp
        if self.holds_group_partitions:
            self.groups.setdefault(group_id, ShareGroup(group_id))

    def unload_partition(self, topic_id: uuid.UUID, partition: int) -> int:
        """This broker no longer leads the partition, or leads it anew: forget its share-partitions (their state
        is persisted; the next leader reads it back) and their locks; how many."""
        gone = [key for key in self.share_partitions if key[1] == topic_id and key[2] == partition]
        for key in gone:
            del self.share_partitions[key]
        return len(gone)

    def drop_share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Forget one share-partition held here, its state left as persisted (it was changed elsewhere: the next
        fetch reads it again)."""
        self.share_partitions.pop((group_id, topic_id, partition), None)

    def delete_offsets(self, group_id: str, topic_id: uuid.UUID) -> list[int]:
        """DeleteShareGroupOffsets: forget the group's state of a topic (tombstones in the state topic); the
        partitions forgotten."""
        gone = sorted(p for (gid, t, p) in self.share_partitions if gid == group_id and t == topic_id)
        self._forget([(group_id, topic_id, p) for p in gone])
        return gone

    def forget_deleted_topics(self) -> int:
        """Forget the share-partitions of topics that no longer exist (Kafka deletes a deleted topic's share
        state); the number forgotten."""
        gone = [key for key in self.share_partitions if not self.topic_exists(key[1])]
        self._forget(gone)
        return len(gone)

    def _forget(self, keys: list[SharePartitionKey]) -> None:
        """Drop share-partitions and write their tombstones."""
        by_partition: dict[int, list] = {}
        for group_id, topic_id, partition in keys:
            del self.share_partitions[(group_id, topic_id, partition)]
            key = ShareStateKey(group_id, topic_id, partition)
            by_partition.setdefault(state_partition(key, self.config.state_partitions), []).append(
                (tombstone_key(key), None))
        if self.write is not None:
            for partition, records in by_partition.items():
                self.write(partition, records)

    def flush(self, leader_epoch: int = 0) -> int:
        """Persist every share-partition changed since the last flush (one ShareSnapshot each); the number
        written. Called after each request that changes state and after each tick."""
        if self.write is None:
            return 0
        by_partition: dict[int, list] = {}
        for key, sp in self.take_changed():
            by_partition.setdefault(state_partition(key, self.config.state_partitions), []).append(
                snapshot_record(key, sp, leader_epoch))
        for partition, records in by_partition.items():
            self.write(partition, records)
        return sum(len(r) for r in by_partition.values())

    def take_changed(self) -> list[tuple[ShareStateKey, SharePartition]]:
        """The share-partitions changed since they were last taken (to persist), those of deleted topics left
        out (their tombstones are written at the next tick)."""
        out = []
        for (group_id, topic_id, partition), sp in self.share_partitions.items():
            if sp.take_changed() and self.topic_exists(topic_id):
                out.append((ShareStateKey(group_id, topic_id, partition), sp))
        return out
