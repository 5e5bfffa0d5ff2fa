"""Kafka RecordBatch v2 (magic 2): sans-IO parsing, validation and building.

The broker keeps client batches opaque on the hot path: it only reads the 61-byte
header, checks the CRC and patches the base offset (bytes 0-8, outside the CRC).
Full record decoding is for internal topics, compaction, the CLI and tests.

Layout (big-endian):
  baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
  crc uint32 (CRC-32C of everything after it) | attributes int16 | lastOffsetDelta int32 |
  baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
  baseSequence int32 | recordsCount int32 | records...
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Sequence

import crc32c as _crc32c
import cramjam

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
CRC_OFFSET = 17  # CRC covers [21:end]
ATTR_OFFSET = 21
MAX_TS_OFFSET = 35
_HEADER = struct.Struct(">qiibIhiqqqhii")

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)
COMPRESSION_NAMES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


class CorruptRecordError(ValueError):
    """The bytes are not a valid RecordBatch v2 (maps to CORRUPT_MESSAGE)."""


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of this batch on the wire / on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the batch header at ``pos``. Raises CorruptRecordError on short/invalid input."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError("truncated record batch header")
    h = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if h.magic != 2:
        raise CorruptRecordError(f"unsupported record batch magic {h.magic} (only v2)")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch length {h.batch_length} smaller than header")
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise CorruptRecordError("negative record count or offset delta")
    return h


def compute_crc(buf, pos: int, size: int) -> int:
    mv = memoryview(buf)[pos + ATTR_OFFSET: pos + size]
    return _crc32c.crc32c(mv)


def validate_batch(buf, pos: int = 0) -> BatchHeader:
    """Parse and CRC-check one batch. Raises CorruptRecordError."""
    h = parse_header(buf, pos)
    if pos + h.size > len(buf):
        raise CorruptRecordError("truncated record batch")
    if compute_crc(buf, pos, h.size) != h.crc:
        raise CorruptRecordError("record batch CRC mismatch")
    return h


def iter_batches(buf, validate: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch in ``buf``.

    Raises CorruptRecordError on a malformed or (if ``validate``) CRC-failing batch, including a
    truncated trailing batch.
    """
    pos, end = 0, len(buf)
    while pos < end:
        h = validate_batch(buf, pos) if validate else parse_header(buf, pos)
        if pos + h.size > end:
            raise CorruptRecordError("truncated record batch")
        yield pos, h
        pos += h.size


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Assign the broker offset in place (outside the CRC, so batches stay opaque)."""
    struct.pack_into(">q", buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    struct.pack_into(">i", buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray, pos: int, size: int, ts_ms: int) -> None:
    """Stamp LogAppendTime: set the attribute bit and maxTimestamp, then re-CRC."""
    (attrs,) = struct.unpack_from(">h", buf, pos + ATTR_OFFSET)
    struct.pack_into(">h", buf, pos + ATTR_OFFSET, attrs | ATTR_TIMESTAMP_TYPE)
    struct.pack_into(">q", buf, pos + MAX_TS_OFFSET, ts_ms)
    struct.pack_into(">I", buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


# ---------------------------------------------------------------------------------------------
# Compression
# ---------------------------------------------------------------------------------------------
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def decompress(codec: int, data) -> bytes:
    if codec == COMPRESSION_NONE:
        return bytes(data)
    try:
        if codec == COMPRESSION_GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == COMPRESSION_SNAPPY:
            data = bytes(data)
            if data[:8] == _XERIAL_MAGIC:  # Java client: xerial-framed blocks
                out, pos = bytearray(), 16
                while pos < len(data):
                    (n,) = struct.unpack_from(">i", data, pos)
                    pos += 4
                    out += bytes(cramjam.snappy.decompress_raw(data[pos:pos + n]))
                    pos += n
                return bytes(out)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == COMPRESSION_LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == COMPRESSION_ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except Exception as e:  # cramjam raises DecompressionError / ValueError
        raise CorruptRecordError(f"cannot decompress batch: {e}") from e
    raise CorruptRecordError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == COMPRESSION_SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == COMPRESSION_LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


# ---------------------------------------------------------------------------------------------
# Varints and records
# ---------------------------------------------------------------------------------------------
def _read_varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


@dataclass
class Record:
    offset: int = 0
    timestamp: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _read_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecordError("truncated record field")
    return bytes(buf[pos:pos + n]), pos + n


def decode_records(buf, pos: int = 0, header: BatchHeader | None = None) -> list[Record]:
    """Decode all records of the batch at ``pos`` (decompressing as needed)."""
    h = header or parse_header(buf, pos)
    body = memoryview(buf)[pos + HEADER_SIZE: pos + h.size]
    data = decompress(h.compression, body)
    out, p = [], 0
    for _ in range(h.records_count):
        length, p = _read_varint(data, p)
        end = p + length
        if length < 0 or end > len(data):
            raise CorruptRecordError("record length out of range")
        p += 1  # attributes (unused)
        ts_delta, p = _read_varint(data, p)
        off_delta, p = _read_varint(data, p)
        key, p = _read_bytes(data, p)
        value, p = _read_bytes(data, p)
        nh, p = _read_varint(data, p)
        headers = []
        for _h in range(nh):
            hk, p = _read_bytes(data, p)
            hv, p = _read_bytes(data, p)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        if p != end:
            raise CorruptRecordError("record length mismatch")
        ts = h.max_timestamp if h.timestamp_type == TIMESTAMP_LOG_APPEND_TIME else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, headers))
    return out


def _encode_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(b))
        out += b


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = COMPRESSION_NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Build one RecordBatch v2. Record offsets are taken relative to the first record's offset."""
    if not records:
        raise ValueError("a batch needs at least one record")
    first_off = records[0].offset
    base_ts = min(r.timestamp for r in records)
    max_ts = max(r.timestamp for r in records)
    body = bytearray()
    for r in records:
        rec = bytearray(b"\x00")
        _write_varint(rec, r.timestamp - base_ts)
        _write_varint(rec, r.offset - first_off)
        _encode_bytes(rec, r.key)
        _encode_bytes(rec, r.value)
        _write_varint(rec, len(r.headers))
        for hk, hv in r.headers:
            _encode_bytes(rec, hk.encode())
            _encode_bytes(rec, hv)
        _write_varint(body, len(rec))
        body += rec
    payload = compress(compression, bytes(body))
    attrs = compression | (ATTR_TIMESTAMP_TYPE if timestamp_type else 0)
    attrs |= ATTR_TRANSACTIONAL if transactional else 0
    attrs |= ATTR_CONTROL if control else 0
    last_delta = records[-1].offset - first_off
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    _HEADER.pack_into(buf, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, 2, 0, attrs,
                      last_delta, base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(records))
    buf[HEADER_SIZE:] = payload
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, size))
    return bytes(buf)


def build_control_batch(kind: int, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        timestamp: int, base_offset: int = 0) -> bytes:
    """A COMMIT (1) or ABORT (0) transaction marker batch."""
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch([Record(0, timestamp, key, value)], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, transactional=True, control=True)


def control_type(record: Record) -> int:
    """Return CONTROL_ABORT/CONTROL_COMMIT for a control record's key."""
    if record.key is None or len(record.key) < 4:
        raise CorruptRecordError("bad control record key")
    return struct.unpack_from(">hh", record.key)[1]


def transaction_marker(buf, pos: int, header: BatchHeader) -> tuple[bool, int] | None:
    """(is it an ABORT, the coordinator epoch) of the control batch at ``pos``; None when its record
    cannot be read (such a batch is skipped, as Kafka skips unknown control records)."""
    try:
        rec = decode_records(buf, pos, header)[0]
        kind = control_type(rec)
        coordinator_epoch = struct.unpack_from(">hi", rec.value)[1] if rec.value else -1
    except (CorruptRecordError, struct.error, IndexError):
        return None
    return kind == CONTROL_ABORT, coordinator_epoch
