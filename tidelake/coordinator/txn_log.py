"""``__transaction_state`` record formats: Kafka's TransactionLogKey / TransactionLogValue.

Key (one version):   int16 key version (0) | TransactionLogKey v0: string TransactionalId
Value (v0, written): int16 value version (0) | int64 ProducerId | int16 ProducerEpoch |
                     int32 TransactionTimeoutMs | int8 TransactionStatus |
                     nullable [] {string Topic, []int32 PartitionIds} |
                     int64 TransactionLastUpdateTimestampMs | int64 TransactionStartTimestampMs
Value v1 (flexible: compact strings/arrays + tagged fields PreviousProducerId(0), NextProducerId(1),
ClientTransactionVersion(2)) is read as well, so a log written by a newer Kafka loads.
A null value (tombstone) removes the transactional id (expiration).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TxnStatus(IntEnum):
    """Kafka's TransactionState ids as stored in TransactionStatus (int8)."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions / ListTransactions use (Kafka's TransactionState.name)."""
        return _KAFKA_NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> "TxnStatus | None":
        return _BY_NAME.get(name)


_KAFKA_NAMES = {
    TxnStatus.EMPTY: "Empty", TxnStatus.ONGOING: "Ongoing", TxnStatus.PREPARE_COMMIT: "PrepareCommit",
    TxnStatus.PREPARE_ABORT: "PrepareAbort", TxnStatus.COMPLETE_COMMIT: "CompleteCommit",
    TxnStatus.COMPLETE_ABORT: "CompleteAbort", TxnStatus.DEAD: "Dead",
    TxnStatus.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _KAFKA_NAMES.items()}


@dataclass
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: TxnStatus
    partitions: dict[str, list[int]] = field(default_factory=dict)  # topic -> sorted partition ids
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1  # v1 tagged fields (kept when read, not written in v0)
    next_producer_id: int = -1
    client_transaction_version: int = 0


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(transactional_id: str, num_partitions: int = 50) -> int:
    """Kafka: Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------
def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", 0) + _string(transactional_id)


def encode_value(v: TxnLogValue) -> bytes:
    out = bytearray(struct.pack(">hqhib", 0, v.producer_id, v.producer_epoch, v.timeout_ms, int(v.status)))
    out += struct.pack(">i", len(v.partitions))
    for topic in sorted(v.partitions):
        parts = sorted(v.partitions[topic])
        out += _string(topic)
        out += struct.pack(f">i{len(parts)}i", len(parts), *parts)
    out += struct.pack(">qq", v.last_update_ms, v.start_ms)
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------
class _Reader:
    def __init__(self, buf: bytes):
        self.buf, self.pos = memoryview(buf), 0

    def take(self, fmt: str):
        vals = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals if len(vals) > 1 else vals[0]

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def raw(self, n: int) -> bytes:
        b = bytes(self.buf[self.pos:self.pos + n])
        if len(b) != n:
            raise ValueError("truncated transaction log record")
        self.pos += n
        return b

    def string(self, compact: bool) -> str:
        n = self.uvarint() - 1 if compact else self.take(">h")
        return self.raw(n).decode()

    def array_len(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.take(">i")

    def skip_tags(self) -> dict[int, bytes]:
        tags = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            tags[tag] = self.raw(size)
        return tags


def decode_key(data: bytes) -> str:
    r = _Reader(data)
    version = r.take(">h")
    if version != 0:
        raise ValueError(f"unknown TransactionLogKey version {version}")
    return r.string(compact=False)


def decode_value(data: bytes | None) -> TxnLogValue | None:
    if data is None:
        return None
    r = _Reader(data)
    version = r.take(">h")
    if version not in (0, 1):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    pid, epoch, timeout, status = r.take(">qhib")
    partitions: dict[str, list[int]] = {}
    n_topics = r.array_len(flexible)
    for _ in range(max(n_topics, 0)):
        topic = r.string(flexible)
        n = r.array_len(flexible)
        partitions[topic] = list(r.take(f">{n}i")) if n > 1 else ([r.take(">i")] if n == 1 else [])
        if flexible:
            r.skip_tags()
    last_update, start = r.take(">qq")
    value = TxnLogValue(pid, epoch, timeout, TxnStatus(status), partitions, last_update, start)
    if flexible:
        tags = r.skip_tags()
        if 0 in tags:
            value.previous_producer_id = struct.unpack(">q", tags[0])[0]
        if 1 in tags:
            value.next_producer_id = struct.unpack(">q", tags[1])[0]
        if 2 in tags:
            value.client_transaction_version = struct.unpack(">h", tags[2])[0]
    return value
