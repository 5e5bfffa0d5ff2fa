"""Remote-log metadata (KIP-405's RemoteLogSegmentMetadata and its states), kept in the object store
beside the segments rather than in a ``__remote_log_metadata`` topic.

Why the store itself: the segments and their state then share one durable home, readable by every
broker (a new leader lists it and continues), with no topic of its own to replicate, and the state
transitions are single-object writes whose order the store keeps. A segment is a folder
``<topic>-<partition>-<topic id>/<20-digit base offset>-<segment id>/`` holding its files and its state markers
(the topic id, as Kafka keys remote data: a topic deleted and created again under the same name never reads
the old one's segments, whatever a crash left of them):

    COPY_STARTED    written (put-if-absent) before any file of the segment: a copy is under way
    COPY_FINISHED   written after every file: the segment is readable, the local copy may go
    DELETE_STARTED  written before any file is deleted: it is no longer read
    (DELETE_FINISHED is the folder gone: the files, then COPY_FINISHED, COPY_STARTED, DELETE_STARTED)

Each leader claims the partition in the store before its first remote step, as an empty object
``leader-epochs/<partition folder>/<leader epoch>``; a leader checks before each step that no newer epoch
claimed it, so a former leader that has not learnt of its successor copies and deletes nothing more.

So a folder with COPY_STARTED and no COPY_FINISHED is a copy a crash interrupted (an orphan: deleted
and copied again), one with DELETE_STARTED a deletion to finish; a kill -9 at any point leaves no
segment deleted locally that is not COPY_FINISHED remotely (local deletion waits for COPY_FINISHED).
"""
from __future__ import annotations

import base64
import enum
import json
import threading
import uuid
from bisect import bisect_right
from dataclasses import asdict, dataclass
from typing import NamedTuple

from tidelake.storage import Storage


class RemoteSegmentState(enum.Enum):
    COPY_STARTED = "COPY_STARTED"
    COPY_FINISHED = "COPY_FINISHED"
    DELETE_STARTED = "DELETE_STARTED"
    DELETE_FINISHED = "DELETE_FINISHED"


# a remote segment's files, by the local file each copies
LOG_FILE = "segment.log"
OFFSET_INDEX_FILE = "segment.index"
TIME_INDEX_FILE = "segment.timeindex"
TXN_INDEX_FILE = "segment.txnindex"
PRODUCER_SNAPSHOT_FILE = "producer.snapshot"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
DATA_FILES = (LOG_FILE, OFFSET_INDEX_FILE, TIME_INDEX_FILE, TXN_INDEX_FILE, PRODUCER_SNAPSHOT_FILE, LEADER_EPOCH_FILE)
MARKERS = tuple(s.value for s in RemoteSegmentState if s is not RemoteSegmentState.DELETE_FINISHED)
LEADER_EPOCHS = "leader-epochs"  # <this>/<partition folder>/<epoch>: each leader's claim of a partition


def partition_prefix(topic: str, partition: int, topic_id: uuid.UUID) -> str:
    """The partition's folder: its name and its topic's id (printed as Kafka prints a Uuid, URL-safe base64)."""
    return f"{topic}-{partition}-{base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}"


class OffsetAndEpoch(NamedTuple):
    offset: int
    leader_epoch: int


NO_OFFSET = OffsetAndEpoch(-1, -1)


@dataclass(frozen=True)
class RemoteSegment:
    """One copied segment: offsets [base_offset, end_offset], its .log's size, its newest timestamp and
    the leader epochs of its records ((epoch, start offset), as the leader-epoch checkpoint)."""
    folder: str
    segment_id: str
    base_offset: int
    end_offset: int
    size: int
    max_timestamp: int
    leader_epochs: tuple[tuple[int, int], ...]
    copied_ms: int
    # bytes of its transaction index: 0 lets a reader skip that GET (no aborted transaction to tell); -1 unknown
    # (copied before this was recorded)
    txn_index_bytes: int = -1

    @classmethod
    def new(cls, prefix: str, base_offset: int, end_offset: int, size: int, max_timestamp: int,
            leader_epochs: list[tuple[int, int]], copied_ms: int, txn_index_bytes: int) -> "RemoteSegment":
        segment_id = uuid.uuid4().hex
        return cls(f"{prefix}/{base_offset:020d}-{segment_id}", segment_id, base_offset, end_offset, size,
                   max_timestamp, tuple(tuple(e) for e in leader_epochs), copied_ms, txn_index_bytes)

    def path(self, name: str) -> str:
        return f"{self.folder}/{name}"

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "RemoteSegment":
        d = json.loads(raw)
        d["leader_epochs"] = tuple(tuple(e) for e in d["leader_epochs"])
        return cls(**d)


class RemotePartitionMetadata:
    """The remote segments of one partition: ``segments`` (COPY_FINISHED, by base offset, read by any
    thread: replaced whole, never edited) and the folders a crash left unfinished (``unfinished``).
    Transitions are made by one thread (the remote log manager's)."""

    def __init__(self, storage: Storage, topic: str, partition: int, topic_id: uuid.UUID):
        self.storage = storage
        self.topic, self.partition, self.topic_id = topic, partition, topic_id
        self.prefix = partition_prefix(topic, partition, topic_id)
        self.segments: tuple[RemoteSegment, ...] = ()
        self._bases: tuple[int, ...] = ()
        self.unfinished: list[str] = []  # folders: an interrupted copy or deletion
        self._lock = threading.Lock()

    def load(self) -> None:
        """List the partition's folders: the finished segments, and the unfinished ones to clean. A segment
        already known is not read again (a follower lists every pass: one LIST, a GET per new segment)."""
        known = {seg.folder: seg for seg in self.segments}
        folders: dict[str, set[str]] = {}
        for path in self.storage.list(self.prefix):
            folder, _, name = path.rpartition("/")
            folders.setdefault(folder, set()).add(name)
        finished, unfinished = [], []
        for folder, names in sorted(folders.items()):
            if RemoteSegmentState.COPY_FINISHED.value in names and RemoteSegmentState.DELETE_STARTED.value not in names:
                seg = known.get(folder)
                finished.append(seg if seg is not None else
                                RemoteSegment.from_json(self.storage.read(f"{folder}/COPY_FINISHED")))
            else:
                unfinished.append(folder)
        self._publish(finished)
        self.unfinished = unfinished

    def load_new(self, log_start_offset: int) -> None:
        """A follower's pass: only the segments copied after the newest one known (one LIST of what sorts after
        its folder, however many segments the partition has: a full listing every pass made a store serving
        hundreds of segments the bottleneck of the leader's copies), and those wholly below the log start (the
        leader's retention and DeleteRecords) forgotten. A copy below the newest known (a new leader's first
        overlaps it) is not listed: the follower only needs the remote end, which the next copy moves on."""
        if not self.segments:
            self.load()
            return
        folders: dict[str, set[str]] = {}
        for path in self.storage.list(self.prefix, after=f"{self.segments[-1].folder}/~"):
            folder, _, name = path.rpartition("/")
            folders.setdefault(folder, set()).add(name)
        new = [RemoteSegment.from_json(self.storage.read(f"{folder}/COPY_FINISHED"))
               for folder, names in sorted(folders.items())
               if RemoteSegmentState.COPY_FINISHED.value in names and RemoteSegmentState.DELETE_STARTED.value not in names]
        kept = [seg for seg in self.segments if seg.end_offset >= log_start_offset]
        if new or len(kept) < len(self.segments):
            self._publish([*kept, *new])

    def _publish(self, segments: list[RemoteSegment]) -> None:
        segments = sorted(segments, key=lambda s: (s.base_offset, s.end_offset))
        with self._lock:
            self.segments = tuple(segments)
            self._bases = tuple(s.base_offset for s in segments)

    # ------------------------------------------------------------------ reading
    @property
    def start_offset(self) -> int | None:
        """The first remote offset, None with no remote segment."""
        return self.segments[0].base_offset if self.segments else None

    @property
    def end_offset(self) -> int:
        """One past the last remote offset (-1 with no remote segment)."""
        return max((s.end_offset for s in self.segments), default=-2) + 1

    @property
    def highest_offset(self) -> OffsetAndEpoch:
        """The last remote offset and the leader epoch of its records (Kafka's highestOffsetInRemoteStorage),
        NO_OFFSET with no remote segment."""
        if not self.segments:
            return NO_OFFSET
        last = self.segments[-1]
        epochs = [e for e, start in last.leader_epochs if start <= last.end_offset]
        return OffsetAndEpoch(last.end_offset, epochs[-1] if epochs else -1)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_for(self, offset: int) -> RemoteSegment | None:
        """The segment holding ``offset`` (or the first after it, a gap), None past the remote end."""
        with self._lock:
            segments, bases = self.segments, self._bases
        i = max(0, bisect_right(bases, offset) - 1)
        while i < len(segments):
            if segments[i].end_offset >= offset:
                return segments[i]
            i += 1
        return None

    def next_segment(self, seg: RemoteSegment) -> RemoteSegment | None:
        return self.segment_for(seg.end_offset + 1)

    # ------------------------------------------------------------------ leadership
    def claim_leadership(self, leader_epoch: int) -> None:
        self.storage.write(f"{LEADER_EPOCHS}/{self.prefix}/{leader_epoch:010d}", b"")

    def newest_leader_epoch(self) -> int:
        """The newest epoch a leader claimed the partition in (-1: none)."""
        return max((int(path.rpartition("/")[2]) for path in self.storage.list(f"{LEADER_EPOCHS}/{self.prefix}")),
                   default=-1)

    # ------------------------------------------------------------------ transitions
    def copy_started(self, seg: RemoteSegment) -> None:
        self.storage.create(seg.path(RemoteSegmentState.COPY_STARTED.value), seg.to_json())

    def copy_finished(self, seg: RemoteSegment) -> None:
        self.storage.create(seg.path(RemoteSegmentState.COPY_FINISHED.value), seg.to_json())
        self._publish([*self.segments, seg])

    def delete(self, seg: RemoteSegment) -> None:
        """DELETE_STARTED (readers stop at once), then every file, the markers last."""
        self.storage.write(seg.path(RemoteSegmentState.DELETE_STARTED.value), b"{}")
        self._publish([s for s in self.segments if s.folder != seg.folder])
        self.delete_folder(seg.folder)

    def delete_folder(self, folder: str) -> None:
        """Every file of ``folder``, DELETE_STARTED last (an interrupted deletion is resumed)."""
        for name in DATA_FILES + MARKERS:
            self.storage.delete(f"{folder}/{name}")

    def clean_unfinished(self) -> int:
        """Delete what crashes left (orphaned copies, interrupted deletions); returns how many."""
        done = 0
        for folder in list(self.unfinished):
            self.storage.write(f"{folder}/{RemoteSegmentState.DELETE_STARTED.value}", b"{}")
            self.delete_folder(folder)
            self.unfinished.remove(folder)
            done += 1
        return done

    def delete_all(self) -> None:
        """The partition's every remote file (its topic was deleted)."""
        for path in self.storage.list(self.prefix):
            if not path.endswith(RemoteSegmentState.DELETE_STARTED.value):
                self.storage.delete(path)
        for path in self.storage.list(self.prefix) + self.storage.list(f"{LEADER_EPOCHS}/{self.prefix}"):
            self.storage.delete(path)
        self._publish([])
