"""Producer-state ``.snapshot`` files in Kafka's format (ProducerSnapshot v1: version, CRC-32C, entries), one entry
per remembered batch so that a restart still answers a retry of any of the last five as a duplicate, and the JSON an
older tidelake wrote (written here by that writer, kept as ``old_snapshot``): such a data directory still loads."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import crc32c
import pytest

from log.test_basic import NOW, batch
from tidelake.errors import OutOfOrderSequenceNumber
from tidelake.log import LogConfig, PartitionLog
from tidelake.log.producer_snapshot import SnapshotEntry, decode, encode
from tidelake.log.producer_state import ProducerStateManager

CFG = LogConfig(max_message_bytes=1 << 20)
PID = 4242


def produce(log: PartitionLog, seq: int, n: int = 3, epoch: int = 0):
    return log.append(batch(n, producer_id=PID, producer_epoch=epoch, base_sequence=seq), now_ms=NOW)


def old_snapshot(state: ProducerStateManager) -> bytes:
    """ProducerStateManager.take_snapshot's file as tidelake wrote it before Kafka's format."""
    producers = [{"pid": e.producer_id, "epoch": e.epoch, "coordinator_epoch": e.coordinator_epoch,
                  "txn_first_offset": e.current_txn_first_offset, "last_timestamp": e.last_timestamp,
                  "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                              for b in e.batches]} for e in state.producers.values()]
    body = json.dumps({"version": 1, "offset": state.map_end_offset, "producers": producers},
                      separators=(",", ":")).encode()
    return f"{crc32c.crc32c(body):08x}\n".encode() + body


def test_the_file_is_kafkas_producer_snapshot_v1(tmp_path: Path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, CFG)
    for i in range(7):
        produce(log, 3 * i)
    log.close()
    (snap,) = d.glob("*.snapshot")
    raw = snap.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", raw)
    assert (version, count, len(raw)) == (1, 5, 10 + 5 * 46)
    assert crc == crc32c.crc32c(raw[6:])
    entries = decode(raw)
    assert [(e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta, e.current_txn_first_offset)
            for e in entries] == [(PID, 0, 3 * i + 2, 3 * i + 2, 2, -1) for i in range(2, 7)]
    assert encode(entries) == raw
    with pytest.raises(ValueError):
        decode(raw[:-1])
    with pytest.raises(ValueError):
        decode(raw[:6] + bytes([raw[6] ^ 1]) + raw[7:])


def test_after_a_restart_the_last_five_batches_are_still_duplicates(tmp_path: Path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, CFG)
    for i in range(7):
        produce(log, 3 * i)
    log.close()
    log = PartitionLog.open(d, CFG)
    for i in range(2, 7):   # answered with the original offsets, nothing written
        r = produce(log, 3 * i)
        assert r.duplicate and r.base_offset == 3 * i
    with pytest.raises(OutOfOrderSequenceNumber):
        produce(log, 3)
    assert produce(log, 21).base_offset == 21
    log.close()


def test_an_older_tidelakes_json_snapshot_loads(tmp_path: Path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, CFG)
    for i in range(4):
        produce(log, 3 * i)
    log.append(batch(2, producer_id=PID + 1, producer_epoch=3, base_sequence=0, transactional=True), now_ms=NOW)
    state = log.producer_state
    before = {pid: (e.epoch, list(e.batches), e.current_txn_first_offset, e.last_timestamp)
              for pid, e in state.producers.items()}
    log.close()
    (snap,) = d.glob("*.snapshot")
    snap.write_bytes(old_snapshot(state))
    entries = decode(snap.read_bytes())
    assert isinstance(entries[0], SnapshotEntry) and len(entries) == 5
    log = PartitionLog.open(d, CFG)
    assert {pid: (e.epoch, list(e.batches), e.current_txn_first_offset, e.last_timestamp)
            for pid, e in log.producer_state.producers.items()} == before
    assert log.last_stable_offset == 12   # the open transaction came back from the old file
    assert produce(log, 3).duplicate
    log.close()
