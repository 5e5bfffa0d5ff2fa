"""__transaction_state record formats: bytes already on disk, Kafka's versions, round trips."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st

from tidelake.coordinator.txn_log import TxnLogValue, TxnStatus, decode_key, decode_value, encode_key, encode_value

# Bytes written by the struct-based encoder that preceded the spec-driven one (captured from it):
# existing data directories hold exactly these, so they must keep decoding to the same records.
OLD_TXN_KEY = bytes.fromhex("0000000b7061796d656e74732d7478")
OLD_TXN_VALUE = bytes.fromhex(
    "0000000000000000109200030000ea60020000000200125f5f636f6e73756d65725f6f666673657473000000010000001100066f"
    "72646572730000000200000000000000020000018bcfe56be80000018bcfe56b84")
OLD_TXN_VALUE_EMPTY = bytes.fromhex("0000000000000000109300000000753000000000000000018bcfe56fd0ffffffffffffffff")

OLD_VALUE = TxnLogValue(4242, 3, 60000, TxnStatus.PREPARE_COMMIT, {"__consumer_offsets": [17], "orders": [0, 2]},
                        1700000001000, 1700000000900)
OLD_EMPTY_VALUE = TxnLogValue(4243, 0, 30000, TxnStatus.EMPTY, {}, 1700000002000, -1)


def test_records_written_by_the_old_encoder_decode():
    assert decode_key(OLD_TXN_KEY) == "payments-tx"
    assert decode_value(OLD_TXN_VALUE) == OLD_VALUE
    assert decode_value(OLD_TXN_VALUE_EMPTY) == OLD_EMPTY_VALUE


def test_records_encode_to_the_old_bytes():
    assert encode_key("payments-tx") == OLD_TXN_KEY
    assert encode_value(OLD_VALUE) == OLD_TXN_VALUE
    assert encode_value(OLD_EMPTY_VALUE) == OLD_TXN_VALUE_EMPTY
    # partitions are written sorted, whatever order the caller holds them in
    assert encode_value(TxnLogValue(4242, 3, 60000, TxnStatus.PREPARE_COMMIT,
                                    {"orders": [2, 0], "__consumer_offsets": [17]},
                                    1700000001000, 1700000000900)) == OLD_TXN_VALUE


def test_v1_with_every_tagged_field_and_a_null_partition_list():
    out = bytearray(struct.pack(">hqhib", 1, 7, 2, 1000, int(TxnStatus.COMPLETE_ABORT)))
    out += bytes([0])  # compact nullable array: null
    out += struct.pack(">qq", 50, 40)
    out += bytes([3, 0, 8]) + struct.pack(">q", 6) + bytes([1, 8]) + struct.pack(">q", 8)
    out += bytes([2, 2]) + struct.pack(">h", 2)
    assert decode_value(bytes(out)) == TxnLogValue(7, 2, 1000, TxnStatus.COMPLETE_ABORT, {}, 50, 40,
                                                   previous_producer_id=6, next_producer_id=8,
                                                   client_transaction_version=2)


def test_unknown_versions_and_truncation_are_errors():
    with pytest.raises(ValueError):
        decode_key(b"\x00\x01\x00\x01t")
    with pytest.raises(ValueError):
        decode_value(b"\x00\x02" + OLD_TXN_VALUE[2:])
    with pytest.raises(ValueError):
        decode_value(OLD_TXN_VALUE[:20])


@given(st.integers(0, 2**62), st.integers(0, 32767), st.integers(1, 2**31 - 1), st.sampled_from(list(TxnStatus)),
       st.dictionaries(st.text(min_size=1, max_size=10), st.lists(st.integers(0, 1000), unique=True), max_size=4),
       st.integers(-1, 2**62), st.integers(-1, 2**62))
def test_value_round_trip(pid, epoch, timeout, status, parts, last_update, start):
    v = TxnLogValue(pid, epoch, timeout, status, {t: sorted(p) for t, p in parts.items()}, last_update, start)
    assert decode_value(encode_value(v)) == v


def test_log_record_round_trip_and_layout():
    v = TxnLogValue(42, 3, 60000, TxnStatus.ONGOING, {"b": [2, 0], "a": [1]}, 123, 100)
    data = encode_value(v)
    # int16 version 0, int64 pid, int16 epoch, int32 timeout, int8 status
    assert struct.unpack_from(">hqhib", data) == (0, 42, 3, 60000, 1)
    back = decode_value(data)
    assert back.partitions == {"a": [1], "b": [0, 2]}
    assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.status) == (42, 3, 60000, TxnStatus.ONGOING)
    assert (back.last_update_ms, back.start_ms) == (123, 100)
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(encode_key("tx-ü")) == "tx-ü"
    assert decode_value(None) is None


def test_log_value_v1_flexible_is_read():
    # hand-built v1 (flexible) value with compact arrays and the PreviousProducerId tag
    out = bytearray(struct.pack(">hqhib", 1, 7, 2, 1000, 2))
    out += bytes([2])  # compact array of 1 topic
    out += bytes([len("t") + 1]) + b"t" + bytes([3]) + struct.pack(">ii", 0, 5) + bytes([0])  # 2 partitions, no tags
    out += struct.pack(">qq", 50, 40)
    out += bytes([1, 0, 8]) + struct.pack(">q", 6)  # one tagged field: tag 0, size 8
    v = decode_value(bytes(out))
    assert v.status == TxnStatus.PREPARE_COMMIT and v.partitions == {"t": [0, 5]}
    assert v.previous_producer_id == 6 and (v.last_update_ms, v.start_ms) == (50, 40)


@given(st.text(max_size=30), st.integers(0, 2**62), st.integers(0, 32767), st.integers(1, 2**31 - 1),
       st.sampled_from(list(TxnStatus)),
       st.dictionaries(st.text(min_size=1, max_size=10), st.lists(st.integers(0, 1000), unique=True), max_size=4))
def test_log_record_round_trip_property(txn_id, pid, epoch, timeout, status, parts):
    v = TxnLogValue(pid, epoch, timeout, status, {t: sorted(p) for t, p in parts.items()}, 5, 4)
    assert decode_key(encode_key(txn_id)) == txn_id
    back = decode_value(encode_value(v))
    assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.status, back.partitions) == \
        (pid, epoch, timeout, status, v.partitions)
