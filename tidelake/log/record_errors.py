"""Record-level validation of produced batches (KIP-467): INVALID_RECORD naming each bad record.

Only compacted topics need it today: a record without a key cannot be compacted, so Kafka rejects the
batch. The check decodes records, so it runs only when the topic is compacted.
"""
from __future__ import annotations

from tidelake.errors import KafkaApiError
from tidelake.protocol import records as rb

INVALID_RECORD = 87


class InvalidRecord(KafkaApiError):
    """INVALID_RECORD: the batch was rejected because of the records in ``record_errors``, each a
    (record index within its batch, message) pair, for ProduceResponse's ``record_errors``."""

    code = INVALID_RECORD

    def __init__(self, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(message)
        self.record_errors = record_errors


def check_keys_for_compaction(buf, pos: int, header: rb.BatchHeader, partition: str) -> None:
    """Raise InvalidRecord if a record of the batch at ``pos`` has no key (compacted topics)."""
    message = f"Compacted topic cannot accept message without key in topic partition {partition}."
    errors = [(i, message) for i, r in enumerate(rb.decode_records(buf, pos, header)) if r.key is None]
    if errors:
        raise InvalidRecord(message, errors)
