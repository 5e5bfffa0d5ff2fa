"""TransactionIndex: a segment's ``.txnindex``, the aborted transactions whose ABORT marker is in it.

File format (big-endian, as Kafka's): entries of (version int16, producerId int64, firstOffset int64,
lastOffset int64, lastStableOffset int64). Fetch answers read_committed consumers with the aborted
transactions overlapping what it returns; compaction drops their records.

Unlike the offset and time indexes it is written at once (one small append per ABORT): it cannot be
rebuilt from the segment alone, because the transaction's first offset may lie in an earlier segment.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def _pack(txn: AbortedTxn) -> bytes:
    return ENTRY.pack(0, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


class TransactionIndex:
    def __init__(self, path: Path):
        self.path = path
        self.entries: list[AbortedTxn] = []

    def append(self, txn: AbortedTxn) -> None:
        self.entries.append(txn)
        with open(self.path, "ab") as f:
            f.write(_pack(txn))

    def contains_marker(self, marker_offset: int) -> bool:
        return any(t.last_offset == marker_offset for t in self.entries)

    def overlapping(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [start_offset, end_offset)."""
        return [t for t in self.entries if t.last_offset >= start_offset and t.first_offset < end_offset]

    def load(self) -> None:
        """Read the file (a torn last entry is ignored; a missing file is an empty index)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self.entries = []
            return
        usable = len(raw) - len(raw) % ENTRY.size
        self.entries = [AbortedTxn(pid, first, last, lso)
                        for _v, pid, first, last, lso in ENTRY.iter_unpack(raw[:usable])]

    def truncate_to(self, end_offset: int) -> None:
        """Drop the entries whose marker is at or after ``end_offset`` (the segment was cut there)."""
        kept = [t for t in self.entries if t.last_offset < end_offset]
        if len(kept) != len(self.entries):
            self.replace(kept)

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Rewrite the file with exactly ``entries``."""
        self.entries = list(entries)
        self.path.write_bytes(b"".join(_pack(t) for t in self.entries))

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self.path.replace(path)
        self.path = path
