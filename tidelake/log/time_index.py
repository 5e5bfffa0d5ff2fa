"""TimeIndex: a segment's ``.timeindex`` (timestamp -> relative offset).

File format (big-endian, as Kafka's): entries of (timestamp int64, relativeOffset int32): the largest
timestamp seen so far in the segment and the LAST offset (relative to the segment's) of the batch that
first reached it, as Kafka writes it (an older tidelake wrote the batch's base offset: either finds the same
batch, see OffsetIndex). Timestamps strictly increase, so a lookup is a binary search; one entry per new
maximum keeps lookups exact at a few bytes per entry.

Mirrored in memory and written lazily, like OffsetIndex.
"""
from __future__ import annotations

import struct
from bisect import bisect_right

from tidelake.log.index_file import IndexFile

ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    ENTRY = ENTRY
    TYPECODES = ("q", "i")

    @property
    def timestamps(self):
        return self._columns[0]

    @property
    def relative_offsets(self):
        return self._columns[1]

    def append(self, timestamp: int, offset: int) -> None:
        """Record that the batch with last ``offset`` reached ``timestamp`` (ignored unless it is a new
        maximum)."""
        timestamps = self._columns[0]
        if not timestamps or timestamp > timestamps[-1]:
            self._append(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int | None:
        """An offset of the batch that first reached the largest indexed timestamp below
        ``timestamp``: every batch before it holds only smaller timestamps. None if no entry is below."""
        timestamps, offsets = self._columns
        i = bisect_right(timestamps, timestamp - 1)
        if i == 0:
            return None
        return self.base_offset + offsets[i - 1]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the newest entry: the segment's max timestamp and where it is."""
        timestamps, offsets = self._columns
        if not timestamps:
            return None
        return timestamps[-1], self.base_offset + offsets[-1]

    def _valid(self, previous: int | None, timestamp: int, _rel: int, _log_size: int | None) -> bool:
        return previous is None or timestamp > previous  # timestamps strictly increasing
