"""The options of Spark's Kafka source, parsed and validated, and the client settings they give.

The option names are Spark's (``kafka.bootstrap.servers``, ``subscribe``, ``subscribePattern``,
``assign``, ``startingOffsets``, ``endingOffsets``, ``failOnDataLoss``, ``maxOffsetsPerTrigger``, ...)
plus the paper's ``maxRatePerPartition`` with its batch interval. The ``tidelake-kafka`` data source and
the pipeline runner both describe what they read with a :class:`KafkaSourceOptions`; the driver's offset
lookups (kafka_offset_reader.py) and the executors' reader (kafka_reader.py) take their client settings
from it. No pyspark imports.
"""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from tidelake.security.client_config import ClientConfigError, with_librdkafka_security
from tidelake.spark.offset_range import EARLIEST, LATEST, TopicPartition, offsets_from_json, parse_duration

# kafka.* options Spark's Kafka source also refuses: the source manages these itself.
_FORBIDDEN_KAFKA_OPTIONS = {
    "auto.offset.reset", "enable.auto.commit", "key.deserializer", "value.deserializer",
    "interceptor.classes",
}

@dataclass(frozen=True)
class KafkaSourceDefaults:
    """What an option left out means: Spark's Kafka source's defaults (and Kafka's Java client's isolation level),
    their one home; ``KafkaSourceOptions.parse`` and the client settings take them from here."""
    starting_offsets_streaming: str = "latest"
    starting_offsets_batch: str = "earliest"
    ending_offsets: str = "latest"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    batch_interval_ms: int = 1000
    poll_timeout_ms: int = 120_000  # Spark's kafkaConsumer.pollTimeoutMs
    max_arrow_batch_rows: int = 10_000
    verify_latest_offsets: bool = True
    isolation_level: str = "read_uncommitted"  # transactional records are visible unless asked otherwise
    # the reader knows where its ranges end; a long poll only delays the end-of-partition answer for a range
    # whose last offsets hold no record (transaction markers, compacted records)
    fetch_wait_max_ms: int = 100

    @staticmethod
    def num_input_partitions() -> int:
        """One reading task per core of this machine."""
        return os.cpu_count() or 1


DEFAULTS = KafkaSourceDefaults()


class KafkaSourceError(ValueError):
    """A bad option or an unrecoverable condition (data loss, unknown partition, timeout)."""


class DataLossError(KafkaSourceError):
    """Requested offsets are no longer in the log (failOnDataLoss=true)."""


def parse_offsets_json(value: str) -> dict[TopicPartition, int]:
    """Offsets JSON given as an option; a malformed one is a KafkaSourceError."""
    try:
        return offsets_from_json(value)
    except ValueError as exc:
        raise KafkaSourceError(str(exc)) from None


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    """Option ``name`` (given in any case) as true or false; ``default`` when it is absent."""
    if name.lower() not in opts:
        return default
    value = opts[name.lower()]
    text = value.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise KafkaSourceError(f"option {name} must be true or false, got {value!r}")


def _whole_number(opts: Mapping[str, str], name: str) -> int:
    """Option ``name`` (given in any case, present) as a whole number."""
    try:
        return int(opts[name.lower()])
    except ValueError:
        raise KafkaSourceError(f"option {name} must be a whole number, got {opts[name.lower()]!r}") from None


def _poll_timeout_ms(opts: Mapping[str, str]) -> int:
    """Spark's ``kafkaConsumer.pollTimeoutMs`` (or ``pollTimeoutMs``)."""
    for name in ("kafkaConsumer.pollTimeoutMs", "pollTimeoutMs"):
        if name.lower() in opts:
            return _whole_number(opts, name)
    return DEFAULTS.poll_timeout_ms


def include_headers_option(options: Mapping[str, str]) -> bool:
    """Option ``includeHeaders`` (the source's columns depend on it before the rest is parsed)."""
    return _bool({str(k).lower(): str(v) for k, v in options.items()}, "includeHeaders", DEFAULTS.include_headers)


@dataclass
class KafkaSourceOptions:
    """The source's options, parsed and validated (all names as in Spark's Kafka source, plus the paper's
    ``maxRatePerPartition`` with its batch interval ``batchIntervalMs`` / ``batchInterval``)."""
    client_config: dict[str, Any]
    subscribe: list[str] | None
    subscribe_pattern: str | None
    assign: list[TopicPartition] | None
    starting_offsets: str  # "earliest" | "latest" | JSON
    ending_offsets: str    # "latest" | JSON
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    max_rate_per_partition: int | None
    batch_interval_ms: int
    min_partitions: int | None
    num_input_partitions: int
    poll_timeout_ms: int
    max_arrow_batch_rows: int
    verify_latest_offsets: bool = True
    # startingTimestamp (one number for every partition) / startingOffsetsByTimestamp (JSON per partition),
    # and the ending forms: epoch ms; they take precedence over startingOffsets/endingOffsets, as in Spark.
    starting_timestamps: str | None = None
    ending_timestamps: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> "KafkaSourceOptions":
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise KafkaSourceError("option kafka.bootstrap.servers is required")
        client_config: dict[str, Any] = {}
        for key, value in options.items():
            if key.lower().startswith("kafka."):
                name = key[len("kafka."):]
                if name.lower() in _FORBIDDEN_KAFKA_OPTIONS:
                    raise KafkaSourceError(
                        f"kafka.{name} is not supported: the source manages offsets itself "
                        "(use startingOffsets / failOnDataLoss)")
                # Spark hands over strings; a driver-side caller may also pass librdkafka's callables
                # (logger, error_cb), which must stay callables
                client_config[name] = value if callable(value) or isinstance(value, logging.Logger) else str(value)
        client_config["bootstrap.servers"] = bootstrap
        try:  # Kafka's security names (kafka.sasl.jaas.config, kafka.ssl.truststore.location, ...) as librdkafka's
            client_config = with_librdkafka_security(client_config)
        except ClientConfigError as exc:
            raise KafkaSourceError(f"kafka.* security options: {exc}") from None

        strategies = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
        if len(strategies) != 1:
            raise KafkaSourceError("exactly one of subscribe, subscribePattern, assign must be given")
        subscribe = subscribe_pattern = assign = None
        if "subscribe" in strategies:
            subscribe = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
            if not subscribe:
                raise KafkaSourceError("subscribe lists no topic")
        elif "subscribepattern" in strategies:
            subscribe_pattern = opts["subscribepattern"]
            re.compile(subscribe_pattern)
        else:
            try:
                raw = json.loads(opts["assign"])
                assign = sorted((t, int(p)) for t, parts in raw.items() for p in parts)
            except (ValueError, AttributeError, TypeError) as exc:
                raise KafkaSourceError(f'assign must be JSON like {{"topicA":[0,1]}}: {exc}') from None

        starting = opts.get("startingoffsets", DEFAULTS.starting_offsets_streaming if streaming
                            else DEFAULTS.starting_offsets_batch).strip()
        ending = opts.get("endingoffsets", DEFAULTS.ending_offsets).strip()
        if streaming and "endingoffsets" in opts:
            raise KafkaSourceError("endingOffsets is for batch queries only")
        if not streaming and starting.lower() == "latest":
            raise KafkaSourceError("startingOffsets=latest is not valid for batch queries")
        if not streaming and ending.lower() == "earliest":
            raise KafkaSourceError("endingOffsets=earliest is not valid for batch queries")
        for name, value in (("startingOffsets", starting), ("endingOffsets", ending)):
            if value.lower() not in ("earliest", "latest"):
                parsed = parse_offsets_json(value)
                if name == "endingOffsets" and any(o == EARLIEST for o in parsed.values()):
                    raise KafkaSourceError("endingOffsets cannot use -2 (earliest)")
                if name == "startingOffsets" and not streaming and any(o == LATEST for o in parsed.values()):
                    raise KafkaSourceError("startingOffsets cannot use -1 (latest) in batch queries")

        def positive(name: str) -> int | None:
            if name.lower() not in opts:
                return None
            number = _whole_number(opts, name)
            if number <= 0:
                raise KafkaSourceError(f"option {name} must be positive, got {number}")
            return number

        if "batchintervalms" in opts:
            interval_ms = _whole_number(opts, "batchIntervalMs")
        elif "batchinterval" in opts:
            try:
                interval_ms = round(parse_duration(opts["batchinterval"], default_unit="ms") * 1000)
            except ValueError as exc:
                raise KafkaSourceError(f"option batchInterval: {exc}") from None
        else:
            interval_ms = DEFAULTS.batch_interval_ms
        if interval_ms <= 0:
            raise KafkaSourceError("batch interval must be positive")

        return cls(
            client_config=client_config,
            subscribe=subscribe, subscribe_pattern=subscribe_pattern, assign=assign,
            starting_offsets=starting, ending_offsets=ending,
            starting_timestamps=opts.get("startingtimestamp") or opts.get("startingoffsetsbytimestamp"),
            ending_timestamps=opts.get("endingtimestamp") or opts.get("endingoffsetsbytimestamp"),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", DEFAULTS.fail_on_data_loss),
            include_headers=include_headers_option(opts),
            max_offsets_per_trigger=positive("maxOffsetsPerTrigger"),
            max_rate_per_partition=positive("maxRatePerPartition"),
            batch_interval_ms=interval_ms,
            min_partitions=positive("minPartitions"),
            num_input_partitions=positive("numInputPartitions") or DEFAULTS.num_input_partitions(),
            poll_timeout_ms=_poll_timeout_ms(opts),
            max_arrow_batch_rows=positive("maxArrowBatchRows") or DEFAULTS.max_arrow_batch_rows,
            verify_latest_offsets=_bool(opts, "verifyLatestOffsets", DEFAULTS.verify_latest_offsets),
        )

    def consumer_config(self) -> dict[str, Any]:
        """librdkafka consumer settings for reading exact ranges: manual assign, no commits, no reset."""
        config: dict[str, Any] = {
            # librdkafka insists on a group id even for assign(); nothing is committed under it.
            "group.id": f"tidelake-spark-source-{uuid.uuid4().hex[:12]}",
            "isolation.level": DEFAULTS.isolation_level,
            "fetch.wait.max.ms": DEFAULTS.fetch_wait_max_ms,
        }
        config.update(self.client_config)
        config.update({
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        })
        return config

    def admin_config(self) -> dict[str, Any]:
        # Only connection/security settings matter to the admin client; consumer-only keys would be refused.
        consumer_only = {"group.id", "isolation.level", "fetch.min.bytes", "fetch.max.bytes",
                         "fetch.wait.max.ms", "max.partition.fetch.bytes", "session.timeout.ms",
                         "heartbeat.interval.ms", "group.instance.id", "partition.assignment.strategy",
                         "group.protocol", "group.remote.assignor", "check.crcs", "queued.min.messages",
                         "queued.max.messages.kbytes", "fetch.message.max.bytes"}
        return {k: v for k, v in self.client_config.items() if k not in consumer_only}

    @property
    def isolation_level(self) -> str:
        return self.client_config.get("isolation.level", DEFAULTS.isolation_level)


