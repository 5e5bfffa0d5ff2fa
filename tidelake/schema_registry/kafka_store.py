"""``KafkaStore``: the ``_schemas`` topic as the registry's log (Confluent's ``KafkaStore`` and its reader thread).

A reader thread consumes the one partition from the beginning (read_committed) for as long as the process lives
and applies every record to the ``RegistryState``; ``start`` returns once it has read to the end, so a restarted
registry has every schema back. Only the primary writes, through a transactional producer whose
``transactional.id`` all registries of one group share: becoming primary runs ``init_transactions``, which fences
a previous primary still writing, so two processes can never both hand out ids. A write returns once the reader
has applied the written records, so the writer's next decision sees them.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tidelake.schema_registry.records import StoreRecord
from tidelake.schema_registry.settings import RegistrySettings
from tidelake.schema_registry.state import RegistryState

log = logging.getLogger("tidelake.schema_registry.kafka_store")

_POLL_S = 0.1
_BATCH = 500


class StoreError(Exception):
    """The ``_schemas`` topic could not be read or written (the message says which and why)."""


class StoreTimeout(StoreError):
    """A write or a read to the end did not finish within ``kafkastore.timeout.ms``."""


class NotWriter(StoreError):
    """This process is not (or no longer) the primary: another one fenced its producer."""


@dataclass(frozen=True)
class StoreStats:
    records_applied: int
    end_offset: int


class KafkaStore:
    def __init__(self, settings: RegistrySettings, state: RegistryState, state_lock: threading.RLock):
        self._settings = settings
        self._state = state
        self._lock = state_lock           # held while a record is applied; readers of the state take it too
        self._topic = settings.get("kafkastore.topic")
        self._client_config = settings.kafka_client_config()
        self._timeout_s = settings.get_int("kafkastore.timeout.ms") / 1000
        self._applied = threading.Condition(state_lock)
        self._position = 0                # the next offset the reader will apply (past control records too)
        self._records_applied = 0
        self._reader: threading.Thread | None = None
        self._consumer: Consumer | None = None
        self._probe: Consumer | None = None   # asks for the end offset (the reader's connection is busy fetching)
        self._producer: Producer | None = None
        self._stopping = threading.Event()
        self._reader_error: str | None = None

    # -- start / stop -----------------------------------------------------------------------------------------
    def start(self) -> None:
        deadline = time.monotonic() + self._settings.get_int("kafkastore.init.timeout.ms") / 1000
        self._ensure_topic(deadline)
        self._consumer = Consumer({**self._client_config,
                                   "group.id": f"{self._settings.get('schema.registry.group.id')}-reader",
                                   "enable.auto.commit": False, "isolation.level": "read_committed",
                                   "enable.partition.eof": True, "fetch.wait.max.ms": 10,
                                   "client.id": "tidelake-schema-registry-reader"})
        self._consumer.assign([TopicPartition(self._topic, 0, OFFSET_BEGINNING)])
        # read_committed: the end it reports is the last stable offset, which the reader can reach even while a
        # dead writer's transaction is still open
        self._probe = Consumer({**self._client_config,
                                "group.id": f"{self._settings.get('schema.registry.group.id')}-reader",
                                "enable.auto.commit": False, "isolation.level": "read_committed",
                                "client.id": "tidelake-schema-registry-probe"})
        self._reader = threading.Thread(target=self._read_forever, name="schema-registry-reader", daemon=True)
        self._reader.start()
        self.wait_until_caught_up(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        self._stopping.set()
        if self._reader is not None:
            self._reader.join(10)
        if self._producer is not None:
            self._producer.flush(1)
            self._producer = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def _ensure_topic(self, deadline: float) -> None:
        """Creates ``_schemas`` (one partition, compacted) unless it exists; an existing one must have one
        partition and be compacted, as Confluent's registry checks."""
        admin = AdminClient({**self._client_config, "client.id": "tidelake-schema-registry-admin"})
        timeout = max(1.0, deadline - time.monotonic())
        try:   # a cluster that does not answer fails the start within the store's timeout, not the init one
            metadata = admin.list_topics(timeout=min(timeout, self._timeout_s))
        except KafkaException as e:
            raise StoreError(f"cannot reach Kafka at {self._client_config['bootstrap.servers']}: "
                             f"{e.args[0].str()}") from None
        topic = metadata.topics.get(self._topic)
        if topic is None or topic.error is not None:
            replicas = min(self._settings.get_int("kafkastore.topic.replication.factor"), len(metadata.brokers))
            future = admin.create_topics([NewTopic(self._topic, 1, replicas, config={"cleanup.policy": "compact"})],
                                         request_timeout=timeout)[self._topic]
            try:
                future.result(timeout)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise StoreError(f"cannot create the topic {self._topic}: {e.args[0].str()}") from None
            return
        if len(topic.partitions) != 1:
            raise StoreError(f"the topic {self._topic} has {len(topic.partitions)} partitions; the schema "
                             "registry's topic must have exactly 1")
        resource = ConfigResource(ConfigResource.Type.TOPIC, self._topic)
        try:
            configs = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
        except KafkaException as e:
            raise StoreError(f"cannot describe the topic {self._topic}: {e.args[0].str()}") from None
        policy = configs.get("cleanup.policy")
        if policy is not None and "compact" not in policy.value:
            raise StoreError(f"the topic {self._topic} has cleanup.policy={policy.value}; the schema registry's "
                             "topic must be compacted (cleanup.policy=compact), or schemas are deleted by retention")

    # -- reading ----------------------------------------------------------------------------------------------
    def _read_forever(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stopping.is_set():
            try:
                first = consumer.poll(_POLL_S)      # returns at the first record (consume() waits out its timeout)
                if first is None:
                    continue
                messages = [first, *consumer.consume(_BATCH - 1, 0)]
            except KafkaException as e:
                log.warning("reading %s: %s", self._topic, e.args[0].str())
                continue
            with self._lock:
                for msg in messages:
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            self._position = max(self._position, msg.offset())
                        else:
                            self._reader_error = err.str()
                            log.warning("reading %s: %s", self._topic, err.str())
                        continue
                    try:
                        self._state.apply(msg.offset(), msg.key(), msg.value())
                    except (ValueError, KeyError, TypeError) as e:   # a record no registry could have written
                        log.error("skipping the unreadable record at %s offset %d: %s", self._topic, msg.offset(), e)
                    self._records_applied += 1
                    self._position = max(self._position, msg.offset() + 1)
                self._applied.notify_all()

    def end_offset(self, timeout_s: float) -> int:
        assert self._probe is not None
        try:
            _low, high = self._probe.get_watermark_offsets(TopicPartition(self._topic, 0), timeout=timeout_s,
                                                              cached=False)
        except KafkaException as e:
            raise StoreError(f"cannot read the end of {self._topic}: {e.args[0].str()}") from None
        return high

    def wait_until_caught_up(self, timeout_s: float | None = None) -> None:
        """Returns once every record written before the call has been applied (Confluent's
        ``waitUntilKafkaReaderReachesLastOffset``)."""
        timeout_s = self._timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        end = self.end_offset(max(0.5, timeout_s))
        self._wait_for_position(end, deadline)

    def _wait_for_position(self, position: int, deadline: float) -> None:
        with self._lock:
            while self._position < position:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreTimeout(f"reading {self._topic} to offset {position} timed out at offset "
                                       f"{self._position}" + (f" ({self._reader_error})" if self._reader_error else ""))
                self._applied.wait(min(left, 0.5))

    def stats(self) -> StoreStats:
        with self._lock:
            return StoreStats(self._records_applied, self._position)

    # -- writing (the primary only) ---------------------------------------------------------------------------
    def become_writer(self) -> None:
        """Fences any earlier writer, then reads to the end: what it wrote is applied before this one decides."""
        producer = Producer({**self._client_config,
                             "transactional.id": f"{self._settings.get('schema.registry.group.id')}-primary",
                             "linger.ms": 0, "client.id": "tidelake-schema-registry-writer",
                             "transaction.timeout.ms": max(1000, int(self._timeout_s * 1000))})
        try:
            producer.init_transactions(self._timeout_s)
        except KafkaException as e:
            raise StoreError(f"cannot become the writer of {self._topic}: {e.args[0].str()}") from None
        self._producer = producer
        self.wait_until_caught_up()

    def stop_writing(self) -> None:
        self._producer = None

    @property
    def is_writer(self) -> bool:
        return self._producer is not None

    def write(self, records: list[StoreRecord]) -> None:
        """Writes the records in one transaction and waits until they are applied."""
        producer = self._producer
        if producer is None:
            raise NotWriter("this registry is not the primary")
        deadline = time.monotonic() + self._timeout_s
        offsets: list[int] = []
        failures: list[str] = []

        def delivered(err, msg) -> None:
            if err is not None:
                failures.append(err.str())
            else:
                offsets.append(msg.offset())

        try:
            producer.begin_transaction()
            for record in records:
                producer.produce(self._topic, key=record.key.encode(), value=record.encoded_value(), partition=0,
                                 on_delivery=delivered)
            producer.commit_transaction(self._timeout_s)
        except KafkaException as e:
            err = e.args[0]
            if err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH):
                self._producer = None
                raise NotWriter(f"another registry became the primary ({err.str()})") from None
            if err.txn_requires_abort():
                try:
                    producer.abort_transaction(self._timeout_s)
                except KafkaException:
                    self._producer = None
            raise StoreError(f"writing to {self._topic}: {err.str()}") from None
        if failures or not offsets:
            raise StoreError(f"writing to {self._topic}: {'; '.join(failures) or 'no delivery report'}")
        self._wait_for_position(max(offsets) + 1, deadline)
