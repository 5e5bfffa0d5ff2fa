"""The partition service under the data-plane handlers, on a real single broker: a Produce's append
and a Fetch's read answer named outcomes, and the single-broker rules (an ISR of one, internal topics
written only by coordinators, unknown partitions) are the service's, not the handlers'."""
from __future__ import annotations

import pytest

from tidelake import errors
from tidelake.broker import EmbeddedBroker
from tidelake.broker.partition_service import (AppendOutcome, DeleteOutcome, ListedOffset, LocalPartitions,
                                               PendingAcks, ReadOutcome)
from tidelake.protocol.records import Record, build_batch, decode_records, iter_batches


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("service")) as b:
        b.run(b.broker.create_topic, "plain", 1, {})
        b.run(b.broker.create_topic, "strict", 1, {"min.insync.replicas": "2"})
        b.run(b.broker.create_topic, "trim", 1, {})
        b.run(b.broker.create_topic, "compacted", 1, {"cleanup.policy": "compact"})
        yield b


def batch(values, ts=1_000):
    return build_batch([Record(i, ts + i, None, v) for i, v in enumerate(values)])


def append(broker, topic, partition, records, acks=1):
    service = broker.broker.context.partition_service
    return broker.call(service.append(topic, partition, records, acks=acks, now_ms=5_000, transactional_id=None))


def test_a_single_broker_gets_the_local_service(broker):
    assert type(broker.broker.context.partition_service) is LocalPartitions


def test_append_then_read_answer_named_outcomes(broker):
    first = append(broker, "plain", 0, batch([b"a", b"b", b"c"]))
    assert first == AppendOutcome(errors.NONE, base_offset=0, last_offset=2, log_append_time_ms=-1,
                                  log_start_offset=0, appended=True)
    second = append(broker, "plain", 0, batch([b"d"]), acks=-1)
    assert (second.error, second.base_offset, second.last_offset) == (errors.NONE, 3, 3)
    service = broker.broker.context.partition_service
    assert broker.call(service.wait_for_acks([PendingAcks("plain", 0, 3)], 1000)) == [errors.NONE]
    read = service.read("plain", 0, 1, 1 << 20, read_committed=True, min_one=True, follower=False)
    assert isinstance(read, ReadOutcome)
    assert (read.error, read.high_watermark, read.last_stable_offset, read.log_start_offset) == (errors.NONE, 4, 4, 0)
    assert read.aborted == [] and read.offsets_spanned == 4  # the first batch is whole: offsets 0..3
    data = bytes(read.records)
    values = [r.value for pos, h in iter_batches(data) for r in decode_records(data, pos, h)]
    assert values == [b"a", b"b", b"c", b"d"]


def test_read_out_of_range_and_unknown_partition(broker):
    service = broker.broker.context.partition_service
    beyond = service.read("plain", 0, 99, 1 << 20, read_committed=False, min_one=True, follower=False)
    assert beyond.error == errors.OffsetOutOfRange.code and beyond.records == b""
    assert service.read("nope", 0, 0, 100, read_committed=False, min_one=True, follower=False).error == \
        errors.UnknownTopicOrPartition.code


def test_single_broker_rules_are_the_services(broker):
    short = append(broker, "strict", 0, batch([b"x"]), acks=-1)
    assert short.error == errors.NotEnoughReplicas.code and "min.insync.replicas" in short.message
    assert append(broker, "strict", 0, batch([b"x"]), acks=1).error == errors.NONE  # acks=1 needs no ISR
    assert append(broker, "nope", 0, batch([b"x"])).error == errors.UnknownTopicOrPartition.code
    assert append(broker, "plain", 0, batch([b"x"]), acks=2).error == errors.InvalidRequiredAcks.code
    assert append(broker, "plain", 0, b"").error == errors.InvalidRequest.code
    assert append(broker, "plain", 0, b"\x00" * 70).error == errors.CorruptMessage.code


def test_a_marker_and_a_coordinator_write_on_a_single_broker(broker):
    service = broker.broker.context.partition_service
    b = broker.broker.logs.get("plain", 0)
    end = b.log_end_offset
    marker = service.append_marker("plain", 0, producer_id=7, producer_epoch=0, commit=False, coordinator_epoch=0,
                                   now_ms=6_000)
    assert (marker.error, marker.base_offset, marker.last_offset) == (errors.NONE, end, end)
    assert b.log_end_offset == end + 1
    missing = service.append_marker("nope", 0, producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=0,
                                    now_ms=6_000)
    assert missing.error == errors.UnknownTopicOrPartition.code
    # one broker is the whole ISR: a coordinator's write is replicated as soon as it is written
    assert broker.call(service.log_end_replicated("plain", 0, 1000)) == errors.NONE


def test_delete_records_list_offsets_and_epochs_are_the_services(broker):
    """DeleteRecords, ListOffsets, OffsetForLeaderEpoch, DescribeProducers and DescribeLogDirs as the handlers ask
    them: named answers, Kafka's codes raised (or answered, for DeleteRecords) for a partition that cannot be."""
    service = broker.broker.context.partition_service
    assert append(broker, "trim", 0, batch([b"a", b"b", b"c", b"d", b"e"], ts=10_000)).last_offset == 4

    def delete(topic, offset):
        return broker.call(service.delete_records(topic, 0, offset, 1000))
    assert delete("trim", 2) == DeleteOutcome(errors.NONE, 2)
    assert delete("trim", 9) == DeleteOutcome(errors.OffsetOutOfRange.code)   # past the high watermark
    assert delete("nope", 0) == DeleteOutcome(errors.UnknownTopicOrPartition.code)
    assert delete("compacted", 0) == DeleteOutcome(errors.PolicyViolation.code)   # cleanup.policy without delete

    def listed(ts, read_committed=False):
        return service.list_offset("trim", 0, ts, current_leader_epoch=-1, read_committed=read_committed)
    assert listed(-2) == ListedOffset(-1, 2, 0) and listed(-1) == ListedOffset(-1, 5, 0)
    assert listed(10_003) == ListedOffset(10_003, 3, 0)   # the first record at or after the timestamp
    assert listed(99_999) == ListedOffset(-1, -1, -1)      # none: no epoch either
    found = ListedOffset(10_000, 0, 7)                      # what the remote segments answered wins
    assert service.list_offset("trim", 0, 10_000, current_leader_epoch=-1, read_committed=False,
                               found_remotely=found) == found
    with pytest.raises(errors.UnknownTopicOrPartition):
        service.list_offset("nope", 0, -1, current_leader_epoch=-1, read_committed=False)
    assert delete("trim", -1) == DeleteOutcome(errors.NONE, 5)   # -1: up to the high watermark
    assert listed(-2) == ListedOffset(-1, 5, 0)

    assert service.end_offset_for_epoch("trim", 0, 0, current_leader_epoch=-1) == (0, 5)
    with pytest.raises(errors.UnknownTopicOrPartition):
        service.end_offset_for_epoch("nope", 0, 0, current_leader_epoch=-1)
    assert service.producers("trim", 0) == []   # no idempotent producer wrote it

    described = service.describe_log_dir({"trim": {0}, "plain": {0, 9}})
    assert set(described.sizes) == {"trim", "plain"} and set(described.sizes["plain"]) == {0}   # hosted ones only
    assert described.sizes["plain"][0] == broker.broker.logs.get("plain", 0).size_bytes > 0
    assert described.total_bytes >= described.usable_bytes > 0
    everything = service.describe_log_dir(None)
    assert {"plain", "strict", "trim", "compacted"} <= set(everything.sizes)
