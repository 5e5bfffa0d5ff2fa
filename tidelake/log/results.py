"""What a partition log's calls return: an append's offsets (Kafka's LogAppendInfo), a read's bytes
and offsets (FetchDataInfo), and where an offset lies in the segments (for tests and tools)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime
    log_start_offset: int
    duplicate: bool = False


@dataclass
class ReadResult:
    data: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    first_offset: int = 0  # base offset of the first batch in data
    next_offset: int = 0  # the offset after the last batch in data (equal to first_offset when data is empty)


@dataclass
class OffsetPosition:
    """Where ``locate`` found an offset: the seed-004 lookup made visible."""

    segment_base_offset: int
    index_entry: tuple[int, int] | None  # (relative offset, position) from the sparse index
    position: int  # start of the batch containing the offset
    batch_base_offset: int
