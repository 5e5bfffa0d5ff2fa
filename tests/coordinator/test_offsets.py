"""__consumer_offsets record formats, coordinator partition, offset store."""
from __future__ import annotations

import struct

from hypothesis import given, strategies as st

from tidelake.coordinator.offsets import (
    GroupKey, GroupMetadataRecord, MemberRecord, OffsetAndMetadata, OffsetKey, OffsetStore, decode_group_value,
    decode_key, decode_offset_value, group_metadata_key, group_metadata_value, offset_commit_key,
    offset_commit_value,
)


def test_offset_commit_key_and_value_bytes_are_kafkas():
    key = offset_commit_key("g", "t", 3)
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    value = offset_commit_value(OffsetAndMetadata(42, 5, "meta", 1700000000000))
    assert value == struct.pack(">hqih4sq", 3, 42, 5, 4, b"meta", 1700000000000)
    assert decode_offset_value(value) == OffsetAndMetadata(42, 5, "meta", 1700000000000)
    # version 1 (with expireTimestamp) as older brokers wrote it
    v1 = struct.pack(">hqh1sqq", 1, 7, 1, b"m", 11, 99)
    assert decode_offset_value(v1) == OffsetAndMetadata(7, -1, "m", 11)
    assert group_metadata_key("g") == struct.pack(">hh1s", 2, 1, b"g")


def test_store_replays_commits_tombstones_and_group_records():
    store = OffsetStore()
    rec = GroupMetadataRecord("consumer", 4, "range", "m1", 123,
                              [MemberRecord("m1", None, "c", "/h", 300, 100, b"sub", b"asg")])
    log = [
        (offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(10, -1, "x", 1))),
        (offset_commit_key("g", "t", 1), offset_commit_value(OffsetAndMetadata(20, -1, "", 1))),
        (offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(15, -1, "y", 2))),
        (offset_commit_key("g", "t", 1), None),
        (group_metadata_key("g"), group_metadata_value(rec)),
    ]
    for k, v in log:
        store.apply_record(k, v)
    assert store.get("g", "t", 0) == OffsetAndMetadata(15, -1, "y", 2)
    assert store.get("g", "t", 1) is None
    assert store.groups["g"] == rec and store.known_groups() == {"g"}
    assert decode_key(group_metadata_key("g")).group == "g"
    store.apply_record(group_metadata_key("g"), None)
    store.apply_record(offset_commit_key("g", "t", 0), None)
    assert store.known_groups() == set()


# Bytes written by the struct-based encoder that preceded the spec-driven one (captured from it):
# existing data directories hold exactly these, so they must keep decoding to the same records.
OLD_OFFSET_KEY = bytes.fromhex("0001000a6f72646572732d61707000066f726465727300000007")
OLD_OFFSET_VALUE = bytes.fromhex("00030000001cbe991a14000000040006636b70742d370000018bcfe5687b")
OLD_OFFSET_VALUE_NO_METADATA = bytes.fromhex("00030000000000000000ffffffff0000ffffffffffffffff")
OLD_GROUP_KEY = bytes.fromhex("0002000a6f72646572732d617070")
OLD_GROUP_VALUE = bytes.fromhex(
    "00030008636f6e73756d657200000005000572616e676500036d2d310000018bcfe569c80000000200036d2d31ffff0007"
    "72646b61666b61000a2f3132372e302e302e31000493e00000afc800000005000173756200000005000161736700036d2d"
    "3200087374617469632d3200046a61766100092f31302e302e302e320000ea60000027100000000000000000")
OLD_GROUP_VALUE_EMPTY = bytes.fromhex("00030008636f6e73756d657200000006ffffffff0000018bcfe56b1500000000")

OLD_GROUP_RECORD = GroupMetadataRecord("consumer", 5, "range", "m-1", 1700000000456, [
    MemberRecord("m-1", None, "rdkafka", "/127.0.0.1", 300000, 45000, b"\x00\x01sub", b"\x00\x01asg"),
    MemberRecord("m-2", "static-2", "java", "/10.0.0.2", 60000, 10000, b"", b"")])
OLD_EMPTY_GROUP_RECORD = GroupMetadataRecord("consumer", 6, None, None, 1700000000789, [])


def test_records_written_by_the_old_encoder_decode():
    assert decode_key(OLD_OFFSET_KEY) == OffsetKey("orders-app", "orders", 7)
    assert decode_offset_value(OLD_OFFSET_VALUE) == OffsetAndMetadata(123456789012, 4, "ckpt-7", 1700000000123)
    assert decode_offset_value(OLD_OFFSET_VALUE_NO_METADATA) == OffsetAndMetadata(0, -1, "", -1)
    assert decode_key(OLD_GROUP_KEY) == GroupKey("orders-app")
    assert decode_group_value(OLD_GROUP_VALUE) == OLD_GROUP_RECORD
    assert decode_group_value(OLD_GROUP_VALUE_EMPTY) == OLD_EMPTY_GROUP_RECORD


def test_records_encode_to_the_old_bytes():
    assert offset_commit_key("orders-app", "orders", 7) == OLD_OFFSET_KEY
    assert offset_commit_value(OffsetAndMetadata(123456789012, 4, "ckpt-7", 1700000000123)) == OLD_OFFSET_VALUE
    assert offset_commit_value(OffsetAndMetadata(0, -1, "", -1)) == OLD_OFFSET_VALUE_NO_METADATA
    assert group_metadata_key("orders-app") == OLD_GROUP_KEY
    assert group_metadata_value(OLD_GROUP_RECORD) == OLD_GROUP_VALUE
    assert group_metadata_value(OLD_EMPTY_GROUP_RECORD) == OLD_GROUP_VALUE_EMPTY


def test_older_value_versions_decode():
    # OffsetCommitValue v0: no leaderEpoch, no expireTimestamp
    assert decode_offset_value(struct.pack(">hqh2sq", 0, 9, 2, b"md", 77)) == OffsetAndMetadata(9, -1, "md", 77)
    # GroupMetadataValue v0: no currentStateTimestamp, members without rebalanceTimeout / groupInstanceId
    v0 = (struct.pack(">hh8sih5sh2si", 0, 8, b"consumer", 3, 5, b"range", 2, b"m1", 1)
          + struct.pack(">h2sh1sh2si", 2, b"m1", 1, b"c", 2, b"/h", 100)
          + struct.pack(">i1si1s", 1, b"s", 1, b"a"))
    assert decode_group_value(v0) == GroupMetadataRecord(
        "consumer", 3, "range", "m1", -1, [MemberRecord("m1", None, "c", "/h", -1, 100, b"s", b"a")])


@given(st.text(max_size=20), st.text(max_size=20), st.integers(0, 2**31 - 1), st.integers(-1, 2**62),
       st.integers(-1, 2**31 - 1), st.text(max_size=40), st.integers(-1, 2**62))
def test_offset_record_round_trip(group, topic, partition, offset, leader_epoch, metadata, ts):
    assert decode_key(offset_commit_key(group, topic, partition)) == OffsetKey(group, topic, partition)
    om = OffsetAndMetadata(offset, leader_epoch, metadata, ts)
    assert decode_offset_value(offset_commit_value(om)) == om


@given(st.text(max_size=20), st.sampled_from(["consumer", "connect", ""]), st.integers(-1, 2**31 - 1),
       st.none() | st.text(max_size=10), st.lists(
           st.builds(MemberRecord, st.text(max_size=10), st.none() | st.text(max_size=10), st.text(max_size=10),
                     st.text(max_size=10), st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1),
                     st.binary(max_size=20), st.binary(max_size=20)), max_size=3))
def test_group_record_round_trip(group, protocol_type, generation, protocol, members):
    rec = GroupMetadataRecord(protocol_type, generation, protocol, members[0].member_id if members else None,
                              1234, members)
    assert decode_key(group_metadata_key(group)) == GroupKey(group)
    assert decode_group_value(group_metadata_value(rec)) == rec
