"""Recovery: a real process killed with SIGKILL mid-append, and hand-made torn writes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tidelake.log import LogConfig, PartitionLog
from tidelake.protocol.records import Record, build_batch, decode_records, iter_batches

NOW = 1_700_000_000_000
ROOT = Path(__file__).resolve().parents[2]


def batch(values: list[bytes], **kw) -> bytes:
    return build_batch([Record(i, NOW, None, v) for i, v in enumerate(values)], **kw)


def crash(log: PartitionLog) -> None:
    """Drop the log like a killed process would: no flush, no index files, no clean-shutdown marker."""
    for seg in log.segments:
        if seg.fd >= 0:
            os.close(seg.fd)
            seg.fd = -1
    log.closed = True


def read_all(log: PartitionLog) -> list[tuple[int, bytes]]:
    """(offset, value) of every record, checking batches are CRC-valid and offsets contiguous."""
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20).data
        assert data
        for pos, h in iter_batches(data, validate=True):
            assert h.base_offset == off, "offsets must be contiguous"
            out += [(r.offset, r.value) for r in decode_records(data, pos, h)]
            off = h.last_offset + 1
    return out


CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tidelake.log import LogConfig, PartitionLog
    from tidelake.protocol.records import Record, build_batch
    log = PartitionLog.open(Path(sys.argv[1]), LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512))
    seq = log.log_end_offset  # values name the record's expected offset
    pid_seq = 0
    i = 0
    while True:
        n = 1 + i % 7
        values = [b"value-%d-" % (seq + k) + b"p" * (i % 300) for k in range(n)]
        b = build_batch([Record(k, 1000 + i, None, v) for k, v in enumerate(values)],
                        producer_id=42, producer_epoch=0, base_sequence=pid_seq)
        r = log.append(b, now_ms=1000 + i)
        assert r.base_offset == seq
        sys.stdout.write(f"{r.base_offset} {r.last_offset} {pid_seq}\\n")
        sys.stdout.flush()
        seq += n
        pid_seq += n
        i += 1
""")


def test_sigkill_mid_append_keeps_every_acknowledged_offset(tmp_path: Path):
    d = tmp_path / "t-0"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(d)], stdout=subprocess.PIPE, env=env)
    acked: list[tuple[int, int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 3000 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(tuple(int(x) for x in line.split()))
        assert len(acked) >= 3000, "child did not make progress"
        os.kill(proc.pid, signal.SIGKILL)
        # acknowledgements still in the pipe were also acknowledged
        rest = proc.stdout.read()
        acked += [tuple(int(x) for x in line.split()) for line in rest.decode().splitlines()
                  if len(line.split()) == 3]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert not (d / ".clean-shutdown").exists()

    log = PartitionLog.open(d, LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512))
    assert len(log.segments) > 3, "the test should span several segments"
    last_acked = acked[-1][1]
    assert log.log_end_offset >= last_acked + 1
    records = read_all(log)
    assert [o for o, _ in records] == list(range(log.log_end_offset))
    for off, value in records:  # no garbage: every record is the one written at that offset
        assert value.startswith(b"value-%d-" % off)
    # producer state came back: retrying the last acknowledged batch is a duplicate
    base, last, seq = acked[-1]
    n = last - base + 1
    retry = build_batch([Record(k, 0, None, b"retry") for k in range(n)], producer_id=42,
                        producer_epoch=0, base_sequence=seq)
    if log.log_end_offset == last_acked + 1:  # the child was killed between appends
        r = log.append(retry, now_ms=NOW)
        assert r.duplicate and (r.base_offset, r.last_offset) == (base, last)
    # appending continues at the log end
    r = log.append(batch([b"after"]), now_ms=NOW)
    assert r.base_offset == records[-1][0] + 1
    log.close()


def _fill(d: Path, batches: int = 20, cfg: LogConfig | None = None) -> tuple[PartitionLog, list[int]]:
    log = PartitionLog.open(d, cfg or LogConfig(index_interval_bytes=100))
    ends = []
    for i in range(batches):
        log.append(batch([b"r%d-%d" % (i, k) for k in range(3)]), now_ms=NOW)
        ends.append(log.active_segment.size)
    return log, ends


@pytest.mark.parametrize("cut", [1, 12, 60, 61, 70])
def test_torn_write_is_truncated(tmp_path: Path, cut: int):
    d = tmp_path / "t-0"
    log, ends = _fill(d)
    crash(log)
    seg_file = d / f"{0:020d}.log"
    # a torn last write: only `cut` bytes of the last batch reached the file
    os.truncate(seg_file, ends[-2] + cut)
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=100))
    assert log.log_end_offset == 19 * 3
    assert seg_file.stat().st_size == ends[-2]
    assert log.recovery_report and "truncated" in log.recovery_report[0]
    assert [o for o, _ in read_all(log)] == list(range(57))
    assert log.append(batch([b"x"]), now_ms=NOW).base_offset == 57
    log.close()


def test_flipped_bytes_and_garbage_at_the_tail(tmp_path: Path):
    d = tmp_path / "t-0"
    log, ends = _fill(d)
    crash(log)
    seg_file = d / f"{0:020d}.log"
    with open(seg_file, "r+b") as f:  # flip a byte inside the last batch's records: CRC fails
        f.seek(ends[-1] - 5)
        byte = f.read(1)
        f.seek(ends[-1] - 5)
        f.write(bytes([byte[0] ^ 0x55]))
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=100))
    assert log.log_end_offset == 57 and "CRC" in log.recovery_report[0]
    assert [o for o, _ in read_all(log)] == list(range(57))
    crash(log)
    with open(seg_file, "ab") as f:  # zeros after the last batch (pre-allocated, never written)
        f.write(b"\0" * 4096)
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=100))
    assert log.log_end_offset == 57 and seg_file.stat().st_size == ends[-2]
    log.close()


def test_indexes_rebuilt_when_missing_or_corrupt(tmp_path: Path):
    d = tmp_path / "t-0"
    one = len(batch([b"r0-0", b"r0-1", b"r0-2"]))
    cfg = LogConfig(index_interval_bytes=100, segment_bytes=one * 5)
    log, _ = _fill(d, 20, cfg)
    want = read_all(log)
    idx_before = {s.base_offset: list(s.offset_index.positions) for s in log.segments}
    log.close()
    (d / f"{0:020d}.index").unlink()  # missing
    (d / f"{5 * 3:020d}.index").write_bytes(b"\x00\x00\x00\x07\x00\x10\x00\x00")  # points past the file
    (d / f"{10 * 3:020d}.timeindex").write_bytes(b"junk")  # bad length
    (d / ".clean-shutdown").unlink()
    (d / "recovery-point").write_text("60\n")  # all segments flushed: only the indexes are checked
    log = PartitionLog.open(d, cfg)
    assert {s.base_offset: list(s.offset_index.positions) for s in log.segments} == idx_before
    assert read_all(log) == want
    assert (d / f"{0:020d}.index").stat().st_size == 8 * len(idx_before[0])
    assert log.offset_for_timestamp(NOW) == (0, NOW)
    log.close()


def test_clean_reopen_does_not_rescan(tmp_path: Path):
    d = tmp_path / "t-0"
    log, _ = _fill(d)
    log.close()
    assert (d / ".clean-shutdown").exists()
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=100))
    assert not (d / ".clean-shutdown").exists()  # removed while open: a crash now means recovery
    assert log.recovery_report == [] and log.log_end_offset == 60
    assert log.recovered_segments == []  # indexes trusted, no CRC scan
    crash(log)
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=100))
    assert log.recovered_segments == [0] and log.log_end_offset == 60
    log.close()


def test_interrupted_compaction_swap_is_completed(tmp_path: Path):
    d = tmp_path / "t-0"
    log, _ = _fill(d, 4)
    log.roll(NOW)
    log.close()
    seg_log = d / f"{0:020d}.log"
    good = seg_log.read_bytes()
    # a compaction crashed after renaming the cleaned file to .swap: the swap must win
    first_batch_len = next(iter_batches(good))[1].size
    (d / f"{0:020d}.log.swap").write_bytes(good[:first_batch_len])
    (d / f"{0:020d}.log.cleaned").write_bytes(b"partial")
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=100))
    assert not list(d.glob("*.swap")) and not list(d.glob("*.cleaned"))
    assert seg_log.stat().st_size == first_batch_len
    assert log.log_end_offset == 12
    log.close()


def test_damage_in_an_older_segment_drops_what_follows(tmp_path: Path):
    d = tmp_path / "t-0"
    one = len(batch([b"r0-0", b"r0-1", b"r0-2"]))
    cfg = LogConfig(index_interval_bytes=100, segment_bytes=one * 5)
    log, _ = _fill(d, 20, cfg)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    crash(log)  # never flushed: no recovery point, every segment is validated
    middle = d / f"{bases[1]:020d}.log"
    data = bytearray(middle.read_bytes())
    third = sum(h.size for _p, h in list(iter_batches(bytes(data)))[:2])
    data[third + 70] ^= 0xFF  # inside the third batch of the second segment
    middle.write_bytes(bytes(data))
    log = PartitionLog.open(d, cfg)
    assert log.recovered_segments == bases[:2]
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset == bases[1] + 2 * 3
    assert not any((d / f"{b:020d}.log").exists() for b in bases[2:])
    assert [o for o, _ in read_all(log)] == list(range(bases[1] + 6))
    assert log.append(batch([b"next"]), now_ms=NOW).base_offset == bases[1] + 6
    log.close()


@pytest.mark.parametrize("damage", ["missing", "empty", "stale"])
def test_lost_leader_epoch_checkpoint_is_rebuilt_from_the_log(tmp_path: Path, damage: str):
    """The checkpoint is not fsynced on append: after a crash that lost or staled it, recovery rebuilds
    it from the batches' partition leader epochs."""
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(segment_bytes=4096))
    checkpoint = d / "leader-epoch-checkpoint"
    for _ in range(20):
        log.append(batch([b"x" * 100] * 3), now_ms=NOW, leader_epoch=0)  # several segments
    stale = checkpoint.read_text()
    log.append(batch([b"y"]), now_ms=NOW, leader_epoch=2)
    log.append(batch([b"z"]), now_ms=NOW, leader_epoch=5)
    expected = [(0, 0), (2, 60), (5, 61)]
    assert log.leader_epoch_cache.entries == expected
    assert len(log.segments) > 1
    crash(log)
    if damage == "missing":
        checkpoint.unlink()
    elif damage == "empty":
        checkpoint.write_text("")
    else:
        checkpoint.write_text(stale)
    reopened = PartitionLog.open(d, LogConfig(segment_bytes=4096))
    assert reopened.leader_epoch_cache.entries == expected
    assert any("leader-epoch-checkpoint" in line for line in reopened.recovery_report)
    assert checkpoint.read_text() == "0\n3\n0 0\n2 60\n5 61\n"
    reopened.close()


def test_leader_epoch_checkpoint_synced_on_flush(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append(batch([b"a"]), now_ms=NOW, leader_epoch=0)
    assert log.leader_epoch_cache.unsynced  # written on append, not fsynced
    log.flush()
    assert not log.leader_epoch_cache.unsynced
    log.close()
    assert PartitionLog.open(tmp_path / "t-0", LogConfig()).leader_epoch_cache.entries == [(0, 0)]


def test_swap_files_before_the_commit_point_are_discarded(tmp_path: Path):
    """A compaction that crashed before renaming ``X.log.cleaned`` to ``X.log.swap``: the old segment
    stays, every cleaned or index swap file goes."""
    d = tmp_path / "t-0"
    log, _ = _fill(d, 4)
    log.roll(NOW)
    log.close()
    name = f"{0:020d}"
    files = {p: (d / p).read_bytes() for p in (f"{name}.log", f"{name}.index", f"{name}.timeindex")}
    (d / f"{name}.log.cleaned").write_bytes(b"partial")
    (d / f"{name}.index.swap").write_bytes(b"\0" * 8)
    (d / f"{name}.timeindex.swap").write_bytes(b"\0" * 12)
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=100))
    assert not list(d.glob("*.swap")) and not list(d.glob("*.cleaned"))
    assert {p: (d / p).read_bytes() for p in files} == files
    assert log.recovered_segments == [] and log.log_end_offset == 12
    log.close()


def test_completed_swap_keeps_the_cleaned_transaction_index(tmp_path: Path):
    """A crash after the commit point: the .log and the .txnindex swap files are renamed into place and
    the offset/time indexes rebuilt from the new .log."""
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=1))
    log.append(batch([b"t"], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True), now_ms=NOW)
    log.append_marker(producer_id=5, producer_epoch=0, commit=False, coordinator_epoch=0, now_ms=NOW)
    log.append(batch([b"a", b"b"]), now_ms=NOW)
    log.roll(NOW)
    log.close()
    name = f"{0:020d}"
    txn = (d / f"{name}.txnindex").read_bytes()
    assert len(txn) == 34
    (d / f"{name}.log.swap").write_bytes((d / f"{name}.log").read_bytes())
    (d / f"{name}.txnindex.swap").write_bytes(txn)
    (d / f"{name}.txnindex").write_bytes(b"")  # the old one, about to be replaced
    (d / f"{name}.index").write_bytes(b"junk")
    log = PartitionLog.open(d, LogConfig(index_interval_bytes=1))
    assert not list(d.glob("*.swap"))
    assert (d / f"{name}.txnindex").read_bytes() == txn
    assert log.aborted_transactions(0, 10) == [(5, 0)]
    assert log.recovered_segments == [0]  # indexes rebuilt by a scan
    assert len(log.segments[0].offset_index) == 2
    assert [o for o, _ in read_all(log)][-2:] == [2, 3]
    log.close()
