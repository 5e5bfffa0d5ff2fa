"""__consumer_offsets record formats, coordinator partition, offset store."""
from __future__ import annotations

import struct

from tidelake.coordinator.offsets import (
    GroupMetadataRecord, MemberRecord, OffsetAndMetadata, OffsetStore, decode_key, decode_offset_value,
    group_metadata_key, group_metadata_value, java_string_hash, offset_commit_key, offset_commit_value,
    partition_for,
)


def test_java_string_hash_and_coordinator_partition():
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants") == 0  # Kafka's Utils.abs(MIN_VALUE) == 0
    assert java_string_hash("\u00e9t\u00e9") == 0xE9 * 961 + ord("t") * 31 + 0xE9
    h = java_string_hash("my-group")
    assert partition_for("my-group") == abs(h) % 50 and partition_for("my-group", 7) == abs(h) % 7


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
