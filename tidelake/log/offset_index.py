"""OffsetIndex: a segment's sparse ``.index`` (relative offset -> file position).

File format (big-endian, as Kafka's): entries of (relativeOffset int32, position int32), one per
index.interval.bytes of log data. The relative offset is the BASE offset of the batch starting at
``position``, minus the segment's base offset (seed 004's [4, 476] means "the batch with offset base+4
starts at byte 476").

The entries are mirrored in memory (two ``array``s searched with ``bisect``) and written to the file
lazily (``flush``: at log flush, roll and close); after an unclean shutdown the index of a recovered
segment is rebuilt from the .log, so a lazily written file is never trusted after a crash.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from pathlib import Path

ENTRY = struct.Struct(">ii")


class OffsetIndex:
    def __init__(self, path: Path, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self.relative_offsets = array("i")
        self.positions = array("i")
        self._written = 0  # entries already in the file

    def __len__(self) -> int:
        return len(self.relative_offsets)

    def append(self, offset: int, position: int) -> None:
        """Index the batch with base ``offset`` at ``position`` (ignored unless past the last entry)."""
        rel = offset - self.base_offset
        if not self.relative_offsets or rel > self.relative_offsets[-1]:
            self.relative_offsets.append(rel)
            self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int] | None:
        """The last entry (relative offset, position) whose offset is <= ``offset``; None if none is."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset)
        if i == 0:
            return None
        return self.relative_offsets[i - 1], self.positions[i - 1]

    @property
    def last_position(self) -> int:
        """Position of the last indexed batch (0 when the index is empty)."""
        return self.positions[-1] if self.positions else 0

    def flush(self) -> None:
        """Append the entries not yet in the file (creating it if missing)."""
        n = len(self.relative_offsets)
        if n > self._written:
            data = b"".join(ENTRY.pack(self.relative_offsets[i], self.positions[i])
                            for i in range(self._written, n))
            with open(self.path, "ab") as f:
                f.write(data)
            self._written = n
        elif not self.path.exists():
            self.path.touch()

    def load(self, log_size: int) -> bool:
        """Read the file; False if it is missing or not a valid index of a .log of ``log_size`` bytes
        (offsets not increasing, a position outside the file)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % ENTRY.size:
            return False
        rel, pos = array("i"), array("i")
        for r, p in ENTRY.iter_unpack(raw):
            if (rel and r <= rel[-1]) or not 0 <= p < log_size or r < 0:
                return False
            rel.append(r)
            pos.append(p)
        self.relative_offsets, self.positions = rel, pos
        self._written = len(rel)
        return True

    def reset(self) -> None:
        """Drop every entry, in memory and on disk (the index is about to be rebuilt)."""
        self.relative_offsets, self.positions = array("i"), array("i")
        self.path.unlink(missing_ok=True)
        self._written = 0

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self.path.replace(path)
        self.path = path
