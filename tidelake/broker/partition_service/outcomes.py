"""What a partition service answers: one partition's append or read, named field by field."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class AppendOutcome:
    """One partition's Produce result. ``error`` is a Kafka error code (0: appended); the offsets are -1
    when nothing was appended. ``appended`` is False for an error or a duplicate (idempotent retry)."""
    error: int
    base_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: list | None = None  # InvalidRecord: (batch index, message) per rejected record
    appended: bool = False


@dataclass(slots=True)
class PendingAcks:
    """An acks=all append waiting for the in-sync replicas: its partition and last offset."""
    topic: str
    partition: int
    last_offset: int


@dataclass(slots=True)
class ReadOutcome:
    """One partition's Fetch result: the records (a memoryview or bytes) and the log's bounds then.
    ``aborted`` is the read_committed aborted-transaction list (None for read_uncommitted);
    ``offsets_spanned`` counts the offsets the records cover (the messages-out metric)."""
    error: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = b""
    aborted: list | None = None
    offsets_spanned: int = 0



@dataclass(slots=True)
class DeleteOutcome:
    """One partition's DeleteRecords result: ``error`` (0: every live replica's log starts at or past the
    offset asked) and the low watermark, the smallest log start of the replicas (-1 when unknown)."""
    error: int
    low_watermark: int = -1


@dataclass(slots=True, frozen=True)
class ListedOffset:
    """One ListOffsets answer: the record's timestamp (-1 for the special ones), its offset (-1: none) and
    the leader epoch to answer with (-1 with no offset)."""
    timestamp: int
    offset: int
    leader_epoch: int = -1


@dataclass(slots=True)
class LogDirDescription:
    """DescribeLogDirs of this broker's one log directory: its path, the disk's total and free bytes, and
    the size of each partition hosted there (leader or follower), by topic."""
    path: str
    total_bytes: int
    usable_bytes: int
    sizes: dict[str, dict[int, int]]
