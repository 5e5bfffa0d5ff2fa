"""A segment's .index and .timeindex in Kafka's format (each entry names the LAST offset of a batch), and the
files an older tidelake wrote (entries named a batch by its BASE offset): such a segment still opens and answers
lookups right, its indexes rebuilt in Kafka's format when their last entry shows the old format."""
from __future__ import annotations

import struct
from pathlib import Path

from log.test_basic import NOW, all_offsets, batch
from tidelake.log import LogConfig, PartitionLog
from tidelake.protocol.records import iter_batches

CFG = LogConfig(max_message_bytes=1 << 20, index_interval_bytes=1)   # an offset index entry per batch
BATCHES = 20
PER_BATCH = 5


def write_segment(directory: Path) -> list[tuple[int, int, int, int]]:
    """BATCHES batches of PER_BATCH records, timestamps rising per batch; their (position, base, last, max ts)."""
    log = PartitionLog.open(directory, CFG)
    for i in range(BATCHES):
        log.append(batch(PER_BATCH, ts=NOW + i), now_ms=NOW)
    log.close()
    data = (directory / "00000000000000000000.log").read_bytes()
    return [(pos, h.base_offset, h.base_offset + h.last_offset_delta, h.max_timestamp)
            for pos, h in iter_batches(data)]


def test_entries_name_each_batch_by_its_last_offset(tmp_path: Path):
    d = tmp_path / "t-0"
    batches = write_segment(d)
    index = list(struct.iter_unpack(">ii", (d / "00000000000000000000.index").read_bytes()))
    assert index == [(last, pos) for pos, _base, last, _ts in batches[1:]]   # the batch at position 0: no entry
    times = list(struct.iter_unpack(">qi", (d / "00000000000000000000.timeindex").read_bytes()))
    assert times == [(ts, last) for _pos, _base, last, ts in batches]


def test_an_older_tidelakes_indexes_are_read_then_rebuilt_in_kafkas_format(tmp_path: Path):
    d = tmp_path / "t-0"
    batches = write_segment(d)
    kafka_index = (d / "00000000000000000000.index").read_bytes()
    kafka_times = (d / "00000000000000000000.timeindex").read_bytes()
    # the files as the older writer left them: the same positions and timestamps, each batch's base offset
    (d / "00000000000000000000.index").write_bytes(b"".join(struct.pack(">ii", base, pos)
                                                            for pos, base, _last, _ts in batches[1:]))
    (d / "00000000000000000000.timeindex").write_bytes(b"".join(struct.pack(">qi", ts, base)
                                                                for _pos, base, _last, ts in batches))
    log = PartitionLog.open(d, CFG)
    assert all_offsets(log) == list(range(BATCHES * PER_BATCH))
    assert log.locate(7).batch_base_offset == 5 and log.locate(7).position == batches[1][0]
    assert log.offset_for_timestamp(NOW + 3)[0] == 3 * PER_BATCH
    log.close()
    assert (d / "00000000000000000000.index").read_bytes() == kafka_index
    assert (d / "00000000000000000000.timeindex").read_bytes() == kafka_times


def test_lookups_after_reopening_kafka_format_indexes(tmp_path: Path):
    d = tmp_path / "t-0"
    write_segment(d)
    log = PartitionLog.open(d, CFG)
    for offset in (0, 4, 5, 9, 51, BATCHES * PER_BATCH - 1):
        assert log.locate(offset).batch_base_offset == offset - offset % PER_BATCH
    for i in range(BATCHES):
        assert log.offset_for_timestamp(NOW + i)[0] == i * PER_BATCH
    log.close()
