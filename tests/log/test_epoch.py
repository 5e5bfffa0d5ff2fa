"""LeaderEpochCache: OffsetForLeaderEpoch answers (Kafka's endOffsetFor) with epochs above 0."""
from __future__ import annotations

from pathlib import Path

from tidelake.log import LeaderEpochCache, LogConfig, PartitionLog
from tidelake.protocol.records import Record, build_batch

NOW = 1_700_000_000_000


def batch(n: int) -> bytes:
    return build_batch([Record(i, NOW, None, b"v") for i in range(n)])


def test_end_offset_for_matches_kafka(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append(batch(3), now_ms=NOW, leader_epoch=2)   # 0..2   epoch 2
    log.append(batch(4), now_ms=NOW, leader_epoch=5)   # 3..6   epoch 5
    log.append(batch(2), now_ms=NOW, leader_epoch=5)   # 7..8
    log.append(batch(1), now_ms=NOW, leader_epoch=9)   # 9      epoch 9
    cache = log.leader_epoch_cache
    assert cache.entries == [(2, 0), (5, 3), (9, 9)]
    leo = log.log_end_offset
    assert leo == 10
    assert cache.end_offset_for(9, leo) == (9, 10)   # the latest epoch ends at the log end
    assert cache.end_offset_for(5, leo) == (5, 9)    # ends where epoch 9 starts
    assert cache.end_offset_for(2, leo) == (2, 3)
    assert cache.end_offset_for(7, leo) == (5, 9)    # unknown epoch in between: the largest below it
    assert cache.end_offset_for(3, leo) == (2, 3)
    assert cache.end_offset_for(1, leo) == (1, 0)    # older than every entry: its end is the first start
    assert cache.end_offset_for(0, leo) == (0, 0)
    assert cache.end_offset_for(10, leo) == (-1, -1)  # newer than the latest: undefined
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    log.close()
    # the same answers from the checkpoint after a reopen
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    assert log.leader_epoch_cache.end_offset_for(5, log.log_end_offset) == (5, 9)
    log.truncate_to(8)  # epoch 9's start is gone: 5 is now the latest and ends at the new log end
    assert log.leader_epoch_cache.entries == [(2, 0), (5, 3)]
    assert log.leader_epoch_cache.end_offset_for(5, log.log_end_offset) == (5, 7)
    assert log.leader_epoch_cache.end_offset_for(9, log.log_end_offset) == (-1, -1)
    log.close()


def test_empty_cache_and_start_truncation(tmp_path: Path):
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(0, 0) == (-1, -1) and cache.latest_epoch == -1
    cache.assign(1, 0)
    cache.assign(4, 10)
    cache.assign(3, 20)  # not newer than the latest: ignored
    assert cache.entries == [(1, 0), (4, 10)]
    cache.truncate_from_start(12)  # the log now starts inside epoch 4
    assert cache.entries == [(4, 12)]
    assert cache.end_offset_for(2, 30) == (2, 12)
    assert cache.end_offset_for(4, 30) == (4, 30)
