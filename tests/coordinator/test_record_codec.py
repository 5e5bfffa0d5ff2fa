"""Coordinator records: the partition of a key, the spec-driven codec."""
from __future__ import annotations

import pytest

from tidelake.coordinator.offsets import partition_for
from tidelake.coordinator.record_codec import (decode_key, decode_value, encode_key, encode_value, java_string_hash,
                                               record_class, record_type)
from tidelake.coordinator.txn_log import partition_for as txn_partition_for


def test_java_string_hash_and_coordinator_partition():
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants") == 0  # Kafka's Utils.abs(MIN_VALUE) == 0
    assert java_string_hash("\u00e9t\u00e9") == 0xE9 * 961 + ord("t") * 31 + 0xE9
    h = java_string_hash("my-group")
    assert partition_for("my-group") == abs(h) % 50 and partition_for("my-group", 7) == abs(h) % 7


def test_java_string_hash_matches_java():
    # values of "...".hashCode() in Java
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    # explicit recomputation of Java's definition s[0]*31^(n-1) + ... with int overflow
    s = "my-transactional-id"
    h = 0
    for ch in s:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    assert java_string_hash(s) == (h - (1 << 32) if h >= 1 << 31 else h)
    assert 0 <= txn_partition_for(s) < 50
    assert txn_partition_for("polygenelubricants") == (
        0 if java_string_hash("polygenelubricants") == -(1 << 31) else abs(java_string_hash("polygenelubricants")) % 50)
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # the famous MIN_VALUE hash
    assert txn_partition_for("polygenelubricants") == 0




def test_a_key_is_its_record_type_then_the_body_at_version_0():
    GroupMetadataKey = record_class("GroupMetadataKey")
    key = encode_key(2, GroupMetadataKey(version=0, group="g"))
    assert key == b"\x00\x02\x00\x01g"
    assert record_type(key) == 2 and decode_key(GroupMetadataKey, key).group == "g"
    with pytest.raises(ValueError):
        record_type(b"\x00")


def test_a_value_is_its_version_then_the_body_at_that_version():
    OffsetCommitValue = record_class("OffsetCommitValue")
    v1 = encode_value(OffsetCommitValue(version=1, offset=7, metadata="m", commit_timestamp=11, expire_timestamp=99))
    assert v1 == b"\x00\x01" + (7).to_bytes(8, "big") + b"\x00\x01m" + (11).to_bytes(8, "big") + (99).to_bytes(8, "big")
    back = decode_value(OffsetCommitValue, v1)
    assert (back.version, back.offset, back.metadata, back.commit_timestamp, back.expire_timestamp) == (1, 7, "m", 11, 99)
    # v4 is flexible: compact string, an empty tagged-field section
    v4 = encode_value(OffsetCommitValue(version=4, offset=7, leader_epoch=2, metadata="m", commit_timestamp=11))
    assert v4 == (b"\x00\x04" + (7).to_bytes(8, "big") + (2).to_bytes(4, "big") + b"\x02m"
                  + (11).to_bytes(8, "big") + b"\x00")
    assert decode_value(OffsetCommitValue, v4).leader_epoch == 2


def test_tagged_only_fields_exist_in_their_tagged_versions():
    # Kafka's TransactionLogValue declares PreviousProducerId & co. with taggedVersions alone
    TransactionLogValue = record_class("TransactionLogValue")
    fields = dict(producer_id=1, producer_epoch=0, transaction_timeout_ms=10, transaction_status=0,
                  transaction_partitions=[], transaction_last_update_timestamp_ms=2, transaction_start_timestamp_ms=3)
    v0 = encode_value(TransactionLogValue(version=0, **fields))
    v1 = encode_value(TransactionLogValue(version=1, previous_producer_id=5, **fields))
    assert len(v1) > len(v0)
    assert decode_value(TransactionLogValue, v1).previous_producer_id == 5
    assert decode_value(TransactionLogValue, v0).previous_producer_id == -1  # the spec's default


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x05" + bytes(30), b"\xff\xff" + bytes(30),
                                  b"\x00\x03\x00\x00"])
def test_unknown_versions_and_malformed_values_are_value_errors(data):
    with pytest.raises(ValueError):
        decode_value(record_class("OffsetCommitValue"), data)
