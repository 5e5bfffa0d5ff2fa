"""``GroupElection``: the primary elected through Kafka's group protocol, among every registry process of one
``schema.registry.group.id`` (Confluent's ``KafkaGroupLeaderElector``).

Each eligible process joins the group as a consumer of ``_schemas`` with its REST address as ``client.id``; the
group has one partition to give, so exactly one member is assigned it, and that member is the primary. The
cooperative sticky assignor leaves it where it is when processes join (a new member does not move the primary),
and moves it only in a second rebalance, after its old owner has given it up. The owner never reads through this
consumer (the partition is paused; the store has its own reader). Other processes learn the primary's address by
describing the group (the member holding the partition), as Confluent's members learn it from the assignment.
A process that leaves, crashes (session timeout) or loses its partition stops writing; the new primary's
``become_writer`` fences it in any case.
"""
from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tidelake.schema_registry.kafka_store import KafkaStore, StoreError
from tidelake.schema_registry.settings import RegistrySettings

log = logging.getLogger("tidelake.schema_registry.election")

_POLL_S = 0.1
_PRIMARY_CACHE_S = 1.0
SESSION_TIMEOUT_MS = 6000


class GroupElection:
    def __init__(self, settings: RegistrySettings, store: KafkaStore, url: str):
        self._settings = settings
        self._store = store
        self._url = url
        self._topic = settings.get("kafkastore.topic")
        self._group = settings.get("schema.registry.group.id")
        self._eligible = settings.get_bool("leader.eligibility")
        self._client_config = settings.kafka_client_config()
        self._consumer: Consumer | None = None
        self._admin = AdminClient({**self._client_config, "client.id": "tidelake-schema-registry-election"})
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._owns_partition = threading.Event()
        self._primary_seen: tuple[float, str | None] = (0.0, None)
        self._lock = threading.Lock()
        self.elections_won = 0

    def start(self) -> None:
        """Joins the group; returns once some process is the primary (or the init timeout has passed)."""
        if self._eligible:
            self._consumer = Consumer({**self._client_config, "group.id": self._group, "client.id": self._url,
                                       "enable.auto.commit": False,
                                       "partition.assignment.strategy": "cooperative-sticky",
                                       "session.timeout.ms": SESSION_TIMEOUT_MS,
                                       "heartbeat.interval.ms": SESSION_TIMEOUT_MS // 6,
                                       "auto.offset.reset": "latest"})
            self._consumer.subscribe([self._topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                     on_lost=self._on_revoke)
            self._thread = threading.Thread(target=self._poll_forever, name="schema-registry-election", daemon=True)
            self._thread.start()
        deadline = time.monotonic() + self._settings.get_int("kafkastore.init.timeout.ms") / 1000
        while time.monotonic() < deadline and not self._primary_known():
            self._owns_partition.wait(0.2)
        if self.primary_url() is None:
            log.warning("no schema registry primary elected yet in group %s; writes answer 50004 until one is",
                        self._group)

    def _primary_known(self) -> bool:
        """Some process is the primary: this one (writing already), or another one the group names."""
        url = self.primary_url(fresh=True)
        return self.is_primary() or (url is not None and url != self._url)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(15)
            self._thread = None
        self._store.stop_writing()

    def is_primary(self) -> bool:
        return self._owns_partition.is_set() and self._store.is_writer

    def primary_url(self, fresh: bool = False) -> str | None:
        if self.is_primary():
            return self._url
        with self._lock:
            seen_at, url = self._primary_seen
            if not fresh and url is not None and time.monotonic() - seen_at < _PRIMARY_CACHE_S:
                return url
        url = self._describe_primary()
        with self._lock:
            self._primary_seen = (time.monotonic(), url)
        return url

    # -- the group member -------------------------------------------------------------------------------------
    def _poll_forever(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._stopping.is_set():
                try:
                    consumer.poll(_POLL_S)
                except KafkaException as e:
                    log.warning("election in group %s: %s", self._group, e.args[0].str())
        finally:
            self._resign()
            try:
                consumer.close()   # leaves the group: the others rebalance at once, not after a session timeout
            except KafkaException as e:
                log.warning("leaving group %s: %s", self._group, e.args[0].str())

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        consumer.pause(partitions)
        try:
            self._store.become_writer()
        except StoreError as e:
            log.error("elected primary of group %s but cannot write %s: %s", self._group, self._topic, e)
            return
        self._owns_partition.set()
        self.elections_won += 1
        log.info("this registry (%s) is the primary of group %s", self._url, self._group)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self._resign()

    def _resign(self) -> None:
        if self._owns_partition.is_set():
            log.info("this registry (%s) is no longer the primary of group %s", self._url, self._group)
        self._owns_partition.clear()
        self._store.stop_writing()

    def _describe_primary(self) -> str | None:
        try:
            future = self._admin.describe_consumer_groups([self._group], request_timeout=5)[self._group]
            description = future.result(5)
        except KafkaException as e:
            log.debug("describing group %s: %s", self._group, e.args[0].str())
            return None
        for member in description.members:
            assignment = member.assignment
            if assignment is not None and any(tp.topic == self._topic for tp in assignment.topic_partitions):
                return member.client_id
        return None
