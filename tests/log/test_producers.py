"""Idempotent producers (dup / gap / epoch / restart) and transactions (LSO, .txnindex) in the log."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from tidelake.errors import InvalidProducerEpoch, OutOfOrderSequenceNumber, TransactionCoordinatorFenced
from tidelake.log import LogConfig, PartitionLog
from tidelake.protocol.records import Record, build_batch, control_type, decode_records, iter_batches

NOW = 1_700_000_000_000


def pbatch(pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = False, value: bytes = b"v") -> bytes:
    return build_batch([Record(i, NOW, None, value) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=txn)


def plain(n: int = 1) -> bytes:
    return build_batch([Record(i, NOW, None, b"p") for i in range(n)])


def test_duplicate_is_acknowledged_with_original_offsets(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    r1 = log.append(pbatch(7, 0, 0, 3), now_ms=NOW)
    log.append(plain(2), now_ms=NOW)
    r2 = log.append(pbatch(7, 0, 3, 2), now_ms=NOW)
    size = log.active_segment.size
    for seq, n, want in ((0, 3, r1), (3, 2, r2)):  # retries of either of the last 5 batches
        dup = log.append(pbatch(7, 0, seq, n, value=b"retry"), now_ms=NOW)
        assert dup.duplicate and (dup.base_offset, dup.last_offset) == (want.base_offset, want.last_offset)
    assert log.active_segment.size == size and log.log_end_offset == 7  # nothing written
    # only the last 5 batches are remembered
    for k in range(5):
        log.append(pbatch(7, 0, 5 + k), now_ms=NOW)
    with pytest.raises(OutOfOrderSequenceNumber):
        log.append(pbatch(7, 0, 0, 3), now_ms=NOW)
    log.close()


def test_batches_of_one_producer_in_one_request_must_follow_each_other(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    for request in (pbatch(3, 0, 0, 2) + pbatch(3, 0, 5),   # a sequence gap inside the request
                    pbatch(3, 0, 0, 2) + pbatch(3, 1, 2)):  # an epoch change inside the request
        with pytest.raises(OutOfOrderSequenceNumber):
            log.append(request, now_ms=NOW)
    assert log.log_end_offset == 0 and log.active_segment.size == 0  # all-or-nothing
    r = log.append(pbatch(3, 0, 0, 2) + plain(1) + pbatch(3, 0, 2), now_ms=NOW)
    assert (r.base_offset, r.last_offset) == (0, 3)
    log.close()


def test_sequence_gap_and_epochs(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append(pbatch(1, 0, 0, 2), now_ms=NOW)
    with pytest.raises(OutOfOrderSequenceNumber):
        log.append(pbatch(1, 0, 5), now_ms=NOW)  # gap: 2 expected
    with pytest.raises(OutOfOrderSequenceNumber):
        log.append(pbatch(1, 0, 1), now_ms=NOW)  # overlaps but is not a known batch
    assert log.append(pbatch(1, 0, 2), now_ms=NOW).base_offset == 2
    # a new epoch must start at sequence 0
    with pytest.raises(OutOfOrderSequenceNumber):
        log.append(pbatch(1, 1, 3), now_ms=NOW)
    assert log.append(pbatch(1, 1, 0), now_ms=NOW).base_offset == 3
    # the old epoch is now fenced
    with pytest.raises(InvalidProducerEpoch):
        log.append(pbatch(1, 0, 3), now_ms=NOW)
    # an unknown producer may start anywhere (its state may have been removed by retention)
    assert log.append(pbatch(2, 0, 100), now_ms=NOW).base_offset == 4
    # two batches of one producer in a single request must be in sequence
    with pytest.raises(OutOfOrderSequenceNumber):
        log.append(pbatch(2, 0, 101) + pbatch(2, 0, 103), now_ms=NOW)
    r = log.append(pbatch(2, 0, 101) + pbatch(2, 0, 102), now_ms=NOW)
    assert (r.base_offset, r.last_offset) == (5, 6)
    # sequence numbers wrap at 2^31-1
    log.append(pbatch(3, 0, 2**31 - 1), now_ms=NOW)
    assert log.append(pbatch(3, 0, 0), now_ms=NOW).base_offset == 8
    assert log.log_end_offset == 9
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_restart(tmp_path: Path, clean: bool):
    cfg = LogConfig(segment_bytes=300)
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, cfg)
    results = [log.append(pbatch(9, 2, k * 2, 2, value=b"x" * 50), now_ms=NOW) for k in range(10)]
    assert len(log.segments) > 3 and list(d.glob("*.snapshot"))  # snapshots were written at rolls
    if clean:
        log.close()
    else:  # killed: no snapshot at close; the tail after the last roll snapshot is replayed
        for seg in log.segments:
            os.close(seg.fd)
    log = PartitionLog.open(d, cfg)
    dup = log.append(pbatch(9, 2, 18, 2), now_ms=NOW)
    assert dup.duplicate and dup.base_offset == results[-1].base_offset
    with pytest.raises(OutOfOrderSequenceNumber):
        log.append(pbatch(9, 2, 21), now_ms=NOW)
    with pytest.raises(InvalidProducerEpoch):
        log.append(pbatch(9, 1, 0), now_ms=NOW)
    assert log.append(pbatch(9, 2, 20), now_ms=NOW).base_offset == 20
    log.close()


def test_snapshot_corruption_falls_back_to_replay(tmp_path: Path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    log.append(pbatch(5, 0, 0, 4), now_ms=NOW)
    log.close()
    (snap,) = d.glob("*.snapshot")
    snap.write_bytes(snap.read_bytes()[:-3] + b"}}}")
    log = PartitionLog.open(d, LogConfig())
    assert log.append(pbatch(5, 0, 0, 4), now_ms=NOW).duplicate  # rebuilt from the log itself
    log.close()


def _markers(log: PartitionLog) -> list[tuple[int, int]]:
    out = []
    for h, data in log.iter_batches(0):
        if h.is_control:
            out.append((h.base_offset, control_type(decode_records(data)[0])))
    return out


def test_transactions_lso_and_aborted_index(tmp_path: Path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    log.append(plain(2), now_ms=NOW)                                # 0, 1
    log.append(pbatch(100, 0, 0, 2, txn=True), now_ms=NOW)          # 2, 3   txn A (pid 100)
    assert log.last_stable_offset == 2 and log.high_watermark == 4
    log.append(pbatch(200, 0, 0, 1, txn=True), now_ms=NOW)          # 4      txn B (pid 200)
    log.append(plain(1), now_ms=NOW)                                # 5
    log.append(pbatch(100, 0, 2, 1, txn=True), now_ms=NOW)         # 6      txn A again
    assert log.last_stable_offset == 2
    # read_committed readers stop at the LSO
    assert log.read(0, 1 << 20, max_offset=log.last_stable_offset).data
    assert log.read(2, 1 << 20, max_offset=log.last_stable_offset).data == b""
    commit_at = log.append_marker(producer_id=100, producer_epoch=0, commit=True, coordinator_epoch=1,
                                  now_ms=NOW)
    assert commit_at == 7
    assert log.last_stable_offset == 4  # B (first offset 4) is still open
    abort_at = log.append_marker(producer_id=200, producer_epoch=0, commit=False, coordinator_epoch=1,
                                 now_ms=NOW)
    assert abort_at == 8 and log.last_stable_offset == log.high_watermark == 9
    assert _markers(log) == [(7, 1), (8, 0)]
    assert log.aborted_transactions(0, 9) == [(200, 4)]
    assert log.aborted_transactions(0, 4) == []   # the txn starts at 4
    assert log.aborted_transactions(9, 20) == []  # ended at 8
    described = {p["producer_id"]: p for p in log.producer_state.describe()}
    assert described[100]["current_txn_start_offset"] == -1 and described[100]["last_sequence"] == 2
    assert described[200]["coordinator_epoch"] == 1
    raw = (d / f"{0:020d}.txnindex").read_bytes()
    assert struct.unpack(">hqqqq", raw) == (0, 200, 4, 8, 9)
    # a stale coordinator or an old producer epoch cannot write markers
    log.append(pbatch(100, 0, 3, 1, txn=True), now_ms=NOW)
    with pytest.raises(TransactionCoordinatorFenced):
        log.append_marker(producer_id=100, producer_epoch=0, commit=True, coordinator_epoch=0, now_ms=NOW)
    assert log.last_stable_offset == 9
    log.close()
    # open transactions and the aborted index survive a restart
    log = PartitionLog.open(d, LogConfig())
    assert log.last_stable_offset == 9 and log.high_watermark == 10
    assert log.aborted_transactions(0, 100) == [(200, 4)]
    # an epoch bump through the marker (coordinator aborting a timed-out txn) fences the old epoch
    log.append_marker(producer_id=100, producer_epoch=1, commit=False, coordinator_epoch=2, now_ms=NOW)
    assert log.last_stable_offset == 11
    assert log.aborted_transactions(9, 100) == [(100, 9)]
    with pytest.raises(InvalidProducerEpoch):
        log.append(pbatch(100, 0, 4, 1, txn=True), now_ms=NOW)
    with pytest.raises(InvalidProducerEpoch):
        log.append_marker(producer_id=100, producer_epoch=0, commit=True, coordinator_epoch=2, now_ms=NOW)
    log.close()


def test_open_transaction_recovered_after_crash(tmp_path: Path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    log.append(pbatch(1, 0, 0, 3, txn=True), now_ms=NOW)
    log.append(plain(2), now_ms=NOW)
    for seg in log.segments:  # killed: no snapshot, no index files
        os.close(seg.fd)
    log = PartitionLog.open(d, LogConfig())
    assert log.last_stable_offset == 0 and log.high_watermark == 5
    log.append_marker(producer_id=1, producer_epoch=0, commit=False, coordinator_epoch=0, now_ms=NOW)
    assert log.last_stable_offset == 6
    assert log.aborted_transactions(0, 6) == [(1, 0)]
    # the .txnindex entry written at abort time is not duplicated when the log is replayed
    for seg in log.segments:
        os.close(seg.fd)
    log = PartitionLog.open(d, LogConfig())
    assert log.aborted_transactions(0, 6) == [(1, 0)]
    log.close()


def test_truncation_rewinds_producer_state(tmp_path: Path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    log.append(pbatch(4, 0, 0, 2), now_ms=NOW)   # 0,1
    log.append(pbatch(4, 0, 2, 2), now_ms=NOW)   # 2,3
    log.truncate_to(2)
    # the batch at seq 2 is gone: it may be written again (not a duplicate)
    r = log.append(pbatch(4, 0, 2, 2), now_ms=NOW)
    assert not r.duplicate and r.base_offset == 2
    log.close()


def test_retry_is_recognised_after_delete_records_and_truncation(tmp_path: Path):
    """Found by the log model test: the producer's only batch lies in a segment DeleteRecords removed,
    then the log is truncated (a follower's truncation). The state comes back from the snapshot taken
    when that segment rolled, which must outlive later clean-shutdown snapshots, so a retry is still
    answered as a duplicate with its original offsets (as in Kafka, a segment's snapshot lives as long
    as the segment)."""
    cfg = LogConfig(segment_bytes=200, index_interval_bytes=1)
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, cfg)
    idem = build_batch([Record(i, 5000, None, b"") for i in range(4)], producer_id=77, producer_epoch=0,
                       base_sequence=0)
    assert log.append(idem, now_ms=1).base_offset == 0
    log.append(b"".join(build_batch([Record(0, 0, None, b"")]) for _ in range(2)), now_ms=1)
    log.append(build_batch([Record(0, 0, None, b"")]), now_ms=1)
    assert log.log_end_offset == 7
    log.close()
    log = PartitionLog.open(d, cfg)
    assert log.delete_records_before(4) == 4
    log.truncate_to(5)
    retry = build_batch([Record(i, 0, None, b"retry") for i in range(4)], producer_id=77, producer_epoch=0,
                        base_sequence=0)
    r = log.append(retry, now_ms=1)
    assert r.duplicate and (r.base_offset, r.last_offset) == (0, 3)
    assert log.log_end_offset == 5
    log.close()
    # clean shutdowns do not pile up snapshots: one per segment base plus the newest
    bases = {seg.base_offset for seg in PartitionLog.open(d, cfg).segments}
    assert {int(p.name.split(".")[0]) for p in d.glob("*.snapshot")} <= bases | {5}
