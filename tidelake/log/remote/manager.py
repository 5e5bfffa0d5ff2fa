"""RemoteLogManager: tiered storage's background work (KIP-405's RemoteLogManager), on its own thread
(a ``LogMaintenance``) every remote.log.manager.task.interval.ms, never on the broker's event loop.

For each log of a topic with remote.storage.enable=true that this broker leads, one pass:

1. finishes what a crash left in the object store (an orphaned copy, an interrupted deletion);
2. copies each closed segment below the last stable offset not copied yet: COPY_STARTED, the .log, its
   offset/time/transaction indexes, the producer snapshot at its end and the leader-epoch checkpoint up
   to it, then COPY_FINISHED (``metadata.py`` says why that order is crash-safe);
3. applies retention.ms / retention.bytes to the whole log (remote segments plus local ones not copied):
   the log start moves past the oldest remote segments first, then they are deleted;
4. applies local.retention.ms / local.retention.bytes to the local segments, deleting only copied ones.

With remote.log.copy.disable (KIP-950) steps 2 and 4 give way to retention.* on the local segments (deleted
uncopied, the log start moving): the store's segments stay readable until retention deletes them.

A follower copies nothing: a new leader lists the store (``RemotePartitionMetadata.load``) and continues
after the last COPY_FINISHED segment. Before its first step a leader claims the partition in the store at
its leader epoch, and before each step (a copy's start and finish, each deletion, a crash's cleaning) it
checks that it still leads and that no newer epoch claimed it: a former leader that has not learnt of
its successor stops (``FencedLeader``) instead of copying or deleting behind the new leader's back.
"""
from __future__ import annotations

import logging
import threading
import uuid
from typing import Callable

from tidelake.clock import wall_ms
from tidelake.log.maintenance import LogMaintenance
from tidelake.log.partition import PartitionLog
from tidelake.log.remote.metadata import (LEADER_EPOCH_FILE, LOG_FILE, NO_OFFSET, OFFSET_INDEX_FILE,
                                          PRODUCER_SNAPSHOT_FILE, TIME_INDEX_FILE, TXN_INDEX_FILE, OffsetAndEpoch,
                                          RemotePartitionMetadata, RemoteSegment)
from tidelake.log.remote.reader import RemoteLogReader
from tidelake.log.remote.settings import RemoteLogSettings
from tidelake.log.segment import Segment
from tidelake.storage import Storage

log = logging.getLogger(__name__)

LogsView = Callable[[], "dict[tuple[str, int], PartitionLog]"]
TopicIds = Callable[[str], "uuid.UUID | None"]  # a topic's id, None while this broker does not know it


def leader_epoch_checkpoint(entries: list[tuple[int, int]], end_offset: int) -> bytes:
    """The leader-epoch checkpoint (Kafka's text format) of the epochs starting at or below ``end_offset``."""
    kept = [(e, o) for e, o in entries if o <= end_offset]
    return ("0\n%d\n%s" % (len(kept), "".join(f"{e} {o}\n" for e, o in kept))).encode()


class FencedLeader(RuntimeError):
    """This broker no longer leads the partition (or a newer leader epoch claimed it in the store)."""


class RemoteLogManager:
    def __init__(self, storage: Storage, settings: RemoteLogSettings, *, clock_ms: Callable[[], int] = wall_ms):
        self.storage = storage
        self.settings = settings
        self.leads: Callable[[str, int], bool] = _single_broker_leads
        self.clock_ms = clock_ms
        self._partitions: dict[tuple[str, int], RemotePartitionMetadata] = {}
        self._lock = threading.Lock()
        self._logs: LogsView = dict
        self._thread: LogMaintenance | None = None
        self._topic_ids: TopicIds = _unknown_topic
        self._doomed: list[RemotePartitionMetadata] = []  # partitions of deleted topics: their files go next pass
        self.reader = RemoteLogReader(storage, settings, self.metadata)
        self._leading: set[tuple[str, int]] = set()  # partitions this broker copied at its last pass
        self._claimed: dict[tuple[str, int], int] = {}  # the leader epoch this broker claimed each one in

    # ------------------------------------------------------------------ lifecycle
    def start(self, logs: LogsView, topic_ids: TopicIds, leads: Callable[[str, int], bool] | None = None) -> None:
        """Learn every tiered log's remote segments now (so reads below the local log start are served
        from the first request on), then run passes on the thread. ``topic_ids``: each topic's id (its
        remote folder's key; a partition of a topic not known yet waits); ``leads``: whether this broker
        leads a partition (in a cluster only the leader copies; None: a single broker, which leads every one)."""
        self._logs = logs
        self._topic_ids = topic_ids
        self.leads = leads or _single_broker_leads
        for (topic, partition), plog in logs().items():
            if plog.config.remote_storage_enable:
                self._attach(topic, partition, plog)
            elif plog.config.remote_log_delete_on_disable:   # turned off: a pass deletes what may be left remotely
                self._remember_turned_off(topic, partition)
        if self._thread is None:
            self._thread = LogMaintenance(self.run_pass, self.settings.task_interval_ms / 1000,
                                          name="remote-log-manager")
            self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()
            thread.join()
        self.reader.close()

    def trigger(self) -> None:
        if self._thread is not None:
            self._thread.trigger()

    # ------------------------------------------------------------------ metadata
    def metadata(self, topic: str, partition: int) -> RemotePartitionMetadata | None:
        """The partition's remote segments, None if they were not listed yet (its topic's id was not known
        at start, as in a cluster before the controller announced it: a pass is woken to list them)."""
        meta = self._partitions.get((topic, partition))
        if meta is None:
            self.trigger()
        return meta

    def highest_offset(self, topic: str, partition: int) -> OffsetAndEpoch:
        """The highest offset copied to the store and its leader epoch (ListOffsets -5, KIP-1005); NO_OFFSET
        with nothing copied (or not listed yet)."""
        meta = self._partitions.get((topic, partition))
        return meta.highest_offset if meta is not None else NO_OFFSET

    def _attach(self, topic: str, partition: int, plog: PartitionLog) -> RemotePartitionMetadata | None:
        """The partition's remote segments, listed from the store the first time; None while its topic's
        id is unknown. A topic created again under the same name (a new id) starts over from its own folder."""
        key = (topic, partition)
        meta = self._partitions.get(key)
        if meta is None or meta.topic_id != self._topic_ids(topic):
            meta = self._new_metadata(topic, partition)
            if meta is None:
                return None
            meta.load()
            if meta.start_offset is not None:
                plog.extend_log_start_to_remote(meta.start_offset, meta.end_offset)
            with self._lock:
                self._partitions[key] = meta
        return meta

    def _new_metadata(self, topic: str, partition: int) -> RemotePartitionMetadata | None:
        topic_id = self._topic_ids(topic)
        return None if topic_id is None else RemotePartitionMetadata(self.storage, topic, partition, topic_id)

    def partition_deleted(self, topic: str, partition: int) -> None:
        """Its topic was deleted: the remote files go at the next pass (off the caller's thread)."""
        with self._lock:
            meta = self._partitions.pop((topic, partition), None) or self._new_metadata(topic, partition)
            if meta is not None:
                self._doomed.append(meta)
        self.trigger()

    # ------------------------------------------------------------------ the pass
    def run_pass(self, now_ms: int | None = None) -> None:
        now = self.clock_ms() if now_ms is None else now_ms
        with self._lock:
            doomed, self._doomed = self._doomed, []
        for meta in doomed:
            meta.delete_all()
        for (topic, partition), plog in self._logs().items():
            if plog.closed:
                continue
            if not plog.config.remote_storage_enable:
                if (topic, partition) in self._partitions:   # tiered until now
                    self._turn_off(topic, partition, plog)
                continue
            try:
                if self.leads(topic, partition):
                    if (topic, partition) not in self._leading:   # just became leader: the store says where to go on
                        self._partitions.pop((topic, partition), None)
                        self._leading.add((topic, partition))
                    self.maintain(topic, partition, plog, now)
                else:
                    self._leading.discard((topic, partition))
                    self._claimed.pop((topic, partition), None)
                    self.follow(topic, partition, plog, now)
            except Exception as e:
                if not plog.closed:
                    log.warning("tiered storage of %s-%d: %s", topic, partition, e)

    def _remember_turned_off(self, topic: str, partition: int) -> None:
        meta = self._new_metadata(topic, partition)
        if meta is not None:
            with self._lock:
                self._partitions[(topic, partition)] = meta

    def _turn_off(self, topic: str, partition: int, plog: PartitionLog) -> None:
        """remote.storage.enable turned off (KIP-950: refused unless remote.log.delete.on.disable=true): the log
        starts at its local start at once (nothing reads the store any more), and the leader deletes the remote
        part."""
        key = (topic, partition)
        try:
            plog.advance_log_start(plog.local_log_start_offset)
            if self.leads(topic, partition) and plog.config.remote_log_delete_on_disable:
                meta = self._partitions[key]
                meta.load()
                self._fence(meta, plog.leader_epoch_cache.latest_epoch)
                meta.delete_all()
                log.info("tiered storage turned off for %s-%d: its remote segments deleted, log start offset now %d",
                         topic, partition, plog.log_start_offset)
        finally:
            with self._lock:
                self._partitions.pop(key, None)
            self._leading.discard(key)
            self._claimed.pop(key, None)

    def maintain(self, topic: str, partition: int, plog: PartitionLog, now_ms: int) -> None:
        meta = self._attach(topic, partition, plog)
        if meta is None:   # its topic's id not known here yet: next pass
            return
        epoch = plog.leader_epoch_cache.latest_epoch
        if self._claimed.get((topic, partition)) != epoch:
            self._fence(meta, epoch)   # never claim over a newer leader
            meta.claim_leadership(epoch)
            self._claimed[(topic, partition)] = epoch
        if meta.unfinished:
            self._fence(meta, epoch)
            cleaned = meta.clean_unfinished()
            log.info("tiered storage of %s-%d: %d unfinished copy or deletion cleaned", topic, partition, cleaned)
        if plog.config.remote_log_copy_disable:
            self._retain_without_copying(meta, plog, now_ms, epoch)
            return
        deleted = 0
        for seg in plog.segments_to_copy(meta.end_offset):
            if plog.closed:
                return
            self.copy_segment(meta, plog, seg, epoch)
            # at once, not after the whole backlog: the local disk stays near local.retention.bytes
            deleted += plog.apply_local_retention(now_ms, meta.end_offset)
        self._apply_retention(meta, plog, now_ms, epoch)
        deleted += plog.apply_local_retention(now_ms, meta.end_offset)
        if deleted:
            log.info("local retention deleted %d copied segment(s) of %s-%d; local log start offset now %d",
                     deleted, topic, partition, plog.local_log_start_offset)

    def _retain_without_copying(self, meta: RemotePartitionMetadata, plog: PartitionLog, now_ms: int,
                                epoch: int) -> None:
        """remote.log.copy.disable (KIP-950): nothing copied; the local segments follow retention.*, deleted
        uncopied with the log start moving past them, then the remote ones below it and past retention.*
        go (Kafka's local retention then falls back to retention.*, and its expiration task goes on)."""
        deleted = plog.apply_retention(now_ms)
        self._apply_retention(meta, plog, now_ms, epoch)
        if deleted:
            log.info("retention deleted %d local segment(s) of %s (remote copy disabled); log start offset now %d",
                     deleted, meta.prefix, plog.log_start_offset)

    def follow(self, topic: str, partition: int, plog: PartitionLog, now_ms: int) -> None:
        """A follower copies nothing: it lists what the leader copied and applies local retention to it
        (retention.* itself with remote.log.copy.disable, as the leader does)."""
        meta = self._partitions.get((topic, partition))
        if meta is None or meta.topic_id != self._topic_ids(topic):
            meta = self._new_metadata(topic, partition)
            if meta is None:
                return
            with self._lock:
                self._partitions[(topic, partition)] = meta
        meta.load_new(plog.log_start_offset)
        if plog.config.remote_log_copy_disable:
            plog.apply_retention(now_ms)
        else:
            plog.apply_local_retention(now_ms, meta.end_offset)

    def _fence(self, meta: RemotePartitionMetadata, epoch: int) -> None:
        """Before a remote step: this broker still leads the partition and no newer epoch claimed it."""
        if not self.leads(meta.topic, meta.partition):
            raise FencedLeader(f"{meta.prefix}: no longer the leader, its remote steps stop")
        newest = meta.newest_leader_epoch()
        if newest > epoch:
            raise FencedLeader(f"{meta.prefix}: leader epoch {newest} took over from {epoch}, its remote steps stop")

    def copy_segment(self, meta: RemotePartitionMetadata, plog: PartitionLog, seg: Segment,
                     epoch: int) -> RemoteSegment:
        """Copy one closed segment (and what recovers a log from it) as ``metadata.py`` orders it, as the
        leader of ``epoch``."""
        self._fence(meta, epoch)
        end = seg.next_offset - 1
        snapshot = plog.producer_state.snapshot_path(seg.next_offset)
        txns = _read_or_empty(seg.txn_index.path)
        remote = RemoteSegment.new(meta.prefix, seg.base_offset, end, seg.size, seg.max_timestamp,
                                   [e for e in plog.leader_epoch_cache.entries if e[1] <= end], self.clock_ms(),
                                   len(txns))
        meta.copy_started(remote)
        self.storage.write_file(remote.path(LOG_FILE), str(seg.log_path))   # closed: its size is final
        self.storage.write(remote.path(OFFSET_INDEX_FILE), seg.offset_index.to_bytes())
        self.storage.write(remote.path(TIME_INDEX_FILE), seg.time_index.to_bytes())
        self.storage.write(remote.path(TXN_INDEX_FILE), txns)
        self.storage.write(remote.path(PRODUCER_SNAPSHOT_FILE), _read_or_empty(snapshot))
        self.storage.write(remote.path(LEADER_EPOCH_FILE),
                           leader_epoch_checkpoint(plog.leader_epoch_cache.entries, end))
        # a leader replaced meanwhile may have cleaned this copy as an orphan: then it is not finished here
        try:
            self._fence(meta, epoch)
            if not self.storage.exists(remote.path("COPY_STARTED")):
                raise FencedLeader(f"copy of {remote.folder} abandoned: a newer leader cleaned it")
        except FencedLeader:
            meta.delete_folder(remote.folder)
            raise
        meta.copy_finished(remote)
        return remote

    def _apply_retention(self, meta: RemotePartitionMetadata, plog: PartitionLog, now_ms: int, epoch: int) -> None:
        """retention.ms / retention.bytes over the whole log, and DeleteRecords' log start: the oldest
        remote segments out of reach first (the log start moves), then deleted."""
        cfg = plog.config
        doomed: list[RemoteSegment] = []
        remote = list(meta.segments)
        for seg in remote:
            if seg.end_offset < plog.log_start_offset:
                doomed.append(seg)
            elif cfg.retention_ms >= 0 and now_ms - (seg.max_timestamp if seg.max_timestamp >= 0
                                                      else seg.copied_ms) > cfg.retention_ms:
                doomed.append(seg)
            else:
                break
        if cfg.retention_bytes >= 0:
            local_only = sum(s.size for s in plog.segments if s.base_offset > meta.end_offset - 1)
            excess = sum(s.size for s in remote[len(doomed):]) + local_only - cfg.retention_bytes
            for seg in remote[len(doomed):]:
                if excess - seg.size < 0:
                    break
                excess -= seg.size
                doomed.append(seg)
        if not doomed:
            return
        following = meta.next_segment(doomed[-1]) if doomed[-1] is not remote[-1] else None
        new_start = following.base_offset if following is not None else doomed[-1].end_offset + 1
        self._fence(meta, epoch)
        plog.advance_log_start(new_start)
        for seg in doomed:
            self._fence(meta, epoch)
            meta.delete(seg)
        log.info("retention deleted %d remote segment(s) of %s; log start offset now %d", len(doomed),
                 meta.prefix, plog.log_start_offset)


def _single_broker_leads(_topic: str, _partition: int) -> bool:
    return True


def _unknown_topic(_topic: str) -> None:
    """Before ``start``: no topic id known, no partition attached."""
    return None


def _read_or_empty(path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return b""
