"""RecordBatch v2 codec, cross-checked against kafka-python's independent implementation."""
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder, DefaultRecordBatch

from tidelake.protocol import records as R


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_kafka_python_batch_decodes(codec):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=7, producer_epoch=1, base_sequence=5, batch_size=1 << 20)
    for i in range(10):
        b.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"v" * i, headers=[("h", b"x")])
    buf = bytes(b.build())
    h = R.validate_batch(buf)
    assert (h.records_count, h.producer_id, h.base_sequence, h.last_sequence) == (10, 7, 5, 14)
    recs = R.decode_records(buf)
    assert [r.key for r in recs] == [b"k%d" % i for i in range(10)]
    assert recs[3].value == b"vvv" and recs[3].timestamp == 1003 and recs[3].headers == [("h", b"x")]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_built_batch_reads_in_kafka_python(codec):
    recs = [R.Record(i, 2000 + i, None if i == 0 else b"k", b"val%d" % i, [("a", None)]) for i in range(5)]
    buf = bytearray(R.build_batch(recs, compression=codec))
    R.set_base_offset(buf, 0, 100)
    batch = DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc()
    got = list(batch)
    assert [r.offset for r in got] == [100, 101, 102, 103, 104]
    assert got[0].key is None and got[4].value == b"val4"


def test_corruption_detected():
    buf = bytearray(R.build_batch([R.Record(0, 1, b"k", b"v")]))
    buf[-1] ^= 0xFF
    with pytest.raises(R.CorruptRecordError):
        R.validate_batch(buf)
    with pytest.raises(R.CorruptRecordError):
        list(R.iter_batches(bytes(buf[:-3])))


def test_log_append_time_keeps_crc_valid():
    buf = bytearray(R.build_batch([R.Record(0, 1, b"k", b"v")]))
    R.set_log_append_time(buf, 0, len(buf), 999)
    h = R.validate_batch(buf)
    assert h.timestamp_type == 1 and h.max_timestamp == 999
    assert R.decode_records(buf)[0].timestamp == 999


def test_control_batch():
    buf = R.build_control_batch(R.CONTROL_COMMIT, producer_id=3, producer_epoch=0, coordinator_epoch=0, timestamp=5)
    h = R.validate_batch(buf)
    assert h.is_control and h.is_transactional
    assert R.control_type(R.decode_records(buf)[0]) == R.CONTROL_COMMIT
