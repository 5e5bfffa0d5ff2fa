"""IndexFile: what a segment's two sparse indexes share: fixed-size big-endian entries of two
columns, mirrored in memory as two ``array``s, appended to the file lazily, and loaded back only
when every entry is valid (an invalid file is rebuilt from the .log by the caller).

Subclasses name the entry format (``ENTRY``, ``TYPECODES``) and say what a valid entry is.
"""
from __future__ import annotations

import struct
from array import array
from pathlib import Path


class IndexFile:
    ENTRY: struct.Struct
    TYPECODES: tuple[str, str]

    def __init__(self, path: Path, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self._columns = self._empty()
        self._written = 0  # entries already in the file

    def _empty(self) -> tuple[array, array]:
        return array(self.TYPECODES[0]), array(self.TYPECODES[1])

    def __len__(self) -> int:
        return len(self._columns[0])

    def _append(self, first: int, second: int) -> None:
        self._columns[0].append(first)
        self._columns[1].append(second)

    def _valid(self, previous_first: int | None, first: int, second: int, log_size: int | None) -> bool:
        raise NotImplementedError

    def flush(self) -> None:
        """Append the entries not yet in the file (creating it if missing)."""
        a, b = self._columns
        n = len(a)
        if n > self._written:
            pack = self.ENTRY.pack
            data = b"".join(pack(a[i], b[i]) for i in range(self._written, n))
            with open(self.path, "ab") as f:
                f.write(data)
            self._written = n
        elif not self.path.exists():
            self.path.touch()

    def to_bytes(self) -> bytes:
        """Every entry in the file's format (a closed segment's index, copied to tiered storage)."""
        a, b = self._columns
        pack = self.ENTRY.pack
        return b"".join(pack(a[i], b[i]) for i in range(len(a)))

    def load(self, log_size: int | None = None) -> bool:
        """Read the file; False if it is missing or not valid (see ``_valid``)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % self.ENTRY.size:
            return False
        a, b = self._empty()
        for first, second in self.ENTRY.iter_unpack(raw):
            if not self._valid(a[-1] if a else None, first, second, log_size):
                return False
            a.append(first)
            b.append(second)
        self._columns = (a, b)
        self._written = len(a)
        return True

    def reset(self) -> None:
        """Drop every entry, in memory and on disk (the index is about to be rebuilt)."""
        self._columns = self._empty()
        self.path.unlink(missing_ok=True)
        self._written = 0

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self.path.replace(path)
        self.path = path
