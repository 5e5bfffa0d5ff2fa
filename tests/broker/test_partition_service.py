"""The partition service under the data-plane handlers, on a real single broker: a Produce's append
and a Fetch's read answer named outcomes, and the single-broker rules (an ISR of one, internal topics
written only by coordinators, unknown partitions) are the service's, not the handlers'."""
from __future__ import annotations

import pytest

from tidelake import errors
from tidelake.broker import EmbeddedBroker
from tidelake.broker.partition_service import AppendOutcome, LocalPartitions, PendingAcks, ReadOutcome
from tidelake.protocol.records import Record, build_batch, decode_records, iter_batches


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("service")) as b:
        b.run(b.broker.create_topic, "plain", 1, {})
        b.run(b.broker.create_topic, "strict", 1, {"min.insync.replicas": "2"})
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
