"""Which registry process is the primary (the one writer of ``_schemas``), Confluent's leader election.

``SolePrimary`` (``tidelake.election=none``): this process is the primary from the start, the way a single
registry runs. ``GroupElection`` (``tidelake.election=group``, in ``group_election.py``) elects one through Kafka's
group protocol. Either way becoming primary goes through ``KafkaStore.become_writer``, which fences the previous
writer, so a stale primary cannot write.
"""
from __future__ import annotations

from tidelake.schema_registry.kafka_store import KafkaStore


class SolePrimary:
    def __init__(self, store: KafkaStore, url: str):
        self._store = store
        self._url = url

    def start(self) -> None:
        self._store.become_writer()

    def stop(self) -> None:
        self._store.stop_writing()

    def is_primary(self) -> bool:
        return self._store.is_writer

    def primary_url(self) -> str | None:
        return self._url if self._store.is_writer else None
