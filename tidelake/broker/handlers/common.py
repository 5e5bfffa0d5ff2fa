"""Helpers shared by the handler modules: an exception's Kafka error code, per-partition answers."""
from __future__ import annotations

from tidelake import errors
from tidelake.broker.context import BrokerContext


def error_code(e: BaseException) -> int:
    """The Kafka error code reporting ``e``: its own for KafkaApiError, CORRUPT_MESSAGE for a
    record decoding error (records.CorruptRecordError and friends), else UNKNOWN_SERVER_ERROR."""
    if isinstance(e, errors.KafkaApiError):
        return e.code
    if isinstance(e, ValueError):
        return errors.CorruptMessage.code
    return errors.UnknownServerError.code


def per_partition(broker: BrokerContext, topic: str, partitions, answer, fail,
                  index=lambda p: p.partition_index) -> list:
    """One answer per requested partition (``index(p)`` is its number): ``answer(log, p)``, or
    ``fail(p, code)`` with UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist and the
    error's code when ``answer`` raises, so one bad partition never fails the others."""
    out = []
    for p in partitions:
        plog = broker.logs.get(topic, index(p))
        if plog is None:
            out.append(fail(p, errors.UnknownTopicOrPartition.code))
            continue
        try:
            out.append(answer(plog, p))
        except Exception as e:
            out.append(fail(p, error_code(e)))
    return out
