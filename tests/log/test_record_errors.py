"""KIP-467: a batch with records that cannot be stored is rejected with INVALID_RECORD and names them."""
from __future__ import annotations

from pathlib import Path

import pytest

from tidelake.errors import KafkaApiError
from tidelake.log import InvalidRecord, LogConfig, PartitionLog
from tidelake.protocol.records import COMPRESSION_GZIP, Record, build_batch

NOW = 1_700_000_000_000


def kv(keys: list[bytes | None], **kw) -> bytes:
    return build_batch([Record(i, NOW, k, b"v") for i, k in enumerate(keys)], **kw)


@pytest.mark.parametrize("compression", [0, COMPRESSION_GZIP])
def test_keyless_records_on_a_compacted_topic_are_named(tmp_path: Path, compression: int):
    log = PartitionLog.open(tmp_path / "facts-3", LogConfig(cleanup_policy="compact"))
    log.append(kv([b"a"]), now_ms=NOW)
    with pytest.raises(InvalidRecord) as info:
        log.append(kv([b"b", None, b"c", None], compression=compression), now_ms=NOW)
    err = info.value
    assert isinstance(err, KafkaApiError) and err.code == 87  # INVALID_RECORD
    assert [i for i, _msg in err.record_errors] == [1, 3]
    assert all("without key" in msg and "facts-3" in msg for _i, msg in err.record_errors)
    # all-or-nothing, also for a good batch before the bad one in the same request
    with pytest.raises(InvalidRecord) as info:
        log.append(kv([b"d"]) + kv([None]), now_ms=NOW)
    assert [i for i, _msg in info.value.record_errors] == [1]  # indexes across the request's batches
    assert log.log_end_offset == 1
    log.close()


def test_keyless_records_are_fine_elsewhere(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "delete-0", LogConfig(cleanup_policy="delete"))
    assert log.append(kv([None, b"k"]), now_ms=NOW).last_offset == 1
    log.close()
    log = PartitionLog.open(tmp_path / "both-0", LogConfig(cleanup_policy="compact,delete"))
    with pytest.raises(InvalidRecord):
        log.append(kv([None]), now_ms=NOW)
    log.close()
