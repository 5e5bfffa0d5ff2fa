"""Log compaction (cleanup.policy=compact): keep the latest record per key in the closed segments.

When (``needs_compaction``, Kafka's cleaner scheduling): the dirty part of the cleanable range is the
closed segments not yet compacted (above ``_cleaned_up_to``); a pass runs once dirty bytes / cleanable bytes
reach min.cleanable.dirty.ratio, or the oldest dirty record is older than max.compaction.lag.ms, or a kept
tombstone's delete.retention.ms has run out. The clean point is kept in memory only, so after a restart the
whole log counts as dirty and is compacted once.

One pass over a PartitionLog (called with its lock held):
  1. the cleanable range is the closed segments (never the active one) whose newest timestamp is older
     than min.compaction.lag.ms;
  2. a key -> latest offset map is built over that range (records of aborted transactions ignored);
  3. each segment is rewritten keeping a record only if it is the latest for its key; tombstones (null
     value) also go once the segment is older than delete.retention.ms (the segment's mtime, preserved
     across rewrites, marks when it was closed). Records of aborted transactions are dropped; control
     batches are kept. Batches that lose nothing are copied byte for byte; others are rebuilt with
     build_batch keeping the original offsets, so offsets may have gaps.
  4. a rewritten segment is written to ``X.log.cleaned``, fsynced, renamed to ``X.log.swap`` and then
     over ``X.log`` (an interrupted swap is completed on open); its indexes are rebuilt.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tidelake.protocol import records as rb

if TYPE_CHECKING:
    from tidelake.log.partition import CompactionStats, PartitionLog
    from tidelake.log.segment import Segment


def _aborted_ranges(log: "PartitionLog", start: int, end: int) -> dict[int, list[tuple[int, int]]]:
    ranges: dict[int, list[tuple[int, int]]] = {}
    for seg in log.segments:
        for t in seg.aborted:
            if t.last_offset >= start and t.first_offset < end:
                ranges.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    return ranges


def _is_aborted(h: rb.BatchHeader, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    if not h.is_transactional or h.is_control:
        return False
    return any(first <= h.base_offset <= last for first, last in aborted.get(h.producer_id, ()))


def _cleanable_segments(log: "PartitionLog", now_ms: int) -> list["Segment"]:
    """Closed segments, oldest first, up to the first one holding a record younger than
    min.compaction.lag.ms."""
    cfg = log.config
    cleanable: list[Segment] = []
    for seg in log.segments[:-1]:
        if cfg.min_compaction_lag_ms > 0 and seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
            break
        cleanable.append(seg)
    return cleanable


def needs_compaction(log: "PartitionLog", now_ms: int) -> bool:
    cfg = log.config
    pending = log._tombstone_horizon_ms
    if pending is not None and now_ms > pending:
        return True
    cleanable = _cleanable_segments(log, now_ms)
    dirty = [seg for seg in cleanable if seg.next_offset > log._cleaned_up_to]
    if not dirty:
        return False
    dirty_bytes = sum(seg.size for seg in dirty)
    total = sum(seg.size for seg in cleanable)
    if total and dirty_bytes / total >= cfg.min_cleanable_dirty_ratio:
        return True
    oldest = dirty[0].first_batch_timestamp
    if oldest < 0:
        oldest = dirty[0].last_modified_ms()
    return cfg.max_compaction_lag_ms < now_ms - oldest


def compact_log(log: "PartitionLog", now_ms: int) -> "CompactionStats":
    from tidelake.log.partition import CompactionStats

    stats = CompactionStats()
    cfg = log.config
    cleanable = _cleanable_segments(log, now_ms)
    if not cleanable:
        return stats
    end_offset = cleanable[-1].next_offset
    pending = log._tombstone_horizon_ms
    if end_offset <= log._cleaned_up_to and (pending is None or now_ms <= pending):
        return stats  # nothing new to clean and no tombstone has expired since the last pass
    aborted = _aborted_ranges(log, cleanable[0].base_offset, end_offset)

    latest: dict[bytes, int] = {}
    for seg in cleanable:
        for _pos, h, view in seg.iter_batches():
            if h.is_control or _is_aborted(h, aborted):
                continue
            for r in rb.decode_records(view, 0, h):
                if r.key is not None:
                    latest[r.key] = r.offset

    next_horizon: int | None = None
    for seg in cleanable:
        horizon = seg.last_modified_ms() + cfg.delete_retention_ms
        drop_tombstones = now_ms > horizon
        out = bytearray()
        changed = False
        has_tombstones = False
        for _pos, h, view in seg.iter_batches():
            if h.is_control:
                out += view
                continue
            if _is_aborted(h, aborted):
                changed = True
                stats.records_removed += h.records_count
                continue
            recs = rb.decode_records(view, 0, h)
            kept = []
            for r in recs:
                if r.key is not None and latest.get(r.key) != r.offset:
                    stats.records_removed += 1
                    continue
                if r.key is not None and r.value is None:
                    if drop_tombstones:
                        stats.tombstones_removed += 1
                        continue
                    has_tombstones = True
                kept.append(r)
            if len(kept) == len(recs):
                out += view
                continue
            changed = True
            if kept:
                first = kept[0].offset
                out += rb.build_batch(
                    kept, base_offset=first, compression=h.compression, producer_id=h.producer_id,
                    producer_epoch=h.producer_epoch,
                    base_sequence=(h.base_sequence + first - h.base_offset) & 0x7FFFFFFF
                    if h.base_sequence >= 0 else -1,
                    transactional=h.is_transactional, timestamp_type=h.timestamp_type,
                    partition_leader_epoch=h.partition_leader_epoch)
        if has_tombstones:
            next_horizon = horizon if next_horizon is None else min(next_horizon, horizon)
        if not changed:
            continue
        stats.segments_cleaned += 1
        stats.bytes_before += seg.size
        stats.bytes_after += len(out)
        _swap_segment(seg, bytes(out))
    log._position_cache.clear()
    log._cleaned_up_to = end_offset
    log._tombstone_horizon_ms = next_horizon
    return stats


def _swap_segment(seg: "Segment", data: bytes) -> None:
    """Atomically replace the segment's .log with ``data`` and rebuild its indexes."""
    st = os.fstat(seg.fd)
    cleaned = seg.log_path.with_name(seg.log_path.name + ".cleaned")
    swap = seg.log_path.with_name(seg.log_path.name + ".swap")
    with open(cleaned, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(cleaned, swap)
    seg.index_path.unlink(missing_ok=True)
    seg.time_index_path.unlink(missing_ok=True)
    os.replace(swap, seg.log_path)
    # keep the closing time: it is the tombstone clock (delete.retention.ms) and retention's fallback
    os.utime(seg.log_path, ns=(st.st_atime_ns, st.st_mtime_ns))
    seg.reopen()
    expected_end = seg.next_offset
    seg.recover()
    seg.next_offset = max(seg.next_offset, expected_end)  # a segment's range survives removed tail records
