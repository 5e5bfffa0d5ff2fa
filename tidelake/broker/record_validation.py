"""Record-level checks the broker makes before an append, reported per record (KIP-467).

Kafka rejects a record without a key on a compacted topic (compaction keeps the last record per key,
so a keyless one could never be compacted) and names the offending records in the Produce response's
``record_errors``, so the producer fails exactly those and retries the others. The checks decode the
records (decompressing them), so they run only where they apply: compacted topics.
"""
from __future__ import annotations

from tidelake.errors import InvalidRecord
from tidelake.protocol.records import decode_records, iter_batches


def keyless_record_indexes(records) -> list[int]:
    """Indexes (0-based, across the batches of ``records``) of the records without a key."""
    out = []
    index = 0
    for pos, header in iter_batches(records, validate=False):
        for i, record in enumerate(decode_records(records, pos, header)):
            if record.key is None:
                out.append(index + i)
        index += header.records_count
    return out


def check_keys_for_compaction(records, topic: str, partition: int) -> None:
    """Raise InvalidRecord naming every keyless record (a compacted topic's rule)."""
    bad = keyless_record_indexes(records)
    if not bad:
        return
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
    record_errors = [(i, message) for i in bad]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
    raise InvalidRecord(f"One or more records have been rejected due to {len(bad)} record errors in total, "
                        f"and only showing the first three errors at most: [{shown}]", record_errors)
