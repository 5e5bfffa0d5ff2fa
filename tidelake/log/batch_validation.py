"""What a batch must be before a partition writes it (Kafka's LogValidator, for RecordBatch v2).

Client batches (Produce) are checked whole before anything is written, so an append is
all-or-nothing; then their offsets are assigned in place. Batches a follower fetched from its leader were checked by the leader; here they are
only CRC-checked and cut at the last whole batch (a fetch may end inside one).
"""
from __future__ import annotations

from tidelake.errors import CorruptMessage, MessageTooLarge
from tidelake.log.record_errors import keyless_records, keyless_records_error
from tidelake.protocol import records as rb
from tidelake.protocol.records import BatchHeader, CorruptRecordError


def validate_client_batches(buf: bytearray | memoryview, max_message_bytes: int, keys_required: bool,
                            partition_name: str) -> list[tuple[int, BatchHeader]]:
    """(position, header) of each batch of a Produce request's records. Raises CorruptMessage (bad
    CRC / magic / truncation / inconsistent counts / a control batch), MessageTooLarge (a batch over
    max.message.bytes) and InvalidRecord (records without a key where ``keys_required``: a compacted
    topic; ``record_errors`` names each)."""
    n = len(buf)
    if n == 0:
        raise CorruptMessage("empty record set")
    headers: list[tuple[int, BatchHeader]] = []
    pos = 0
    keyless: list[int] = []  # record indexes across the request's batches (KIP-467's batch_index)
    first_record = 0
    while pos < n:
        try:
            h = rb.validate_batch(buf, pos)
        except CorruptRecordError as e:
            raise CorruptMessage(str(e)) from None
        if h.size > max_message_bytes:
            raise MessageTooLarge(f"batch of {h.size} bytes exceeds max.message.bytes={max_message_bytes}")
        if h.records_count != h.last_offset_delta + 1:
            raise CorruptMessage("inconsistent batch: record count does not match the offset range")
        if h.is_control:
            raise CorruptMessage("clients may not produce control batches")
        if keys_required:
            try:
                keyless += [first_record + i for i in keyless_records(buf, pos, h)]
            except CorruptRecordError as e:
                raise CorruptMessage(str(e)) from None
            first_record += h.records_count
        headers.append((pos, h))
        pos += h.size
    if keyless:
        raise keyless_records_error(keyless, partition_name)
    return headers


def assign_offsets(buf: bytearray | memoryview, headers: list[tuple[int, BatchHeader]], first_offset: int,
                   leader_epoch: int, log_append_time_ms: int | None) -> list[tuple[int, int, int, int]]:
    """Patch validated client batches in place: consecutive offsets from ``first_offset``, the leader
    epoch and, when given, LogAppendTime. Returns (position, base offset, last offset, max timestamp)
    of each batch, as ``Segment.append`` takes them."""
    batches = []
    offset = first_offset
    for pos, h in headers:
        rb.set_base_offset(buf, pos, offset)
        rb.set_partition_leader_epoch(buf, pos, leader_epoch)
        bmax = h.max_timestamp
        if log_append_time_ms is not None:
            rb.set_log_append_time(buf, pos, h.size, log_append_time_ms)
            bmax = log_append_time_ms
        batches.append((pos, offset, offset + h.last_offset_delta, bmax))
        offset += h.last_offset_delta + 1
    return batches


def whole_replicated_batches(buf: bytearray) -> tuple[list[tuple[int, BatchHeader]], int]:
    """(position, header) of each whole batch a follower fetched, and where the whole ones end.
    Raises CorruptMessage (bad CRC / magic)."""
    headers: list[tuple[int, BatchHeader]] = []
    pos, n = 0, len(buf)
    while pos + rb.HEADER_SIZE <= n:
        try:
            if pos + rb.parse_header(buf, pos).size > n:  # a partial batch ends a fetch: not yet whole
                break
            h = rb.validate_batch(buf, pos)
        except CorruptRecordError as e:
            raise CorruptMessage(str(e)) from None
        headers.append((pos, h))
        pos += h.size
    return headers, pos
