"""Broker-side schema validation (Confluent Server's ``confluent.key.schema.validation`` /
``confluent.value.schema.validation`` topic configs): a produced record whose key or value does not start with
Confluent's wire format (magic byte 0, a 4-byte schema id) naming an id registered for the topic's subject is
refused with INVALID_RECORD, every bad record named (KIP-467), and nothing of the partition's batches is appended.

The subject follows the topic's ``confluent.{key,value}.subject.name.strategy`` (TopicNameStrategy:
``<topic>-key`` / ``<topic>-value``; RecordNameStrategy: the record's full name; TopicRecordNameStrategy:
``<topic>-<full name>``). A null key or value (a tombstone) passes. The registry is asked over its REST API
(``RegistryLookup``, off the event loop, answers cached); a registry that does not answer fails the produce with
REQUEST_TIMED_OUT, which producers retry.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Mapping

from tidelake import errors
from tidelake.broker.config_definitions import SUBJECT_NAME_STRATEGIES, TOPIC_CONFIGS
from tidelake.protocol import records as rb
from tidelake.schema_registry.lookup import RegisteredSchema, RegistryLookup, RegistryUnavailable
from tidelake.schema_registry.record_names import NoRecordName, record_name

TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME = SUBJECT_NAME_STRATEGIES
MAGIC = 0
_SHOWN_ERRORS = 3


@dataclass(frozen=True)
class FieldRule:
    """Validation of one side (key or value) of a topic's records."""
    side: str          # "key" or "value"
    strategy: str


def rules_for(configs: Mapping[str, str]) -> list[FieldRule]:
    """The topic's validation rules from its config overrides (both off by default)."""
    rules = []
    for side in ("key", "value"):
        enabled = configs.get(f"confluent.{side}.schema.validation",
                              TOPIC_CONFIGS[f"confluent.{side}.schema.validation"].default)
        if str(enabled).lower() == "true":
            strategy = configs.get(f"confluent.{side}.subject.name.strategy",
                                   TOPIC_CONFIGS[f"confluent.{side}.subject.name.strategy"].default)
            rules.append(FieldRule(side, strategy))
    return rules


class SchemaValidator:
    def __init__(self, lookup: RegistryLookup | None):
        """``lookup`` None: the registry is not running yet (the broker's own, started after the broker);
        produces to validated topics meanwhile get REQUEST_TIMED_OUT, which producers retry."""
        self._lookup = lookup

    def bind(self, lookup: RegistryLookup) -> None:
        self._lookup = lookup

    async def check(self, topic: str, partition: int, records, configs: Mapping[str, str]) -> None:
        """Raises ``InvalidRecord`` naming every record (index across the request's batches) that fails."""
        rules = rules_for(configs)
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
                        bad.append((index, problem))
                        break
                index += 1
        if bad:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in bad[:_SHOWN_ERRORS])
            raise errors.InvalidRecord(
                f"One or more records have been rejected due to {len(bad)} record errors in total, and only showing "
                f"the first three errors at most: [{shown}]", bad)

    async def _problem(self, topic: str, rule: FieldRule, data: bytes | None) -> str | None:
        if data is None:
            return None
        where = f"topic {topic} ({rule.side})"
        if self._lookup is None:
            raise errors.RequestTimedOut(f"cannot validate records of {where}: the schema registry has not started")
        if len(data) < 5 or data[0] != MAGIC:
            return f"Log record for {where} does not start with a schema id (magic byte 0 and 4 bytes of id)"
        schema_id = int.from_bytes(data[1:5], "big")
        found = self._lookup.cached(schema_id)
        if found is None:
            try:
                found = await asyncio.to_thread(self._lookup.schema, schema_id)
            except RegistryUnavailable as e:
                raise errors.RequestTimedOut(f"cannot validate records of {where}: {e}") from None
        if found is None:
            return f"Schema id {schema_id} of a record for {where} is not registered in {self._lookup.url}"
        try:
            subject = _subject(topic, rule, found, data[5:])
        except NoRecordName as e:
            return f"Schema id {schema_id} of a record for {where}: {e}"
        if subject not in found.subjects:
            return f"Schema id {schema_id} of a record for {where} is not registered for subject {subject}"
        return None


def _subject(topic: str, rule: FieldRule, found: RegisteredSchema, payload: bytes) -> str:
    if rule.strategy == TOPIC_NAME:
        return f"{topic}-{rule.side}"
    name = record_name(found.schema_type, found.schema, payload)
    return name if rule.strategy == RECORD_NAME else f"{topic}-{name}"
