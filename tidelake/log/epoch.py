"""Leader epoch cache persisted as Kafka's text ``leader-epoch-checkpoint``:

    0            <- version
    2            <- number of entries
    0 0          <- epoch, start offset
    3 1500

Written rename-atomically (temp file, rename) but not fsynced on the append path: an fsync per new
epoch would block the broker's event loop on the first append to every partition. ``sync()`` (called
when the log is flushed or closed) makes it durable; a checkpoint lost or torn by a crash reads as
empty or stale, and ``PartitionLog`` then rebuilds it from the batches' partition leader epochs.
"""
from __future__ import annotations

import bisect
import os
from pathlib import Path

CHECKPOINT_NAME = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, directory: Path):
        self.path = directory / CHECKPOINT_NAME
        self.entries: list[tuple[int, int]] = []  # (epoch, start offset), both increasing
        self.unsynced = False  # written since the last fsync
        self._load()

    def _load(self) -> None:
        try:
            lines = self.path.read_text().split("\n")
            count = int(lines[1])
            entries = [tuple(int(x) for x in line.split()) for line in lines[2:2 + count]]
            if int(lines[0]) != 0 or any(len(e) != 2 for e in entries):
                raise ValueError("bad leader-epoch-checkpoint")
            self.entries = [(e[0], e[1]) for e in entries]
        except (FileNotFoundError, ValueError, IndexError):
            self.entries = []

    def _write(self, *, sync: bool = False) -> None:
        text = "0\n%d\n%s" % (len(self.entries), "".join(f"{e} {o}\n" for e, o in self.entries))
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(text)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.unsynced = not sync

    def sync(self) -> None:
        """Make the checkpoint durable if it changed since the last fsync (log flush / close)."""
        if self.unsynced:
            self._write(sync=True)

    def rebuild(self, epochs_and_offsets) -> None:
        """Replace the entries from (partition leader epoch, base offset) of every batch, in log order
        (recovery of a lost or stale checkpoint)."""
        self.entries = []
        for epoch, offset in epochs_and_offsets:
            if epoch >= 0 and (not self.entries or epoch > self.entries[-1][0]):
                self.entries.append((epoch, offset))
        self._write(sync=True)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (only newer epochs are added)."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries = [e for e in self.entries if e[1] < start_offset]
        self.entries.append((epoch, start_offset))
        self._write()  # no fsync here (the append path): see the module docstring

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch ``offset`` was written in (Kafka's ``epochForOffset``): the newest starting at or below
        it; -1 before every entry."""
        i = bisect.bisect_right(self.entries, offset, key=lambda e: e[1])
        return self.entries[i - 1][0] if i else -1

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch, as Kafka's ``LeaderEpochFileCache.endOffsetFor``: (the largest known
        epoch <= ``epoch``, the start offset of the first epoch after it).

        The latest epoch ends at ``log_end_offset``; an epoch older than every entry answers
        (``epoch``, start of the first entry); an unknown epoch (-1, newer than the latest, or no
        entries at all) answers (-1, -1)."""
        if epoch < 0 or not self.entries or epoch > self.entries[-1][0]:
            return -1, -1
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        i = bisect.bisect_right(self.entries, epoch, key=lambda e: e[0])  # first entry with a larger epoch
        if i == 0:
            return epoch, self.entries[0][1]
        return self.entries[i - 1][0], self.entries[i][1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (log truncated to it)."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write(sync=True)

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: keep the epoch covering it, starting there."""
        if not self.entries or self.entries[0][1] >= start_offset:
            return
        covering = [e for e in self.entries if e[1] <= start_offset][-1]
        rest = [e for e in self.entries if e[1] > start_offset]
        self.entries = [(covering[0], start_offset)] + rest
        self._write(sync=True)

    def clear(self) -> None:
        self.entries = []
        self._write(sync=True)
