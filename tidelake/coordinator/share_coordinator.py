"""The share coordinator of a cluster (KIP-932): the keeper of share-partition state, as Kafka splits it.

The leader of a ``__share_group_state`` partition holds the latest persisted state of every share-partition
hashed to it (``share_state.state_partition``), rebuilt by replaying that partition when it becomes leader.
Partition leaders (which hold the in-flight records) read it back when they start serving a partition
(ReadShareGroupState) and write each change (WriteShareGroupState): a write is one ShareSnapshot record
appended to the state partition. InitializeShareGroupState and DeleteShareGroupState set and forget a
share-partition's state (a tombstone). As in Kafka, a share-partition's state is only ever created by an
initialization (a partition leader's first, or the group coordinator's AlterShareGroupOffsets at a newer state
epoch): a write to a share-partition without state is fenced, so a leader still holding a share-partition whose
state was deleted or altered meanwhile cannot bring the old state back; it drops it and reads it again.

A state machine: the appends are the injected ``write`` (it raises NotCoordinator when this broker no longer
leads the partition); waiting for the replicas is the caller's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from tidelake import errors
from tidelake.coordinator.share_config import ShareGroupConfig
from tidelake.coordinator.share_partition import SharePartition, StateBatch
from tidelake.coordinator.share_state import (SHARE_STATE_TOPIC, ShareStateKey, replay, snapshot_record,
                                              state_partition, tombstone_key)

StateAppend = Callable[[int, list[tuple[bytes, bytes | None]]], None]  # state partition, (key, value)s


@dataclass(frozen=True)
class PersistedState:
    """A share-partition's persisted state: its start offset (the SPSO), state epoch and in-flight batches."""
    start_offset: int
    state_epoch: int
    batches: tuple[StateBatch, ...]


class ShareStateCoordinator:
    def __init__(self, config: ShareGroupConfig, write: StateAppend):
        self.config = config
        self.write = write
        self.states: dict[ShareStateKey, SharePartition] = {}
        # the newest leader epoch of each share-partition's partition heard in a read or write since this broker
        # loaded the state: a former leader's late write is fenced (FENCED_LEADER_EPOCH), as in Kafka
        self.leader_epochs: dict[ShareStateKey, int] = {}
        self.loaded: set[int] = set()  # the state partitions this broker leads (and so answers for)
        # the state epoch of each share-partition deleted since this broker loaded its state partition: the next
        # initialization is at a newer one (forgotten when the state partition moves; writes to the deleted state
        # stay fenced, as it has none)
        self.deleted_epochs: dict[ShareStateKey, int] = {}

    def partition_for(self, key: ShareStateKey) -> int:
        return state_partition(key, self.config.state_partitions)

    # -- leadership -------------------------------------------------------------------------------
    def load_partition(self, partition: int, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Become the coordinator of a state partition: replay its records (in log order); how many
        share-partitions it holds."""
        self.unload_partition(partition)
        restored = replay(records, self.config)
        for key, sp in restored.items():
            if self.partition_for(key) == partition:
                self.states[key] = sp
        self.loaded.add(partition)
        return len(restored)

    def unload_partition(self, partition: int) -> None:
        self.loaded.discard(partition)
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]
        for key in [k for k in self.leader_epochs if self.partition_for(k) == partition]:
            del self.leader_epochs[key]
        for key in [k for k in self.deleted_epochs if self.partition_for(k) == partition]:
            del self.deleted_epochs[key]

    def _check(self, key: ShareStateKey) -> int:
        partition = self.partition_for(key)
        if partition not in self.loaded:
            raise errors.NotCoordinator(f"this broker is not the share coordinator of {key.group_id}:"
                                        f"{key.topic_id}:{key.partition} ({SHARE_STATE_TOPIC}-{partition})")
        return partition

    # -- the state APIs ---------------------------------------------------------------------------
    def _fence(self, key: ShareStateKey, leader_epoch: int) -> None:
        """Remember the newest leader epoch (-1: none named); FencedLeaderEpoch for an older one."""
        held = self.leader_epochs.get(key, -1)
        if 0 <= leader_epoch < held:
            raise errors.FencedLeaderEpoch(f"leader epoch {leader_epoch} of {key.group_id}:{key.topic_id}:"
                                           f"{key.partition} is older than {held}: a former leader's")
        self.leader_epochs[key] = max(held, leader_epoch)

    def read(self, key: ShareStateKey, leader_epoch: int = -1) -> PersistedState | None:
        """The share-partition's state; None if it has none (never initialized, or deleted). A leader reading it
        with its epoch fences the writes of the leaders before it."""
        self._check(key)
        self._fence(key, leader_epoch)
        sp = self.states.get(key)
        if sp is None:
            return None
        return PersistedState(sp.start_offset, sp.state_epoch, tuple(sp.state_batches()))

    def last_state_epoch(self, key: ShareStateKey) -> int:
        """The state epoch of the share-partition's state, or of its state deleted last (-1: none known)."""
        held = self.states.get(key)
        return held.state_epoch if held is not None else self.deleted_epochs.get(key, -1)

    def initialize(self, key: ShareStateKey, start_offset: int, state_epoch: int) -> int:
        """Start the share-partition's state at ``start_offset`` with nothing in flight (a snapshot appended); the
        state partition written. Only at a newer state epoch than any held or deleted (FencedStateEpoch: another
        initialization came first)."""
        partition = self._check(key)
        newest = self.last_state_epoch(key)
        if state_epoch <= newest:
            raise errors.FencedStateEpoch(f"state epoch {state_epoch} of {key.group_id}:{key.topic_id}:"
                                          f"{key.partition} is not newer than {newest}")
        sp = SharePartition.restored(self.config, start_offset, state_epoch, ())
        self.write(partition, [snapshot_record(key, sp, -1)])
        self.states[key] = sp
        self.deleted_epochs.pop(key, None)
        return partition

    def write_state(self, key: ShareStateKey, state: PersistedState, leader_epoch: int) -> int:
        """Replace the share-partition's state (a snapshot appended); the state partition written. A share-partition
        without state (never initialized, or deleted) or an older state epoch than the one held is refused
        (FencedStateEpoch: the share-partition was reset since), and so is an older leader epoch than one heard
        (FencedLeaderEpoch)."""
        partition = self._check(key)
        self._fence(key, leader_epoch)
        held = self.states.get(key)
        if held is None:
            raise errors.FencedStateEpoch(f"{key.group_id}:{key.topic_id}:{key.partition} has no state (deleted, or "
                                          f"never initialized): state epoch {state.state_epoch} is not written")
        if state.state_epoch != held.state_epoch:
            raise errors.FencedStateEpoch(f"state epoch {state.state_epoch} of {key.group_id}:{key.topic_id}:"
                                          f"{key.partition} is not the current {held.state_epoch}")
        sp = SharePartition.restored(self.config, state.start_offset, state.state_epoch, state.batches)
        self.write(partition, [snapshot_record(key, sp, leader_epoch)])
        self.states[key] = sp
        return partition

    def delete_topic(self, topic_id) -> int:
        """A topic was deleted: forget every state of it held here (tombstones, which compaction drops in the end;
        a topic created again under the same name has another id and starts fresh); how many."""
        gone = [key for key in self.states if key.topic_id == topic_id]
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for key in gone:
            by_partition.setdefault(self.partition_for(key), []).append((tombstone_key(key), None))
        for partition, records in by_partition.items():
            self.write(partition, records)
            for key in [k for k in gone if self.partition_for(k) == partition]:
                del self.states[key]
                self.leader_epochs.pop(key, None)
        return len(gone)

    def delete_state(self, key: ShareStateKey) -> int:
        """Forget the share-partition's state (a tombstone); the state partition written."""
        partition = self._check(key)
        self.write(partition, [(tombstone_key(key), None)])
        held = self.states.pop(key, None)
        if held is not None:
            self.deleted_epochs[key] = held.state_epoch
        return partition
