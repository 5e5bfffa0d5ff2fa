"""The bytes of a producer-state ``<offset>.snapshot`` file: Kafka's format (storage's ProducerSnapshot.json, version
1), so that ``kafka-dump-log`` and a Kafka broker read tidelake's snapshots, and the JSON an older tidelake wrote,
still read so that its data directory loads.

Kafka's layout, big-endian: ``int16 version (1)``, ``uint32 CRC-32C`` of every byte after it, ``int32`` count, then
per entry ``ProducerId int64, Epoch int16, LastSequence int32, LastOffset int64, OffsetDelta int32, Timestamp int64,
CoordinatorEpoch int32, CurrentTxnFirstOffset int64`` (-1: no open transaction; LastOffset -1: no batch).

Kafka writes one entry per producer, its last batch. tidelake remembers a producer's last five batches (a retry of
any of them is answered as a duplicate, also after a restart), so it writes one entry per remembered batch, oldest
first, all with the producer's epoch, coordinator epoch and open transaction: Kafka's reader keeps the last entry of
a producer id (its ``producers.put``), which is exactly Kafka's own entry, and tidelake's reads all of them.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass

import crc32c

VERSION = 1
_HEAD = struct.Struct(">hIi")   # version, crc, entry count
_CRC_FROM = 6                   # the CRC covers the bytes after version and CRC (Kafka's PRODUCER_ENTRIES_OFFSET)
_ENTRY = struct.Struct(">qhiqiqiq")
NO_OFFSET = -1


@dataclass(frozen=True)
class SnapshotEntry:
    """One ProducerSnapshot entry: a producer and one of its batches (last_offset -1: none)."""
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def encode(entries: list[SnapshotEntry]) -> bytes:
    body = _HEAD.pack(VERSION, 0, len(entries))[_CRC_FROM:] + b"".join(
        _ENTRY.pack(e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
                    e.coordinator_epoch, e.current_txn_first_offset) for e in entries)
    return struct.pack(">hI", VERSION, crc32c.crc32c(body)) + body


def decode(raw: bytes) -> list[SnapshotEntry]:
    """The entries of a snapshot in Kafka's format or in an older tidelake's JSON; ValueError if it is neither
    (torn, corrupt: the caller falls back to an older snapshot and the log)."""
    if _is_legacy_json(raw):
        return _decode_legacy_json(raw)
    if len(raw) < _HEAD.size:
        raise ValueError("producer snapshot shorter than its header")
    version, crc, count = _HEAD.unpack_from(raw)
    if version != VERSION:
        raise ValueError(f"producer snapshot of unknown version {version}")
    if crc != crc32c.crc32c(raw[_CRC_FROM:]):
        raise ValueError("producer snapshot CRC mismatch")
    if count < 0 or len(raw) != _HEAD.size + count * _ENTRY.size:
        raise ValueError(f"producer snapshot of {len(raw)} bytes does not hold {count} entries")
    return [SnapshotEntry(*fields) for fields in _ENTRY.iter_unpack(raw[_HEAD.size:])]


# ---------------------------------------------------------------------- an older tidelake's JSON snapshot
# "<crc32c as 8 hex digits>\n" + {"version": 1, "offset": N, "producers": [{"pid", "epoch", "coordinator_epoch",
# "txn_first_offset", "last_timestamp", "batches": [[first_seq, last_seq, first_offset, last_offset, ts], ...]}]}

def _is_legacy_json(raw: bytes) -> bool:
    return len(raw) > 9 and raw[8:9] == b"\n" and all(c in b"0123456789abcdef" for c in raw[:8])


def _decode_legacy_json(raw: bytes) -> list[SnapshotEntry]:
    crc_hex, body = raw.split(b"\n", 1)
    if int(crc_hex, 16) != crc32c.crc32c(body):
        raise ValueError("producer snapshot CRC mismatch")
    try:
        doc = json.loads(body)
        out = []
        for d in doc["producers"]:
            txn = NO_OFFSET if d["txn_first_offset"] is None else d["txn_first_offset"]
            batches = d["batches"]
            if not batches:
                out.append(SnapshotEntry(d["pid"], d["epoch"], -1, NO_OFFSET, 0, d["last_timestamp"],
                                         d["coordinator_epoch"], txn))
            for i, (_first_seq, last_seq, first_offset, last_offset, ts) in enumerate(batches):
                out.append(SnapshotEntry(d["pid"], d["epoch"], last_seq, last_offset, last_offset - first_offset,
                                         d["last_timestamp"] if i == len(batches) - 1 else ts,
                                         d["coordinator_epoch"], txn))
        return out
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"malformed producer snapshot: {e}") from e
