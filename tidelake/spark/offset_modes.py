"""The pipeline's four offset modes (``offsets:`` in the YAML), after seed 001's experiments.

Each mode answers two questions with one interface: *where to start* (:meth:`OffsetMode.stored`, the
offsets it kept, which the runner then corrects into the broker's range as the paper's step (3) says) and
*what to do after the write* (:meth:`OffsetMode.after_write`); two modes also act before a batch is read
(:meth:`OffsetMode.before_read`) or put their offsets into the batch's table commit
(:meth:`OffsetMode.table_commit`).

* ``auto`` (:class:`AutoCommit`) - experiment 1, ``enable.auto.commit=true``: at most once.
* ``commit-after`` (:class:`CommitAfterWrite`) - experiment 2, ``commitAsync(offsetRanges)``: at least once.
* ``seo`` (:class:`SimilarExactlyOnce`) - experiment 3, the paper's SEO scheme with its ``gtoffset`` file.
* ``exactly-once`` (:class:`ExactlyOnce`) - the offsets are committed inside the table commit of the batch.

Offsets are "next offset to read" keyed by partition number (one topic). No pyspark imports.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping

from tidelake.spark.offset_range import OffsetRange
from tidelake.spark.offset_stores import BrokerOffsets, ClientOffsetFile, Offsets, offsets_from_app_state

MODES = ("auto", "commit-after", "seo", "exactly-once")


class PipelineFencedError(RuntimeError):
    """Another instance of the same exactly-once pipeline committed the batch this one was writing."""


@dataclass(frozen=True)
class Correction:
    """One partition's stored offset moved into the broker's available range [earliest, latest]."""

    partition: int
    stored: int | None
    corrected: int
    kind: str  # "none-stored" | "low" | "high"


def correct_offsets(stored: Mapping[int, int] | None, earliest: Mapping[int, int],
                    latest: Mapping[int, int]) -> tuple[Offsets, list[Correction]]:
    """The SEO paper's steps (1)-(3): where to start each partition.

    No stored offsets (first run of this group) -> earliest (auto.offset.reset=earliest). Otherwise each stored
    offset A is compared with the earliest available M and the latest N: A < M (low out-of-range: retention
    deleted what we had not read) -> M; A > N (high out-of-range: the topic was recreated or truncated) -> N;
    otherwise A is valid and kept. A partition with no stored offset (added since) starts at its earliest.
    """
    start: Offsets = {}
    corrections: list[Correction] = []
    for partition in sorted(earliest):
        low, high = earliest[partition], latest[partition]
        offset = None if stored is None else stored.get(partition)
        if offset is None:
            start[partition] = low
            corrections.append(Correction(partition, None, low, "none-stored"))
        elif offset < low:
            start[partition] = low
            corrections.append(Correction(partition, offset, low, "low"))
        elif offset > high:
            start[partition] = high
            corrections.append(Correction(partition, offset, high, "high"))
        else:
            start[partition] = offset
    return start, corrections


@dataclass(frozen=True)
class Batch:
    """One batch of the pipeline: its id, its offset ranges, and the offsets after it."""

    batch_id: int
    ranges: list[OffsetRange]
    end: Offsets

    @classmethod
    def after(cls, batch_id: int, start: Mapping[int, int], ranges: list[OffsetRange]) -> "Batch":
        """The batch reading ``ranges`` from ``start``: each range's partition moves to its end."""
        return cls(batch_id, ranges, {**start, **{r.partition: r.end for r in ranges}})


class OffsetMode(ABC):
    """Where a pipeline keeps how far it got, and when it records it."""

    name: str

    @abstractmethod
    def stored(self) -> Offsets | None:
        """Where to start: the next offsets this mode kept, None if the pipeline never ran."""

    def next_batch_id(self) -> int:
        return 0

    def before_read(self, latest: Offsets) -> None:
        """A batch is planned (``latest``: the log end seen); none of it has been read yet."""

    def table_commit(self, batch: Batch) -> dict[str, Any]:
        """What the batch's table commit records besides its files (``commit_staged`` arguments)."""
        return {}

    @abstractmethod
    def after_write(self, batch: Batch) -> None:
        """The batch is in the table."""

    def finish(self) -> None:
        """A ``once`` run has processed everything that was available when it started."""


class AutoCommit(OffsetMode):
    """Experiment 1, ``enable.auto.commit=true``: the driver's consumer learns the latest offsets by seeking
    to the log end, and auto-commit commits that position before any of the batch is processed. So the
    group is at the log end (CURRENT-OFFSET = LOG-END-OFFSET) while data is unprocessed: a stop loses it."""

    name = "auto"

    def __init__(self, group: BrokerOffsets):
        self.group = group

    def stored(self) -> Offsets | None:
        return self.group.committed()

    def before_read(self, latest: Offsets) -> None:
        self.group.commit(latest)

    def after_write(self, batch: Batch) -> None:
        pass  # auto-commit already moved the group to the log end


class CommitAfterWrite(OffsetMode):
    """Experiment 2, ``stream.asInstanceOf[CanCommitOffsets].commitAsync(offsetRanges)`` after the write:
    the batch's offsets are queued and sent with the next batch's fetch; a stop between batches drops the
    queue, so a restart re-reads one batch: duplicates = partitions x interval x rate (the paper's Table 1).
    ``sync`` commits right after the write instead (duplicates only on a crash between write and commit)."""

    name = "commit-after"

    def __init__(self, group: BrokerOffsets, sync: bool = False):
        self.group, self.sync = group, sync
        self.queued: Offsets | None = None

    def stored(self) -> Offsets | None:
        return self.group.committed()

    def before_read(self, latest: Offsets) -> None:
        if self.queued is not None:
            self.group.commit(self.queued)
            self.queued = None

    def after_write(self, batch: Batch) -> None:
        if self.sync:
            self.group.commit(batch.end)
        else:
            self.queued = dict(batch.end)

    def finish(self) -> None:
        if self.queued is not None:  # a finished run sends its queued commit
            self.group.commit(self.queued)
            self.queued = None


class SimilarExactlyOnce(OffsetMode):
    """Experiment 3, the paper's SEO ("Similar Exactly Once") scheme: the offsets live in the client's
    ``gtoffset`` file; no file means start at the earliest offsets; the file is rewritten after each batch is
    written. No loss or duplicate on a graceful stop; a crash between the write and the file update re-reads
    a batch."""

    name = "seo"

    def __init__(self, gtoffset: ClientOffsetFile, group: BrokerOffsets):
        self.gtoffset, self.group = gtoffset, group

    def stored(self) -> Offsets | None:
        return self.gtoffset.read()

    def after_write(self, batch: Batch) -> None:
        self.gtoffset.write(batch.end)
        self.group.show_progress(batch.end)


class ExactlyOnce(OffsetMode):
    """The next offsets and the batch id are committed inside the table commit that holds the batch, so the
    table and its offsets change together: a restart resumes from the table's ``app_state``, whatever the
    moment of a kill -9. A batch id the table already holds is not applied again."""

    name = "exactly-once"

    def __init__(self, table, app_id: str, topic: str, group: BrokerOffsets):
        self.table, self.app_id, self.topic, self.group = table, app_id, topic, group

    def stored(self) -> Offsets | None:
        return offsets_from_app_state(self.table.app_state(self.app_id))

    def next_batch_id(self) -> int:
        state = self.table.app_state(self.app_id)
        return state["batch_id"] + 1 if state else 0

    def last_extra(self) -> dict[str, Any]:
        """What the last committed batch recorded beside its offsets (running counts, the DLQ's end)."""
        state = self.table.app_state(self.app_id)
        return dict(state.get("extra") or {}) if state else {}

    def table_commit(self, batch: Batch) -> dict[str, Any]:
        return {"app_id": self.app_id, "batch_id": batch.batch_id,
                "app_extra": {"offsets": {str(p): o for p, o in sorted(batch.end.items())}, "topic": self.topic,
                              "ranges": [[r.partition, r.start, r.end] for r in batch.ranges]}}

    def after_write(self, batch: Batch) -> None:
        # Fencing: if another instance of this pipeline committed this batch id first, our commit was a no-op
        # and its offsets may differ from ours; continuing would lose or duplicate records.
        state = self.table.app_state(self.app_id)
        if state is None or state["batch_id"] != batch.batch_id or offsets_from_app_state(state) != batch.end:
            raise PipelineFencedError(f"batch {batch.batch_id} of {self.app_id} was committed by another "
                                      f"instance (table holds {state}); stopping this one")
        self.group.show_progress(batch.end)
