"""``__transaction_state`` records: Kafka's TransactionLogKey / TransactionLogValue.

Coded by ``record_codec`` from Kafka's transaction-coordinator message specs
(``tidelake/protocol/schemas/TransactionLog{Key,Value}.json``):

- key (type 0) ``TransactionLogKey``: the transactional id
- value ``TransactionLogValue``: producer id and epoch, timeout, status (``TxnStatus``), the
  partitions of the ongoing transaction, last-update and start timestamps. v0 is written for
  transaction protocol v1; v1 (flexible, with the tagged fields PreviousProducerId, NextProducerId,
  ClientTransactionVersion) for a v2 client's transaction, whose state needs them (the producer id an
  epoch overflow rotated to), as Kafka 4.x writes it; both are read.

A null value (tombstone) removes the transactional id (expiration).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from tidelake.coordinator.record_codec import (decode_key as decode_record_key, decode_value as decode_record_value,
                                               encode_key as encode_record_key, encode_value as encode_record_value,
                                               record_class, record_type)
# part of this module's API: the transaction coordinator's partition of a transactional id
from tidelake.coordinator.record_codec import partition_for  # noqa: F401

TRANSACTION_STATE_TOPIC = "__transaction_state"

TRANSACTION_LOG_KEY = 0  # the key's record type
TRANSACTION_LOG_VALUE_VERSION = 0  # written for v1 clients' transactions (every Kafka reads it)
TRANSACTION_LOG_VALUE_VERSION_TAGGED = 1  # written for v2 clients' transactions (Kafka 4.x reads it)
CLIENT_TRANSACTION_VERSION_TAGGED = 2  # transaction.version from which the tagged fields are needed

_TransactionLogKey = record_class("TransactionLogKey")
_TransactionLogValue = record_class("TransactionLogValue")


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


def encode_key(transactional_id: str) -> bytes:
    return encode_record_key(TRANSACTION_LOG_KEY, _TransactionLogKey(version=0, transactional_id=transactional_id))


def encode_value(v: TxnLogValue) -> bytes:
    P = _TransactionLogValue.PartitionsSchema
    tagged = v.client_transaction_version >= CLIENT_TRANSACTION_VERSION_TAGGED
    return encode_record_value(_TransactionLogValue(
        version=TRANSACTION_LOG_VALUE_VERSION_TAGGED if tagged else TRANSACTION_LOG_VALUE_VERSION,
        producer_id=v.producer_id, producer_epoch=v.producer_epoch,
        transaction_timeout_ms=v.timeout_ms, transaction_status=int(v.status),
        transaction_partitions=[P(topic=t, partition_ids=sorted(v.partitions[t])) for t in sorted(v.partitions)],
        transaction_last_update_timestamp_ms=v.last_update_ms, transaction_start_timestamp_ms=v.start_ms,
        previous_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
        client_transaction_version=v.client_transaction_version))


def decode_key(data: bytes) -> str:
    t = record_type(data)
    if t != TRANSACTION_LOG_KEY:
        raise ValueError(f"unknown TransactionLogKey version {t}")
    return decode_record_key(_TransactionLogKey, data).transactional_id


def decode_value(data: bytes | None) -> TxnLogValue | None:
    if data is None:
        return None
    v = decode_record_value(_TransactionLogValue, data)
    return TxnLogValue(v.producer_id, v.producer_epoch, v.transaction_timeout_ms, TxnStatus(v.transaction_status),
                       {p.topic: list(p.partition_ids) for p in v.transaction_partitions or ()},
                       v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms,
                       v.previous_producer_id, v.next_producer_id, v.client_transaction_version)
