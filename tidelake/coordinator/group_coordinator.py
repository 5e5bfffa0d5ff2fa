"""The group coordinator: every group of this broker (classic, KIP-848 and KIP-1071 streams groups), their
committed offsets, and the records written to __consumer_offsets. Still no network: ``write(partition, records)``
appends (key, value) records to a __consumer_offsets partition; ``partitions_of(topic)`` reads
topic metadata."""
from __future__ import annotations

import collections
import uuid
from typing import Callable, Mapping, Sequence

from tidelake import errors
from tidelake.coordinator.consumer_group import ConsumerGroup
from tidelake.coordinator.group import DEAD, EMPTY, NONE, ClassicGroup
from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.group_resource_configs import HEARTBEAT_INTERVAL, SESSION_TIMEOUT, consumer_group_value
from tidelake.coordinator.streams_group import StreamsGroup
from tidelake.coordinator.streams_group_records import changes, is_streams_record, key_of, rebuild
from tidelake.coordinator.streams_group_records import records as streams_group_records
from tidelake.coordinator.offsets import (ConsumerGroupRecords, OffsetStore, consumer_group_records,
                                          group_metadata_key, group_metadata_value, offset_commit_key,
                                          offset_records, partition_for)


_TOPIC_ID_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # uuid.NAMESPACE_URL


class GroupCoordinator:
    """``topic_id_of(name)`` / ``topic_name_of(id)`` map topics to the ids KIP-848 records carry
    (the broker's topic ids; without them, a name-derived uuid5 over ``list_topics``)."""

    def __init__(self, config: GroupConfig, *, write: Callable[[int, list], None],
                 partitions_of: Callable[[str], int | None], list_topics: Callable[[], list[str]] | None = None,
                 topic_id_of: Callable[[str], uuid.UUID | None] | None = None,
                 topic_name_of: Callable[[uuid.UUID], str | None] | None = None) -> None:
        self.config = config
        self.write = write
        self.partitions_of = partitions_of
        self.list_topics = list_topics
        self.topic_id_of = topic_id_of or (lambda name: uuid.uuid5(_TOPIC_ID_NAMESPACE, name))
        self.topic_name_of = topic_name_of or self._name_of_derived_id
        self.offsets = OffsetStore()  # committed offsets; the broker also applies transactional ones here
        self.groups: dict[str, ClassicGroup | ConsumerGroup | StreamsGroup] = {}
        self._next_retention_check_ms = 0
        # rebalances completed per group since this coordinator started (the broker's metrics read it)
        self.rebalances: collections.Counter[str] = collections.Counter()
        # the StreamsGroup* records of each streams group as written or replayed ({key: value}), what the next
        # write is the difference from
        self._streams_records: dict[str, dict[bytes, bytes]] = {}
        # each group's configs set on its GROUP resource (KIP-848's consumer.* ones apply here)
        self.group_configs: dict[str, dict[str, str]] = {}

    def set_group_configs(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """A group's GROUP-resource configs (validated by the caller): its KIP-848 session timeout applies at once (a
        member is fenced once it has not heartbeated for that long), its heartbeat interval from the next answer."""
        if overrides:
            self.group_configs[group_id] = dict(overrides)
        else:
            self.group_configs.pop(group_id, None)
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            g.session_timeout_ms = consumer_group_value(self.config, overrides, SESSION_TIMEOUT)
            g.heartbeat_interval_ms = consumer_group_value(self.config, overrides, HEARTBEAT_INTERVAL)

    def _rebalanced(self, group_id: str) -> None:
        self.rebalances[group_id] += 1

    def _new_classic(self, group_id: str, now_ms: int) -> ClassicGroup:
        return ClassicGroup(group_id, self.config, now_ms, self._persist, self._rebalanced)

    def _name_of_derived_id(self, topic_id: uuid.UUID) -> str | None:
        for name in (self.list_topics() if self.list_topics else ()):
            if uuid.uuid5(_TOPIC_ID_NAMESPACE, name) == topic_id:
                return name
        return None

    # ---- loading -----------------------------------------------------------------------------------
    def load(self, records, now_ms: int, partition: int | None = None) -> int:
        """Replay (key, value) records of __consumer_offsets (in log order); returns how many. With
        ``partition`` (a broker of a cluster taking over one partition's groups) only that partition's
        groups are rebuilt; the others keep their live state."""
        n = 0
        for key, value in records:
            if key is not None and is_streams_record(key):
                self._apply_streams_record(key, value)
                n += 1
                continue
            try:
                self.offsets.apply_record(key, value)
                n += 1
            except ValueError:
                continue  # a record type this coordinator does not know (share/streams groups, ...)
        for group_id, rec in self.offsets.groups.items():
            if partition is not None and self.partition_for(group_id) != partition:
                continue
            self.groups[group_id] = ClassicGroup.from_record(group_id, rec, self.config, now_ms, self._persist,
                                                             self._rebalanced)
        for group_id, crec in self.offsets.consumer_groups.items():
            if partition is not None and self.partition_for(group_id) != partition:
                continue
            if crec.epoch is None:
                continue  # member records without the group's own (should not happen): not a group
            classic = self.groups.get(group_id)
            if isinstance(classic, ClassicGroup) and classic.members and not crec.members:
                continue  # both kinds recorded (a conversion cut short): the one with members wins
            self.groups[group_id] = ConsumerGroup.from_records(
                group_id, crec, topic_name_of=self.topic_name_of, now_ms=now_ms,
                **self._consumer_group_settings(group_id))
        for group_id, recs in self._streams_records.items():
            if partition is not None and self.partition_for(group_id) != partition:
                continue
            streams = rebuild(group_id, recs, now_ms, **self._streams_group_settings())
            if streams is not None:
                self.groups[group_id] = streams
        return n

    def _apply_streams_record(self, key: bytes, value: bytes | None) -> None:
        group_id = key_of(key)[1]
        recs = self._streams_records.setdefault(group_id, {})
        if value is None:
            recs.pop(key, None)
            if not recs:
                del self._streams_records[group_id]
        else:
            recs[key] = value

    def unload_partition(self, partition: int) -> list[str]:
        """Forget the groups (and their offsets) of one __consumer_offsets partition: in a cluster,
        another broker now leads it and coordinates them. Returns their ids."""
        gone = sorted(g for g in self.known_group_ids() | set(self.groups) if self.partition_for(g) == partition)
        gone = sorted(set(gone) | {g for g in self._streams_records if self.partition_for(g) == partition})
        for group_id in gone:
            self.offsets.delete_group(group_id)
            self.groups.pop(group_id, None)
            self._streams_records.pop(group_id, None)
        return gone

    def _consumer_group_settings(self, group_id: str) -> dict:
        overrides = self.group_configs.get(group_id)
        return dict(session_timeout_ms=consumer_group_value(self.config, overrides, SESSION_TIMEOUT),
                    heartbeat_interval_ms=consumer_group_value(self.config, overrides, HEARTBEAT_INTERVAL),
                    assignors=self.config.consumer_assignors, partitions_of=self.partitions_of,
                    list_topics=self.list_topics, persist=self._persist_consumer, on_rebalance=self._rebalanced)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def _persist(self, g: ClassicGroup) -> None:
        rec = g.to_record()
        self.write(self.partition_for(g.group_id), [(group_metadata_key(g.group_id), group_metadata_value(rec))])
        self.offsets.groups[g.group_id] = rec

    def _persist_consumer(self, g) -> None:
        """Write the KIP-848 records that changed since the last ones (tombstones for what is gone)
        and apply them to the store, the same path a replay takes."""
        base = self.offsets.consumer_groups.get(g.group_id)
        new = g.to_records(self.topic_id_of, base=base)
        self._write_consumer_records(g.group_id, new, None if base is None or g.dead else g.touched_members())
        g.persisted()

    def _write_consumer_records(self, group_id: str, new, members=None) -> None:
        records = consumer_group_records(group_id, self.offsets.consumer_group_records(group_id), new, members)
        if records:
            self.write(self.partition_for(group_id), records)
            for key, value in records:
                self.offsets.apply_record(key, value)

    def _group_tombstones(self, group_id: str) -> list[tuple[bytes, None]]:
        """Tombstones for every record of a group: offsets, classic metadata, KIP-848 and KIP-1071 records (the
        caller writes them: the streams records are forgotten here)."""
        records = [(k, None) for k, _ in self._offset_keys(group_id)]
        records += consumer_group_records(group_id, self.offsets.consumer_group_records(group_id),
                                          ConsumerGroupRecords())
        records += changes(self._streams_records.pop(group_id, {}), {})
        records.append((group_metadata_key(group_id), None))
        return records

    # ---- lookup ------------------------------------------------------------------------------------
    def classic_group(self, group_id: str, *, create: bool, now_ms: int) -> ClassicGroup:
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            if not create:
                raise errors.UnknownMemberId(f"group {group_id} does not exist")
            g = self._new_classic(group_id, now_ms)
            self.groups[group_id] = g
        if isinstance(g, StreamsGroup):
            raise errors.InconsistentGroupProtocol(f"group {group_id} is a streams group")
        if not isinstance(g, ClassicGroup):
            if g.is_empty():  # an empty consumer group may be taken over by the classic protocol
                g.dead = True
                self._persist_consumer(g)  # its KIP-848 records are tombstoned
                g = self._new_classic(group_id, now_ms)
                self.groups[group_id] = g
            else:
                raise errors.InconsistentGroupProtocol(f"group {group_id} uses the consumer protocol")
        return g

    def consumer_group(self, group_id: str, *, create: bool):
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup) and not g.dead:
            return g
        if isinstance(g, StreamsGroup) and not g.dead:
            raise errors.GroupIdNotFound(f"Group {group_id} is not a consumer group.")
        if g is not None and isinstance(g, ClassicGroup) and not g.is_empty() and g.state != DEAD:
            raise errors.GroupIdNotFound(f"group {group_id} is a classic group with members")
        if not create:
            raise errors.UnknownMemberId(f"group {group_id} does not exist")
        if group_id in self.offsets.groups:  # an empty classic group becomes a consumer group
            self.write(self.partition_for(group_id), [(group_metadata_key(group_id), None)])
            self.offsets.apply_record(group_metadata_key(group_id), None)
        g = ConsumerGroup(group_id, **self._consumer_group_settings(group_id))
        self.groups[group_id] = g
        return g

    def streams_group(self, group_id: str, *, create: bool) -> StreamsGroup:
        """The KIP-1071 group ``group_id`` (``create``: a new one when there is none, or only an empty classic
        group: offsets committed without a group, e.g. reset by an admin before the application first ran)."""
        g = self.groups.get(group_id)
        if isinstance(g, StreamsGroup) and not g.dead:
            return g
        if g is not None and not (isinstance(g, ClassicGroup) and (g.is_empty() or g.state == DEAD)) and \
                not (isinstance(g, ConsumerGroup) and g.dead):
            raise errors.GroupIdNotFound(f"Group {group_id} is not a streams group.")
        if not create:
            raise errors.UnknownMemberId(f"group {group_id} does not exist")
        if group_id in self.offsets.groups:  # an empty classic group's record goes
            self.write(self.partition_for(group_id), [(group_metadata_key(group_id), None)])
            self.offsets.apply_record(group_metadata_key(group_id), None)
        g = StreamsGroup(group_id, **self._streams_group_settings())
        self.groups[group_id] = g
        return g

    def _streams_group_settings(self) -> dict:
        return dict(session_timeout_ms=self.config.streams_session_timeout_ms,
                    heartbeat_interval_ms=self.config.streams_heartbeat_interval_ms,
                    num_standby_replicas=self.config.streams_num_standby_replicas, partitions_of=self.partitions_of,
                    persist=self._persist_streams, on_rebalance=self._rebalanced)

    def _persist_streams(self, g: StreamsGroup) -> None:
        """Write the group's StreamsGroup* records that changed since the last ones (tombstones for what is gone)."""
        new = streams_group_records(g)
        written = changes(self._streams_records.get(g.group_id, {}), new)
        if written:
            self.write(self.partition_for(g.group_id), written)
        if new:
            self._streams_records[g.group_id] = new
        else:
            self._streams_records.pop(g.group_id, None)

    def known_group_ids(self) -> set[str]:
        live = {gid for gid, g in self.groups.items() if g.state != DEAD}
        return live | self.offsets.known_groups()

    def group_state(self, group_id: str) -> tuple[str, str, str]:
        """(state, protocol type, group type) as ListGroups shows them."""
        g = self.groups.get(group_id)
        if g is None:
            return EMPTY, "consumer" if self.offsets.has_offsets(group_id) else "", "classic"
        if isinstance(g, ClassicGroup):
            return g.state, g.protocol_type or "", "classic"
        return g.state, g.protocol_kind, g.protocol_kind

    # ---- offsets -----------------------------------------------------------------------------------
    def validate_commit(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                        now_ms: int) -> int:
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            if generation < 0:
                return NONE  # a standalone commit creates an empty group
            return errors.IllegalGeneration.code
        if isinstance(g, ClassicGroup):
            return g.validate_offset_commit(member_id, instance_id, generation)
        return g.validate_offset_commit(member_id, generation)

    def commit(self, group_id: str, commits: Sequence[tuple[str, int, object]], now_ms: int) -> None:
        """Write and apply OffsetCommit records (``commits``: (topic, partition, OffsetAndMetadata|None))."""
        records = list(offset_records(group_id, commits))
        if records:
            self.write(self.partition_for(group_id), records)
            for key, value in records:
                self.offsets.apply_record(key, value)
        if group_id not in self.groups:
            self.groups[group_id] = self._new_classic(group_id, now_ms)

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        g = self.groups.get(group_id)
        if g is None:
            return set()
        return g.subscribed_topics()

    def delete_group(self, group_id: str) -> int:
        g = self.groups.get(group_id)
        if g is None and group_id not in self.offsets.known_groups():
            return errors.GroupIdNotFound.code
        if g is not None and not g.is_empty():
            return errors.NonEmptyGroup.code
        self.write(self.partition_for(group_id), self._group_tombstones(group_id))
        self.offsets.delete_group(group_id)
        if isinstance(g, ClassicGroup):
            g.state = DEAD
        elif g is not None:
            g.dead = True
        self.groups.pop(group_id, None)
        return NONE

    def _offset_keys(self, group_id: str):
        for (topic, partition) in self.offsets.group_offsets(group_id):
            yield offset_commit_key(group_id, topic, partition), None

    # ---- time --------------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        for g in list(self.groups.values()):
            g.tick(now_ms)
        if now_ms >= self._next_retention_check_ms:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
            self.expire_offsets(now_ms)

    def expire_offsets(self, now_ms: int) -> int:
        """Kafka's offset retention: the offsets of a group without members expire
        ``offsets.retention.minutes`` after the later of their commit and the group becoming empty;
        a group left with no offsets and no members is then deleted. Returns how many expired."""
        expired_total = 0
        for group_id in sorted(self.offsets.known_groups()):
            g = self.groups.get(group_id)
            if g is not None and not g.is_empty():
                continue  # members are consuming: their offsets stay
            empty_since = g.state_timestamp_ms if isinstance(g, ClassicGroup) else -1
            expired = [(t, p, None) for (t, p), om in self.offsets.group_offsets(group_id).items()
                       if now_ms - max(om.commit_timestamp_ms, empty_since) > self.config.offsets_retention_ms]
            if not expired:
                continue
            self.commit(group_id, expired, now_ms)
            expired_total += len(expired)
            if not self.offsets.has_offsets(group_id):
                self.write(self.partition_for(group_id), self._group_tombstones(group_id))
                self.offsets.delete_group(group_id)
                if g is not None and not isinstance(g, ClassicGroup):
                    g.dead = True
                self.groups.pop(group_id, None)
        return expired_total
