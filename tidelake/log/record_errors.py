"""Record-level validation of produced batches (KIP-467): INVALID_RECORD naming each bad record.

Only compacted topics need it today: a record without a key cannot be compacted, so Kafka rejects the
request and names the keyless records in the Produce response's ``record_errors``, so the producer
fails exactly those. The check decodes records, so it runs only when the topic is compacted.
"""
from __future__ import annotations

from tidelake.errors import InvalidRecord
from tidelake.protocol import records as rb


def keyless_records(buf, pos: int, header: rb.BatchHeader) -> list[int]:
    """Indexes (within the batch at ``pos``) of its records without a key."""
    return [i for i, r in enumerate(rb.decode_records(buf, pos, header)) if r.key is None]


def keyless_records_error(indexes: list[int], partition: str) -> InvalidRecord:
    """Kafka's INVALID_RECORD for keyless records (``indexes`` across the request's batches)."""
    message = f"Compacted topic cannot accept message without key in topic partition {partition}."
    record_errors = [(i, message) for i in indexes]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
    return InvalidRecord(f"One or more records have been rejected due to {len(indexes)} record errors in total, "
                         f"and only showing the first three errors at most: [{shown}]", record_errors)
