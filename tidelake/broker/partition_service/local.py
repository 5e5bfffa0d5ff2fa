"""``LocalPartitions``: the partition service of a single broker. It always leads, an ISR is itself,
and an acknowledged append is acknowledged by every replica there is."""
from __future__ import annotations

import asyncio
import logging
import shutil
from typing import Callable, Iterable, Sequence

from tidelake import errors
from tidelake.broker.partition_service.outcomes import (AppendOutcome, DeleteOutcome, ListedOffset, LogDirDescription,
                                                        PendingAcks, ReadOutcome)
from tidelake.broker.partition_service.protocol import FetchPosition
from tidelake.broker.partitions import Partitions
from tidelake.broker.schema_validation import SchemaValidator
from tidelake.broker.topics import TopicManager
from tidelake.coordinator.transactions import TransactionCoordinator
from tidelake.errors import error_code
from tidelake.log import LogManager, PartitionLog
from tidelake.log.remote import NO_OFFSET, OffsetAndEpoch, TimestampOffset
from tidelake.protocol.records import parse_header
from tidelake.observability.broker_state import ReplicationState

log = logging.getLogger("tidelake.broker.api")

NONE = errors.NONE
UNKNOWN_SERVER_ERROR = errors.UnknownServerError.code
KAFKA_STORAGE_ERROR = errors.KafkaStorageError.code
INVALID_REQUIRED_ACKS = errors.InvalidRequiredAcks.code
NOT_LEADER_OR_FOLLOWER = errors.NotLeaderOrFollower.code
NOT_LED: dict[tuple[str, int], int] = {}  # a single broker leads every partition it has (never written)
HIGH_WATERMARK = -1  # DeleteRecords' offset meaning "up to the high watermark"
# ListOffsets' special timestamps
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
NOT_FOUND = ListedOffset(-1, -1)


class LocalPartitions:
    def __init__(self, logs: LogManager, partitions: Partitions, topics: TopicManager,
                 transactions: TransactionCoordinator, schemas: SchemaValidator | None):
        self.logs = logs
        self.partitions = partitions
        self.topics = topics
        self.transactions = transactions
        self.schemas = schemas  # None: no schema registry configured, nothing to check

    # -- what differs in a cluster -------------------------------------------------------------------
    def leader_epoch(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        return 0

    def missing_log_code(self, topic: str | None, partition: int) -> int:
        return errors.UnknownTopicOrPartition.code

    def _isr_shortfall(self, topic: str, partition: int) -> str | None:
        """Why acks=all cannot be satisfied now (Kafka rejects before appending), or None."""
        if self.topics.min_insync_replicas(topic) > 1:
            return "min.insync.replicas exceeds the in-sync replicas (1)"
        return None

    async def _verify_transaction(self, transactional_id: str, topic: str, partition: int, producer_id: int,
                                  producer_epoch: int, plog: PartitionLog, add: bool) -> None:
        """KIP-890 part 1: a transactional batch is accepted only for a partition in its producer's open
        transaction (Kafka 3.9 answers INVALID_TXN_STATE); part 2 (``add``, a v2 producer): the partition
        joins the transaction. Here the coordinator is this broker."""
        if add:
            self.transactions.add_produce_partition(transactional_id, producer_id, producer_epoch, (topic, partition))
        else:
            self.transactions.verify_produce(transactional_id, producer_id, producer_epoch, (topic, partition))

    def _appended(self, topic: str, partition: int, plog: PartitionLog) -> None:
        """After a leader append (the replicated service moves the high watermark)."""

    async def wait_for_acks(self, pending: Sequence[PendingAcks], timeout_ms: int) -> list[int]:
        return [NONE] * len(pending)

    async def log_end_replicated(self, topic: str, partition: int, timeout_ms: int) -> int:
        return NONE

    def reads_as_follower(self, replica_id: int | None) -> bool:
        return False

    def fetch_leadership(self, requested: Iterable[FetchPosition], epochs: dict[tuple[str | None, int], int],
                         replica_id: int | None, log_starts: dict[tuple[str | None, int], int] | None = None
                         ) -> dict[tuple[str, int], int]:
        return NOT_LED

    async def _low_watermark_reached(self, topic: str, partition: int, offset: int, plog: PartitionLog,
                                     timeout_ms: int) -> DeleteOutcome:
        """After the leader's delete: its own log start is every replica's."""
        return DeleteOutcome(NONE, plog.log_start_offset)

    # -- the same everywhere -------------------------------------------------------------------------
    async def append(self, topic: str | None, partition: int, records, *, acks: int, now_ms: int,
                     transactional_id: str | None, add_to_transaction: bool = False) -> AppendOutcome:
        if acks not in (0, 1, -1):
            return AppendOutcome(INVALID_REQUIRED_ACKS)
        plog = self.logs.get(topic, partition) if topic is not None else None
        if plog is None:
            return AppendOutcome(self.missing_log_code(topic, partition))
        info = self.topics.get(topic)
        if info is not None and info.internal:
            # only the coordinators write __consumer_offsets / __transaction_state (Kafka's rule)
            return AppendOutcome(errors.InvalidTopic.code, message=f"cannot produce to internal topic {topic}")
        try:
            leader_epoch = self.leader_epoch(topic, partition)
        except errors.KafkaApiError as e:
            return AppendOutcome(e.code)
        if acks == -1:
            shortfall = self._isr_shortfall(topic, partition)
            if shortfall is not None:
                return AppendOutcome(errors.NotEnoughReplicas.code, log_start_offset=plog.log_start_offset,
                                     message=shortfall)
        try:
            if records is None or not len(records):
                raise errors.InvalidRequest("produce request without records")
            if transactional_id is not None:
                h = parse_header(records, 0)
                if h.is_transactional:
                    await self._verify_transaction(transactional_id, topic, partition, h.producer_id,
                                                   h.producer_epoch, plog, add_to_transaction)
            if self.schemas is not None and info is not None:
                await self.schemas.check(topic, partition, records, info.configs)
            result = plog.append(records, now_ms=now_ms, leader_epoch=leader_epoch)
        except errors.InvalidRecord as e:
            return AppendOutcome(e.code, log_start_offset=plog.log_start_offset, message=str(e),
                                 record_errors=e.record_errors)
        except Exception as e:
            code = error_code(e)
            if code == UNKNOWN_SERVER_ERROR:
                log.exception("append to %s-%d failed", topic, partition)
            elif code == KAFKA_STORAGE_ERROR:  # the reason is the OS's: no trace to add
                log.error("append to %s-%d failed: KAFKA_STORAGE_ERROR: %s", topic, partition, e)
            return AppendOutcome(code, log_start_offset=plog.log_start_offset, message=str(e))
        if not result.duplicate:
            self.partitions.notify(topic, partition)
        self._appended(topic, partition, plog)
        return AppendOutcome(NONE, result.base_offset, result.last_offset, result.log_append_time_ms,
                             result.log_start_offset, appended=not result.duplicate)

    def append_marker(self, topic: str, partition: int, *, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, now_ms: int, transaction_version: int = 0) -> AppendOutcome:
        plog = self.logs.get(topic, partition)
        if plog is None:
            return AppendOutcome(self.missing_log_code(topic, partition))
        try:
            offset = plog.append_marker(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                        coordinator_epoch=coordinator_epoch, now_ms=now_ms,
                                        leader_epoch=self.leader_epoch(topic, partition),
                                        transaction_version=transaction_version)
        except Exception as e:
            code = error_code(e)
            if code == UNKNOWN_SERVER_ERROR:
                log.exception("marker for producer %d in %s-%d failed", producer_id, topic, partition)
            return AppendOutcome(code)
        self.partitions.notify(topic, partition)  # the LSO moved
        self._appended(topic, partition, plog)
        return AppendOutcome(NONE, offset, offset, -1, plog.log_start_offset, appended=True)

    def _hosted(self, topic: str, partition: int) -> PartitionLog:
        plog = self.logs.get(topic, partition)
        if plog is None:
            missing = (errors.NotLeaderOrFollower if self.missing_log_code(topic, partition) == NOT_LEADER_OR_FOLLOWER
                       else errors.UnknownTopicOrPartition)
            raise missing(f"{topic}-{partition} is not hosted by this broker")
        return plog

    def _led(self, topic: str, partition: int, current_leader_epoch: int = -1) -> tuple[PartitionLog, int]:
        """The partition's log and the epoch it is led at here; raises what a replica that may not answer says."""
        plog = self._hosted(topic, partition)
        return plog, self.leader_epoch(topic, partition, current_leader_epoch)

    async def delete_records(self, topic: str, partition: int, offset: int, timeout_ms: int) -> DeleteOutcome:
        try:
            plog, _epoch = self._led(topic, partition)
            if not plog.config.delete:
                raise errors.PolicyViolation(f"records of {topic}-{partition} can not be deleted: its cleanup.policy "
                                             f"has no 'delete'")
            wanted = plog.high_watermark if offset == HIGH_WATERMARK else offset
            if wanted < 0 or wanted > plog.high_watermark:
                raise errors.OffsetOutOfRange(f"{topic}-{partition}: offset {offset} beyond the high watermark "
                                              f"{plog.high_watermark}")
            plog.delete_records_before(wanted)
        except Exception as e:
            code = error_code(e)
            if code == UNKNOWN_SERVER_ERROR:
                log.exception("DeleteRecords of %s-%d failed", topic, partition)
            return DeleteOutcome(code)
        self.partitions.notify(topic, partition)  # long polls see the new log start
        return await self._low_watermark_reached(topic, partition, wanted, plog, timeout_ms)

    def list_offset(self, topic: str, partition: int, timestamp: int, *, current_leader_epoch: int,
                    read_committed: bool, found_remotely: ListedOffset | None = None) -> ListedOffset:
        plog, epoch = self._led(topic, partition, current_leader_epoch)
        listed = self._listed(topic, partition, plog, timestamp, read_committed, found_remotely)
        if listed.offset < 0:
            return NOT_FOUND
        return listed if listed.leader_epoch >= 0 else ListedOffset(listed.timestamp, listed.offset, epoch)

    def _listed(self, topic: str, partition: int, plog: PartitionLog, ts: int, read_committed: bool,
                found_remotely: ListedOffset | None) -> ListedOffset:
        upper = plog.last_stable_offset if read_committed else plog.high_watermark
        if ts == LATEST:
            return ListedOffset(-1, upper)
        if ts == EARLIEST:
            return ListedOffset(-1, plog.log_start_offset)
        if ts == EARLIEST_LOCAL:  # tiered storage (KIP-405): the first offset on this broker's disk
            return ListedOffset(-1, plog.local_log_start_offset)
        if ts == LATEST_TIERED:  # KIP-1005: the highest offset copied to the object store, -1 with none
            tiered = self.latest_tiered_offset(topic, partition)
            return ListedOffset(-1, tiered.offset, tiered.leader_epoch)
        if ts == EARLIEST_PENDING_UPLOAD:  # KIP-1023: the first offset not copied yet, -1 for a log not tiered
            pending = self.earliest_pending_upload_offset(topic, partition)
            return ListedOffset(-1, pending.offset, pending.leader_epoch)
        if ts == MAX_TIMESTAMP:  # the local segments', as Kafka's
            found = plog.max_timestamp()
            if found is None:
                return NOT_FOUND
            offset, max_ts = found
            return ListedOffset(max_ts, offset)
        if ts < 0:
            raise errors.InvalidRequest(f"unknown ListOffsets timestamp {ts}")
        if found_remotely is not None:
            return found_remotely
        found = plog.offset_for_timestamp(ts)
        if found is None or found[0] >= upper:
            return NOT_FOUND
        offset, found_ts = found
        return ListedOffset(found_ts, offset)

    def end_offset_for_epoch(self, topic: str, partition: int, leader_epoch: int, *,
                             current_leader_epoch: int) -> tuple[int, int]:
        plog, _epoch = self._led(topic, partition, current_leader_epoch)
        # Kafka's answers (newer/older/truncated epochs) live in the cache itself
        return plog.leader_epoch_cache.end_offset_for(leader_epoch, plog.log_end_offset)

    def producers(self, topic: str, partition: int) -> list[dict]:
        return self._hosted(topic, partition).producer_state.describe()

    def describe_log_dir(self, wanted: dict[str, set[int]] | None) -> LogDirDescription:
        sizes: dict[str, dict[int, int]] = {}
        for (topic, partition), plog in sorted(self.logs.all_logs().items()):
            if wanted is None or partition in wanted.get(topic, ()):
                sizes.setdefault(topic, {})[partition] = plog.size_bytes
        usage = shutil.disk_usage(self.logs.data_dir)
        return LogDirDescription(str(self.logs.data_dir.resolve()), usage.total, usage.free, sizes)

    def read(self, topic: str | None, partition: int, fetch_offset: int, max_bytes: int, *, read_committed: bool,
             min_one: bool, follower: bool) -> ReadOutcome:
        plog = self.logs.get(topic, partition) if topic is not None else None
        if plog is None:
            return ReadOutcome(self.missing_log_code(topic, partition))
        try:
            hw = plog.high_watermark
            lso = plog.last_stable_offset
            if max_bytes <= 0:  # the request's byte budget is spent: the partition's bounds only
                return ReadOutcome(NONE, hw, lso, plog.log_start_offset, b"", [] if read_committed else None)
            max_offset = plog.log_end_offset if follower else lso if read_committed else hw
            if plog.log_start_offset <= fetch_offset < plog.local_log_start_offset and self.logs.tiered(plog):
                return self._read_remote(topic, partition, plog, fetch_offset, max_bytes, max_offset,
                                         read_committed=read_committed, min_one=min_one)
            if fetch_offset > plog.log_end_offset or fetch_offset < plog.log_start_offset:
                raise errors.OffsetOutOfRange(
                    f"offset {fetch_offset} not in [{plog.log_start_offset}, {plog.log_end_offset}]")
            if fetch_offset >= max_offset:
                return ReadOutcome(NONE, hw, lso, plog.log_start_offset, b"", [] if read_committed else None)
            rr = plog.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
            data = rr.data
            aborted = None
            if read_committed:
                aborted = plog.aborted_transactions(fetch_offset, max_offset) if data else []
            return ReadOutcome(NONE, rr.high_watermark, rr.last_stable_offset, rr.log_start_offset, data, aborted,
                               rr.next_offset - rr.first_offset)
        except errors.KafkaApiError as e:
            return ReadOutcome(e.code, plog.high_watermark, plog.last_stable_offset, plog.log_start_offset)

    def _read_remote(self, topic: str, partition: int, plog: PartitionLog, fetch_offset: int, max_bytes: int,
                     max_offset: int, *, read_committed: bool, min_one: bool) -> ReadOutcome:
        """Below the local log start of a tiered log: the object store's bytes if the reader has them;
        else nothing yet, and the Fetch waiting as a long poll is woken once they are fetched."""
        got = self.logs.remote.reader.read(topic, partition, fetch_offset, max_bytes, max_offset, min_one=min_one,
                                           read_committed=read_committed, on_ready=self._waker(topic, partition))
        hw, lso, start = plog.high_watermark, plog.last_stable_offset, plog.log_start_offset
        if got is None:
            return ReadOutcome(NONE, hw, lso, start, b"", [] if read_committed else None)
        return ReadOutcome(NONE, hw, lso, start, got.data, got.aborted, got.next_offset - got.first_offset)

    def _waker(self, topic: str, partition: int) -> Callable[[], None]:
        """A callback for the remote reader's threads: wake this partition's fetches on the event loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # read outside a loop (a tool, a test): nobody waits
            return _nobody
        notify = self.partitions.notify

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(notify, topic, partition)
            except RuntimeError:  # the broker stopped meanwhile
                pass
        return wake

    async def wait_for_data(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> None:
        await self.partitions.wait_for_data(partitions, timeout_s)

    async def remote_offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> TimestampOffset | None:
        plog = self.logs.get(topic, partition)
        if plog is None or not self.logs.tiered(plog):
            return None
        remote = self.logs.remote
        found = remote.reader.offset_for_timestamp(topic, partition, timestamp, plog.log_start_offset,
                                                   plog.local_log_start_offset)
        if found is None:
            return None
        timeout_s = remote.settings.list_offsets_timeout_ms / 1000
        try:
            return await asyncio.wait_for(asyncio.wrap_future(found), timeout_s)
        except asyncio.TimeoutError:
            raise errors.RequestTimedOut(f"ListOffsets of {topic}-{partition}: the remote segments did not answer "
                                         f"within {timeout_s:g} s") from None

    def latest_tiered_offset(self, topic: str, partition: int) -> OffsetAndEpoch:
        plog = self.logs.get(topic, partition)
        if plog is None or not self.logs.tiered(plog):
            return NO_OFFSET
        return self.logs.remote.highest_offset(topic, partition)

    def earliest_pending_upload_offset(self, topic: str, partition: int) -> OffsetAndEpoch:
        plog = self.logs.get(topic, partition)
        if plog is None or not self.logs.tiered(plog):
            return NO_OFFSET
        highest = self.logs.remote.highest_offset(topic, partition)
        if highest.offset >= 0:
            pending = max(highest.offset + 1, plog.log_start_offset)
        elif plog.local_log_start_offset == plog.log_start_offset:   # nothing copied yet: all of it
            pending = plog.log_start_offset
        else:   # copies this leader has not listed yet
            return NO_OFFSET
        return OffsetAndEpoch(pending, plog.leader_epoch_cache.epoch_for_offset(pending))

    def replication_state(self) -> ReplicationState | None:
        return None

def _nobody() -> None:
    """No fetch waits for this read."""
