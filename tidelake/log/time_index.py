"""TimeIndex: a segment's ``.timeindex`` (timestamp -> relative offset).

File format (big-endian, as Kafka's): entries of (timestamp int64, relativeOffset int32): the largest
timestamp seen so far in the segment and the base offset (relative to the segment's) of the batch that
first reached it. Timestamps strictly increase, so a lookup is a binary search; one entry per new
maximum keeps lookups exact at a few bytes per entry.

Mirrored in memory and written lazily, like OffsetIndex.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from pathlib import Path

ENTRY = struct.Struct(">qi")


class TimeIndex:
    def __init__(self, path: Path, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.relative_offsets = array("i")
        self._written = 0

    def __len__(self) -> int:
        return len(self.timestamps)

    def append(self, timestamp: int, offset: int) -> None:
        """Record that the batch with base ``offset`` reached ``timestamp`` (ignored unless it is a new
        maximum)."""
        if not self.timestamps or timestamp > self.timestamps[-1]:
            self.timestamps.append(timestamp)
            self.relative_offsets.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> int | None:
        """Base offset of the batch that first reached the largest indexed timestamp below
        ``timestamp``: every batch before it holds only smaller timestamps. None if no entry is below."""
        i = bisect_right(self.timestamps, timestamp - 1)
        if i == 0:
            return None
        return self.base_offset + self.relative_offsets[i - 1]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the newest entry: the segment's max timestamp and where it is."""
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def flush(self) -> None:
        n = len(self.timestamps)
        if n > self._written:
            data = b"".join(ENTRY.pack(self.timestamps[i], self.relative_offsets[i])
                            for i in range(self._written, n))
            with open(self.path, "ab") as f:
                f.write(data)
            self._written = n
        elif not self.path.exists():
            self.path.touch()

    def load(self) -> bool:
        """Read the file; False if it is missing or malformed (timestamps not increasing)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % ENTRY.size:
            return False
        ts, rel = array("q"), array("i")
        for t, r in ENTRY.iter_unpack(raw):
            if ts and t <= ts[-1]:
                return False
            ts.append(t)
            rel.append(r)
        self.timestamps, self.relative_offsets = ts, rel
        self._written = len(ts)
        return True

    def reset(self) -> None:
        self.timestamps, self.relative_offsets = array("q"), array("i")
        self.path.unlink(missing_ok=True)
        self._written = 0

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self.path.replace(path)
        self.path = path
