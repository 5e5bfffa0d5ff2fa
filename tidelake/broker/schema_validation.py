"""Broker-side schema validation (Confluent Server's ``confluent.key.schema.validation`` /
``confluent.value.schema.validation`` topic configs): a produced record whose key or value does not start with
Confluent's wire format (magic byte 0, a 4-byte schema id) naming an id registered for the topic's subject is
refused with INVALID_RECORD, every bad record named (KIP-467), and nothing of the partition's batches is appended.

The subject follows the topic's ``confluent.{key,value}.subject.name.strategy`` (TopicNameStrategy:
``<topic>-key`` / ``<topic>-value``; RecordNameStrategy: the record's full name; TopicRecordNameStrategy:
``<topic>-<full name>``). A null key or value (a tombstone) passes. The registry is asked over its REST API
(``RegistryLookup``, off the event loop, answers cached); a registry that does not answer fails the produce with
REQUEST_TIMED_OUT, which producers retry. Each refused record's error (KIP-467 ``record_errors``, and the
partition's ``error_message``, which Kafka's Java producer shows) names its offset in the batch, the schema id
found or its absence, and the subject; the broker logs the first of a refused produce.

A broker-wide ``confluent.{key,value}.schema.validation=true`` is the default of every topic not named ``_...``
(``_schemas`` and the internal topics). Without a registry to
ask (neither ``schema.registry.listen`` nor ``confluent.schema.registry.url``) the setting is refused where it is
made (``config_validation``: topic creation, config changes; ``embedded_registry``: at broker start), never
taken and then ignored.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable, Mapping

from tidelake import errors
from tidelake.broker.config_definitions import SUBJECT_NAME_STRATEGIES, TOPIC_CONFIGS
from tidelake.protocol import records as rb
from tidelake.schema_registry.lookup import RegisteredSchema, RegistryLookup, RegistryUnavailable
from tidelake.schema_registry.record_names import NoRecordName, record_name

log = logging.getLogger("tidelake.broker.schema_validation")

TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME = SUBJECT_NAME_STRATEGIES
MAGIC = 0
_SHOWN_ERRORS = 3


@dataclass(frozen=True)
class FieldRule:
    """Validation of one side (key or value) of a topic's records."""
    side: str          # "key" or "value"
    strategy: str


def rules_for(topic: str, configs: Mapping[str, str], default: Callable[[str], str | None]) -> list[FieldRule]:
    """The topic's validation rules from its config overrides, else ``default(name)`` (the broker-wide value), which
    a topic named ``_...`` does not take: the registry's own ``_schemas`` and the other internal topics hold records
    no schema describes."""
    rules = []
    for side in ("key", "value"):
        name = f"confluent.{side}.schema.validation"
        enabled = configs.get(name, "false" if topic.startswith("_") else default(name))
        if str(enabled).lower() == "true":
            strategy = configs.get(f"confluent.{side}.subject.name.strategy",
                                   TOPIC_CONFIGS[f"confluent.{side}.subject.name.strategy"].default)
            rules.append(FieldRule(side, strategy))
    return rules


class SchemaValidator:
    def __init__(self, lookup: RegistryLookup | None, topic_default: Callable[[str], tuple[str | None, int]]):
        """``lookup`` None: the registry is not running yet (the broker's own, started after the broker);
        produces to validated topics meanwhile get REQUEST_TIMED_OUT, which producers retry. ``topic_default``:
        the broker's (value, source) of a topic config (its broker-wide setting)."""
        self._lookup = lookup
        self._default = lambda name: topic_default(name)[0]

    def bind(self, lookup: RegistryLookup) -> None:
        self._lookup = lookup

    async def check(self, topic: str, partition: int, records, configs: Mapping[str, str]) -> None:
        """Raises ``InvalidRecord`` naming every record that fails: its offset in the batch (its index across the
        request's batches for the partition), the schema id found (or that there is none) and the subject."""
        rules = rules_for(topic, configs, self._default)
        if not rules:
            return
        bad: list[tuple[int, str]] = []
        index = 0
        try:
            batches = [rb.decode_records(records, pos, header) for pos, header in rb.iter_batches(records)]
        except rb.CorruptRecordError as e:
            raise errors.CorruptMessage(str(e)) from None
        for batch in batches:
            for record in batch:
                for rule in rules:
                    problem = await self._problem(topic, rule, record.key if rule.side == "key" else record.value)
                    if problem is not None:
                        bad.append((index, f"Record at offset {index} in the batch for {topic}-{partition} "
                                           f"({rule.side}): {problem}"))
                        break
                index += 1
        if bad:
            log.info("produce to %s-%d refused: %d records fail schema validation, the first: %s", topic, partition,
                     len(bad), bad[0][1])
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in bad[:_SHOWN_ERRORS])
            raise errors.InvalidRecord(
                f"One or more records have been rejected due to {len(bad)} record errors in total, and only showing "
                f"the first three errors at most: [{shown}]", bad)

    async def _problem(self, topic: str, rule: FieldRule, data: bytes | None) -> str | None:
        """What is wrong with one key or value (None: nothing), naming the schema id and the subject."""
        if data is None:
            return None
        where = f"topic {topic} ({rule.side})"
        if self._lookup is None:
            raise errors.RequestTimedOut(f"cannot validate records of {where}: the schema registry has not started")
        if len(data) < 5 or data[0] != MAGIC:
            subject = f"{topic}-{rule.side}" if rule.strategy == TOPIC_NAME else \
                f"named by {rule.strategy.rsplit('.', 1)[-1]} from the record's schema"
            return f"no schema id (it does not start with magic byte 0 and a 4-byte id); subject {subject}"
        schema_id = int.from_bytes(data[1:5], "big")
        found = self._lookup.cached(schema_id)
        if found is None:
            try:
                found = await asyncio.to_thread(self._lookup.schema, schema_id)
            except RegistryUnavailable as e:
                raise errors.RequestTimedOut(f"cannot validate records of {where}: {e}") from None
        if found is None:
            subject = f"{topic}-{rule.side}" if rule.strategy == TOPIC_NAME else "unknown without its schema"
            return f"schema id {schema_id} is not registered in {self._lookup.url}; subject {subject}"
        try:
            subject = _subject(topic, rule, found, data[5:])
        except NoRecordName as e:
            return f"schema id {schema_id}: {e}; no subject by {rule.strategy.rsplit('.', 1)[-1]}"
        if subject not in found.subjects:
            return (f"schema id {schema_id} is not registered for subject {subject} "
                    f"(it is under {', '.join(sorted(found.subjects)) or 'no subject'})")
        return None


def _subject(topic: str, rule: FieldRule, found: RegisteredSchema, payload: bytes) -> str:
    if rule.strategy == TOPIC_NAME:
        return f"{topic}-{rule.side}"
    name = record_name(found.schema_type, found.schema, payload)
    return name if rule.strategy == RECORD_NAME else f"{topic}-{name}"
