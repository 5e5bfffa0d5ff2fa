"""``PartitionService``: what the data-plane handlers ask of the partitions, the same on one broker
and in a cluster (Kafka's ``ReplicaManager``, Tansu's ``Storage``)."""
from __future__ import annotations

from typing import Iterable, Protocol, Sequence

from tidelake.broker.partition_service.outcomes import (AppendOutcome, DeleteOutcome, ListedOffset, LogDirDescription,
                                                        PendingAcks, ReadOutcome)
from tidelake.log.remote import OffsetAndEpoch, TimestampOffset
from tidelake.observability.broker_state import ReplicationState

# a Fetch's requested partition: (topic or None, topic id, partition, fetch offset, partition max bytes)
FetchPosition = tuple


class PartitionService(Protocol):
    def leader_epoch(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        """The leader epoch to serve (and stamp appends with) the partition at; raises
        NotLeaderOrFollower, FencedLeaderEpoch or UnknownLeaderEpoch where this broker may not."""

    def missing_log_code(self, topic: str | None, partition: int) -> int:
        """The error for a partition with no log here."""

    async def append(self, topic: str | None, partition: int, records, *, acks: int, now_ms: int,
                     transactional_id: str | None, add_to_transaction: bool = False) -> AppendOutcome:
        """A client's Produce to one partition: the leader, min.insync.replicas, transaction and
        schema checks, the append, the fetchers woken. Never raises: errors are the outcome's code.
        ``add_to_transaction``: a v2 transactional producer's (Produce v12+ with transaction.version 2),
        whose partition joins its transaction here (KIP-890 part 2) instead of being verified to be in it."""

    async def wait_for_acks(self, pending: Sequence[PendingAcks], timeout_ms: int) -> list[int]:
        """acks=all: one error code per pending append once its in-sync replicas have it (0) or not."""

    async def log_end_replicated(self, topic: str, partition: int, timeout_ms: int) -> int:
        """A coordinator's write: the error code once the in-sync replicas have the partition's whole log
        (0), or why not (NOT_LEADER_OR_FOLLOWER: leadership lost; a timeout's or too few replicas')."""

    def append_marker(self, topic: str, partition: int, *, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, now_ms: int, transaction_version: int = 0) -> AppendOutcome:
        """WriteTxnMarkers: a COMMIT/ABORT control batch at this broker's leader epoch, fetchers woken.
        Never raises: errors are the outcome's code (its offsets the marker's). ``transaction_version``:
        the marker's (WriteTxnMarkers v2), 2+ checking its epoch as KIP-1228 does."""

    def reads_as_follower(self, replica_id: int | None) -> bool:
        """A fetch from this replica id reads to the log end (a follower), not the high watermark."""

    def fetch_leadership(self, requested: Iterable[FetchPosition], epochs: dict[tuple[str | None, int], int],
                         replica_id: int | None, log_starts: dict[tuple[str | None, int], int] | None = None
                         ) -> dict[tuple[str, int], int]:
        """The partitions of a Fetch this broker may not serve, with their error (KIP-320 epochs
        checked); a follower's fetch offsets recorded (its log end, the leader's ISR/HW input) and the log
        start offsets it names (``log_starts``: the leader's low watermark input, DeleteRecords)."""

    async def delete_records(self, topic: str, partition: int, offset: int, timeout_ms: int) -> DeleteOutcome:
        """DeleteRecords of one partition, on its leader only (Kafka's ``deleteRecordsOnLeader``): the log start
        moved to ``offset`` (-1: the high watermark; past it OFFSET_OUT_OF_RANGE; a topic without
        cleanup.policy=delete POLICY_VIOLATION), then answered once every live replica's log starts there
        (DelayedDeleteRecords; REQUEST_TIMED_OUT after ``timeout_ms``). A follower answers
        NOT_LEADER_OR_FOLLOWER and changes nothing. Never raises."""

    def list_offset(self, topic: str, partition: int, timestamp: int, *, current_leader_epoch: int,
                    read_committed: bool, found_remotely: ListedOffset | None = None) -> ListedOffset:
        """ListOffsets of one partition, on its leader only (KIP-320 epoch checked): the special timestamps
        (-1 latest, -2 earliest, -3 max timestamp, -4 earliest local, -5 latest tiered, -6 earliest pending
        upload) or the first record at or after ``timestamp`` below the high watermark (the LSO for
        read_committed); ``found_remotely``: what the remote segments answered for it. Raises KafkaApiError."""

    def end_offset_for_epoch(self, topic: str, partition: int, leader_epoch: int, *,
                             current_leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch of one partition, on its leader only: (the largest epoch <= ``leader_epoch``
        known, the offset where it ended). Raises KafkaApiError."""

    def producers(self, topic: str, partition: int) -> list[dict]:
        """DescribeProducers of one partition: its active producers' states, on any replica (Kafka's
        ``activeProducerState``). Raises KafkaApiError."""

    def describe_log_dir(self, wanted: dict[str, set[int]] | None) -> LogDirDescription:
        """DescribeLogDirs: the partitions this broker hosts (``wanted``: only those; None: all) and the disk."""

    def read(self, topic: str | None, partition: int, fetch_offset: int, max_bytes: int, *, read_committed: bool,
             min_one: bool, follower: bool) -> ReadOutcome:
        """One partition's records from ``fetch_offset``: up to the high watermark (the LSO for
        read_committed, the log end for a follower). Never raises."""

    async def wait_for_data(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> None:
        """A Fetch long poll: until one of ``partitions`` changes or the timeout passes."""

    async def remote_offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> TimestampOffset | None:
        """ListOffsets by timestamp on a tiered log (KIP-405): the first record from the log start on with a
        timestamp >= ``timestamp`` in the remote segments below the local log start, looked up off the event
        loop; None when none holds one (the local segments answer). Raises KafkaStorageError (a failed GET)
        or RequestTimedOut (remote.list.offsets.request.timeout.ms)."""

    def latest_tiered_offset(self, topic: str, partition: int) -> OffsetAndEpoch:
        """ListOffsets -5 (KIP-1005): the highest offset copied to the object store and its leader epoch;
        (-1, -1) when nothing is (or the log is not tiered)."""

    def earliest_pending_upload_offset(self, topic: str, partition: int) -> OffsetAndEpoch:
        """ListOffsets -6 (KIP-1023): the first offset not copied to the object store yet and its leader epoch;
        (-1, -1) for a log not tiered (or whose copies this leader has not listed yet)."""

    def replication_state(self) -> ReplicationState | None:
        """The replication a scrape reports (under-replicated partitions led here, ISR changes, leaderships
        taken); None on one broker, which replicates nothing."""
