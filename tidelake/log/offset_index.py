"""OffsetIndex: a segment's sparse ``.index`` (relative offset -> file position).

File format (big-endian, as Kafka's): entries of (relativeOffset int32, position int32), one per
index.interval.bytes of log data. The relative offset is the LAST offset of the batch starting at
``position``, minus the segment's base offset, as Kafka writes it (kafka-dump-log --verify-index-only
checks that the batch at each position ends at the entry's offset). A lookup of the last entry at or below
an offset gives a batch that ends at or before it, so a forward scan from there finds the offset's batch;
an older tidelake's entries (batch BASE offsets) give a batch that starts at or before it: the same scan
works, and such a file is rebuilt when its last entry shows it (Segment.load_indexes).

The entries are mirrored in memory (two ``array``s searched with ``bisect``) and written to the file
lazily (``flush``: at log flush, roll and close); after an unclean shutdown the index of a recovered
segment is rebuilt from the .log, so a lazily written file is never trusted after a crash.
"""
from __future__ import annotations

import struct
from bisect import bisect_right

from tidelake.log.index_file import IndexFile

ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    ENTRY = ENTRY
    TYPECODES = ("i", "i")

    @property
    def relative_offsets(self):
        return self._columns[0]

    @property
    def positions(self):
        return self._columns[1]

    def append(self, offset: int, position: int) -> None:
        """Index the batch with last offset ``offset`` at ``position`` (ignored unless past the last entry)."""
        rel = offset - self.base_offset
        offsets = self._columns[0]
        if not offsets or rel > offsets[-1]:
            self._append(rel, position)

    def lookup(self, offset: int) -> tuple[int, int] | None:
        """The last entry (relative offset, position) whose offset is <= ``offset``; None if none is."""
        offsets, positions = self._columns
        i = bisect_right(offsets, offset - self.base_offset)
        if i == 0:
            return None
        return offsets[i - 1], positions[i - 1]

    @property
    def last_position(self) -> int:
        """Position of the last indexed batch (0 when the index is empty)."""
        positions = self._columns[1]
        return positions[-1] if positions else 0

    def _valid(self, previous: int | None, rel: int, position: int, log_size: int | None) -> bool:
        # offsets strictly increasing, positions inside a .log of ``log_size`` bytes
        return rel >= 0 and (previous is None or rel > previous) and 0 <= position < (log_size or 0)
