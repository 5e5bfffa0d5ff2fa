"""A pipeline's YAML, validated: where to read (``source``), what to write (``sink``), how offsets are kept.

See ``tidelake pipeline example`` for a commented file. Relative paths (the table, ``seo_dir``) are taken
relative to the YAML's directory; the table may also be ``s3://bucket/prefix`` (``sink.storage_options``).
No pyspark imports.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from tidelake.spark.ddl_schema import DdlError, parse_ddl_schema
from tidelake.spark.offset_modes import MODES
from tidelake.spark.offset_range import parse_duration
from tidelake.spark.registered_schemas import SchemaRegistryConfig
from tidelake.spark.value_formats import FORMATS, REGISTRY_FORMATS, ValueFormat, value_format
from tidelake.storage import is_local
from tidelake.storage.objects import S3_OPTIONS
from tidelake.table.properties import InvalidProperty, validated


class PipelineConfigError(ValueError):
    """A pipeline YAML that does not describe a runnable pipeline; ``key`` locates the value at fault
    (``("sink", "format")``) so that a file's error can name its line."""

    def __init__(self, message: str, key: tuple[str, ...] = ()):
        super().__init__(message)
        self.key = key


@dataclass
class SourceConfig:
    # a Kafka topic (bootstrap_servers, topic, group_id) or a tidelake table (table, read by ``transform``)
    bootstrap_servers: str = ""
    topic: str = ""
    group_id: str = ""
    table: str | None = None  # a table source: the upstream table's path (or s3://)
    tables: dict[str, str] = field(default_factory=dict)  # other tables the transform reads by name -> path
    max_rate_per_partition: int | None = None  # records per second per partition (the paper's maxRatePerPartition)
    batch_interval: float = 2.0  # seconds
    # How Spark reads the ranges, with the same reader (kafka_reader.read_ranges) either way: auto / direct =
    # inside the tasks that parse the values; datasource = through format("tidelake-kafka") first.
    reader: str = "auto"
    kafka: dict[str, str] = field(default_factory=dict)  # extra client settings (kafka.* in Spark's source)

    @property
    def max_records_per_partition(self) -> int | None:
        """Per-batch cap: max rate x batch interval (at least one record, as Spark's DStream does)."""
        if self.max_rate_per_partition is None:
            return None
        return max(1, int(self.max_rate_per_partition * self.batch_interval))


@dataclass
class SinkConfig:
    table: str
    # json | debezium-json (schemaless JSON text); with schema_registry: avro | debezium-avro | protobuf |
    # debezium-protobuf | json-schema | debezium-json-schema (Confluent's wire format)
    format: str = "debezium-json"
    # the table's key; with a schema registry, else the fields of the record key's schema (<topic>-key)
    primary_key: list[str] = field(default_factory=list)
    # Spark DDL: "id long, amount long"; with a schema registry, else the value's registered schema (<topic>-value)
    schema: str = ""
    buckets: int = 4
    mode: str = "upsert"  # upsert | append (json only: every value inserted)
    properties: dict[str, str] = field(default_factory=dict)
    app_id: str | None = None  # exactly-once: the name the table keeps this pipeline's offsets under
    # an existing table lacking columns of `schema` (or, with a schema registry, fields a record's schema
    # carries): "none" (an error) or "add-columns" (added, nullable; from a record, in the commit holding it)
    schema_evolution: str = "none"
    # an s3:// table: endpoint, region, access_key_id, secret_access_key, session_token, allow_http
    # (else AWS's environment variables)
    storage_options: dict[str, str] = field(default_factory=dict)
    # a Kafka tombstone (a null value): "ignore" (no change) or "delete" (the row its record key names, the key
    # decoded as the table's primary key, as Kafka Connect's JDBC sink's delete.enabled)
    tombstones: str = "ignore"


@dataclass
class MetricsConfig:
    """``metrics:``: where the pipeline serves /metrics and /health/* (off unless ``listen`` is set)."""
    listen: str | None = None  # HOST:PORT
    # /health/ready: ready while the last batch (or an idle pass with nothing to read) finished within
    # this many batch intervals
    ready_intervals: int = 3


@dataclass
class TriggerConfig:
    """``trigger:``: when a table pipeline runs: once its upstream has ``min_versions`` new versions, or has any
    and ``interval`` has passed since it last ran. (A Kafka stage runs a batch every ``batch_interval``.)"""
    interval: float = 1.0  # seconds
    min_versions: int = 1


@dataclass
class SparkConfig:
    """``spark:``: the session a pipeline runs on (``pipeline serve``: its first stage's)."""
    master: str = "local[2]"  # or spark://HOST:7077
    conf: dict[str, Any] = field(default_factory=dict)  # Spark settings, e.g. spark.driver.memory: 1g


REFRESH_MODES = ("incremental", "full")
TOMBSTONES = ("ignore", "delete")


@dataclass
class ExtremesConfig:
    """``state.extremes``: ``kept``: how many of a group's lowest (min) / highest (max) distinct values a min/max
    keeps with their counts, so that retracting its extreme needs no read of the upstream; a group recomputes only
    when retractions empty its list while it has values beyond it (aggregate_state.py)."""
    kept: int = 256


@dataclass
class StateConfig:
    """``state:``: what an aggregate's per-group state keeps."""
    extremes: ExtremesConfig = field(default_factory=ExtremesConfig)


@dataclass
class PipelineConfig:
    source: SourceConfig
    sink: SinkConfig
    offsets: str = "exactly-once"
    seo_dir: str | None = None
    commit: str = "async"  # commit-after only: async (Spark's commitAsync, the paper) | sync
    spark: SparkConfig = field(default_factory=SparkConfig)
    # a record that is not a change event: "fail" (stop, naming it) or "skip" (leave it out, counted);
    # Kafka Connect's errors.tolerance none / all; or "dead-letter": copied to dead_letter_topic, then left out
    on_error: str = "fail"
    dead_letter_topic: str | None = None  # Kafka Connect's errors.deadletterqueue.topic.name
    # Kafka client security properties (security.protocol, sasl.mechanism, sasl.jaas.config,
    # ssl.truststore.location, ...), as in a Kafka client's properties file; merged into source.kafka
    security: dict[str, str] = field(default_factory=dict)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    # where the registry-backed formats find their schemas: {url: http://..., basic_auth_user_info: USER:PASS}
    schema_registry: SchemaRegistryConfig | None = None
    # a table source: Spark SQL over ``source`` (the upstream's snapshot) or ``changes`` (its increment)
    transform: str | None = None
    trigger: TriggerConfig = field(default_factory=TriggerConfig)
    # incremental: maintained from each increment (refused when it cannot be); full: re-run over the snapshot
    refresh: str = "incremental"
    state: StateConfig = field(default_factory=StateConfig)

    @property
    def is_table_source(self) -> bool:
        return self.source.table is not None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], base_dir: str | os.PathLike | None = None) -> "PipelineConfig":
        """Validate a parsed YAML document; relative paths are taken relative to ``base_dir``."""
        try:
            src, snk = dict(raw["source"]), dict(raw["sink"])
        except (KeyError, TypeError) as e:
            raise PipelineConfigError("a pipeline needs 'source' and 'sink' sections") from e
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        if src.get("table") is not None:
            return cls._table_pipeline(raw, src, snk, base)
        for key in ("bootstrap_servers", "topic", "group_id"):
            if not src.get(key):
                raise PipelineConfigError(f"source.{key} is required", ("source",))
        for key in ("transform", "refresh", "state"):
            if key in raw:
                raise PipelineConfigError(f"{key} is for a table source (source: {{table: PATH}})", (key,))
        if "batch_interval" in src:
            try:
                src["batch_interval"] = parse_duration(src["batch_interval"])
            except ValueError as e:
                raise PipelineConfigError(f"source.batch_interval: {e}", ("source", "batch_interval")) from None
        if "kafka" in src:
            src["kafka"] = {str(k): str(v) for k, v in (src["kafka"] or {}).items()}
        try:
            source = SourceConfig(**src)
        except TypeError as e:
            raise PipelineConfigError(f"source: {e}") from e
        if source.reader not in ("auto", "datasource", "direct"):
            raise PipelineConfigError("source.reader must be auto, datasource or direct", ("source", "reader"))
        if isinstance(snk.get("primary_key"), str):
            snk["primary_key"] = [snk["primary_key"]]
        for key in ("properties", "storage_options"):
            if key in snk:
                snk[key] = {str(k): str(v) for k, v in (snk[key] or {}).items()}
        try:
            sink = SinkConfig(**snk)
        except TypeError as e:
            raise PipelineConfigError(f"sink: {e}") from e
        _check_table_properties(sink)
        if sink.format not in FORMATS:
            raise PipelineConfigError(f"sink.format must be one of {sorted(FORMATS)}", ("sink", "format"))
        if sink.mode not in ("upsert", "append"):
            raise PipelineConfigError("sink.mode must be upsert or append", ("sink", "mode"))
        if sink.schema_evolution not in ("none", "add-columns"):
            raise PipelineConfigError("sink.schema_evolution must be none or add-columns", ("sink", "schema_evolution"))
        if sink.tombstones not in TOMBSTONES:
            raise PipelineConfigError(f"sink.tombstones must be {' or '.join(TOMBSTONES)}", ("sink", "tombstones"))
        if sink.tombstones == "delete" and sink.mode != "upsert":
            raise PipelineConfigError("sink.tombstones: delete needs sink.mode upsert", ("sink", "tombstones"))
        registry = None
        if raw.get("schema_registry") is not None:
            try:
                registry = SchemaRegistryConfig(**dict(raw["schema_registry"]))
            except TypeError as e:
                raise PipelineConfigError(f"schema_registry: {e}", ("schema_registry",)) from None
            if not registry.url.startswith(("http://", "https://")):
                raise PipelineConfigError(f"schema_registry.url must be an http:// or https:// URL, not "
                                          f"{registry.url!r}", ("schema_registry", "url"))
        if sink.format in REGISTRY_FORMATS and registry is None:
            raise PipelineConfigError(f"sink.format {sink.format} needs a schema_registry section (url: ...)",
                                      ("sink", "format"))
        if sink.mode == "upsert" and not sink.primary_key and sink.format not in REGISTRY_FORMATS:
            raise PipelineConfigError("sink.primary_key is required", ("sink",))
        if sink.format not in REGISTRY_FORMATS and not sink.schema:
            raise PipelineConfigError(f"sink.schema is required for format {sink.format}", ("sink",))
        if sink.schema:
            try:  # Spark's DDL, checked here so that a typo is not a ParseException once Spark has started
                parse_ddl_schema(sink.schema)
            except DdlError as e:
                raise PipelineConfigError(f"sink.schema: {e}", ("sink", "schema")) from None
        if sink.format.startswith("debezium-") and sink.mode != "upsert":
            raise PipelineConfigError(f"{sink.format} needs sink.mode upsert", ("sink", "mode"))
        unknown = sorted(set(sink.storage_options) - set(S3_OPTIONS))
        if unknown:
            raise PipelineConfigError(f"sink.storage_options: unknown option(s) {', '.join(unknown)} "
                                      f"(known: {', '.join(S3_OPTIONS)})", ("sink", "storage_options"))
        if is_local(sink.table):
            sink.table = str((base / sink.table).resolve())
        elif not sink.table.startswith("s3://"):
            raise PipelineConfigError(f"sink.table must be a path or s3://bucket/prefix, not {sink.table!r}",
                                      ("sink", "table"))
        mode = raw.get("offsets", _default("offsets"))
        if mode not in MODES:
            raise PipelineConfigError(f"offsets must be one of {', '.join(MODES)}", ("offsets",))
        seo_dir = raw.get("seo_dir")
        if mode == "seo":
            if not seo_dir:
                raise PipelineConfigError("offsets: seo needs seo_dir", ("offsets",))
        if seo_dir:
            seo_dir = str((base / seo_dir).resolve())
        commit = raw.get("commit", _default("commit"))
        if commit not in ("async", "sync"):
            raise PipelineConfigError("commit must be async or sync", ("commit",))
        on_error = raw.get("on_error", _default("on_error"))
        if on_error not in ("fail", "skip", "dead-letter"):
            raise PipelineConfigError("on_error must be fail, skip or dead-letter", ("on_error",))
        dead_letter_topic = raw.get("dead_letter_topic")
        if on_error == "dead-letter" and not dead_letter_topic:
            raise PipelineConfigError("on_error: dead-letter needs dead_letter_topic", ("on_error",))
        if dead_letter_topic == source.topic:
            raise PipelineConfigError("dead_letter_topic must not be the source topic", ("dead_letter_topic",))
        security = {str(k): str(v) for k, v in (raw.get("security") or {}).items()}
        from tidelake.security.client_config import ClientConfigError, librdkafka_config, with_librdkafka_security
        try:  # librdkafka's names for them, also for Kafka's names in source.kafka; source.kafka wins
            source.kafka = with_librdkafka_security({**(librdkafka_config(security) if security else {}),
                                                     **source.kafka})
        except ClientConfigError as e:
            raise PipelineConfigError(f"security: {e}", ("security",)) from None
        try:
            metrics = MetricsConfig(**dict(raw.get("metrics") or {}))
        except TypeError as e:
            raise PipelineConfigError(f"metrics: {e}", ("metrics",)) from None
        if metrics.listen is not None:
            from tidelake.observability.server import parse_listen
            try:
                parse_listen(metrics.listen, "metrics.listen")
            except ValueError as e:
                raise PipelineConfigError(str(e), ("metrics", "listen")) from None
        if metrics.ready_intervals < 1:
            raise PipelineConfigError("metrics.ready_intervals must be >= 1", ("metrics", "ready_intervals"))
        return cls(source=source, sink=sink, offsets=mode, seo_dir=seo_dir, commit=commit,
                   spark=_spark(raw), on_error=on_error, dead_letter_topic=dead_letter_topic,
                   security=security, metrics=metrics, schema_registry=registry, trigger=_trigger(raw))

    def value_format(self) -> ValueFormat:
        """How the pipeline decodes record values (``sink.format`` with the schema registry)."""
        return value_format(self.sink.format, self.schema_registry)

    @classmethod
    def _table_pipeline(cls, raw: Mapping[str, Any], src: dict, snk: dict, base: Path) -> "PipelineConfig":
        """``source: {table: PATH, tables: {name: PATH}}`` + ``transform:``: a table -> table pipeline."""
        kafka = sorted(k for k in ("bootstrap_servers", "topic", "group_id", "kafka") if src.get(k))
        if kafka:
            raise PipelineConfigError(f"source: a table source takes no Kafka settings ({', '.join(kafka)})",
                                      ("source",))
        for key in ("offsets", "seo_dir", "commit", "on_error", "dead_letter_topic", "security"):
            if key in raw:
                raise PipelineConfigError(f"{key} is for a Kafka source; a table source is always exactly-once",
                                          (key,))
        transform = raw.get("transform")
        if not isinstance(transform, str) or not transform.strip():
            raise PipelineConfigError("a table source needs transform: Spark SQL over source or changes",
                                      ("transform",))
        refresh = raw.get("refresh", _default("refresh"))
        if refresh not in REFRESH_MODES:
            raise PipelineConfigError(f"refresh must be one of {', '.join(REFRESH_MODES)}", ("refresh",))
        src["tables"] = {str(k): str(v) for k, v in (src.get("tables") or {}).items()}
        source = SourceConfig(**{k: v for k, v in src.items() if k in ("table", "tables")})
        source.table = _table_path(source.table, base, ("source", "table"))
        for name in list(source.tables):
            if name.lower() in ("source", "changes"):
                raise PipelineConfigError(f"source.tables: {name!r} is the upstream's own name", ("source", "tables"))
            source.tables[name] = _table_path(source.tables[name], base, ("source", "tables", name))
        if isinstance(snk.get("primary_key"), str):
            snk["primary_key"] = [snk["primary_key"]]
        if "properties" in snk:
            snk["properties"] = {str(k): str(v) for k, v in (snk["properties"] or {}).items()}
        extra = sorted(set(snk) - {"table", "primary_key", "buckets", "properties", "app_id"})
        if extra:
            raise PipelineConfigError(f"sink: {', '.join(extra)} is for a Kafka source (a table pipeline's columns "
                                      f"come from its transform)", ("sink", extra[0]))
        try:
            sink = SinkConfig(**snk)
        except TypeError as e:
            raise PipelineConfigError(f"sink: {e}") from e
        _check_table_properties(sink)
        sink.table = _table_path(sink.table, base, ("sink", "table"))
        if sink.table == source.table or sink.table in source.tables.values():
            raise PipelineConfigError("sink.table is the pipeline's own source", ("sink", "table"))
        try:
            metrics = MetricsConfig(**dict(raw.get("metrics") or {}))
        except TypeError as e:
            raise PipelineConfigError(f"metrics: {e}", ("metrics",)) from None
        return cls(source=source, sink=sink, spark=_spark(raw), metrics=metrics,
                   transform=transform, trigger=_trigger(raw), refresh=refresh, state=_state(raw))

    @property
    def app_id(self) -> str:
        if self.is_table_source:
            return self.sink.app_id or f"table-pipeline:{os.path.basename(self.source.table.rstrip('/'))}"
        return self.sink.app_id or f"pipeline:{self.source.group_id}:{self.source.topic}"

    @property
    def name(self) -> str:
        """What a stage is called in a graph: the sink table's name."""
        return os.path.basename(self.sink.table.rstrip("/"))


def _table_path(path: str, base: Path, key: tuple[str, ...]) -> str:
    if is_local(path):
        return str((base / path).resolve())
    if not path.startswith("s3://"):
        raise PipelineConfigError(f"{'.'.join(key)} must be a path or s3://bucket/prefix, not {path!r}", key)
    return path


def _state(raw: Mapping[str, Any]) -> StateConfig:
    state = raw.get("state") or {}
    extremes = state.get("extremes") if isinstance(state, Mapping) else None
    if not isinstance(state, Mapping) or not isinstance(extremes or {}, Mapping) or set(state) - {"extremes"} \
            or set(extremes or {}) - {"kept"}:
        raise PipelineConfigError("state: the one setting is state.extremes.kept (a number of values)", ("state",))
    kept = (extremes or {}).get("kept", ExtremesConfig.kept)
    if isinstance(kept, bool) or not isinstance(kept, int) or kept < 1:
        raise PipelineConfigError(f"state.extremes.kept must be a whole number >= 1, not {kept!r}",
                                  ("state", "extremes", "kept"))
    return StateConfig(ExtremesConfig(kept))


def _trigger(raw: Mapping[str, Any]) -> TriggerConfig:
    trigger = dict(raw.get("trigger") or {})
    if "interval" in trigger:
        try:
            trigger["interval"] = parse_duration(trigger["interval"])
        except ValueError as e:
            raise PipelineConfigError(f"trigger.interval: {e}", ("trigger", "interval")) from None
    try:
        config = TriggerConfig(**trigger)
    except TypeError as e:
        raise PipelineConfigError(f"trigger: {e}", ("trigger",)) from None
    if config.min_versions < 1:
        raise PipelineConfigError("trigger.min_versions must be >= 1", ("trigger", "min_versions"))
    return config


def _default(name: str) -> Any:
    """A top-level setting's default: the PipelineConfig field's, its one home."""
    return next(f.default for f in fields(PipelineConfig) if f.name == name)


def _spark(raw: Mapping[str, Any]) -> SparkConfig:
    spark = {k: v for k, v in dict(raw.get("spark") or {}).items() if v is not None}  # (an empty key: its default)
    try:
        return SparkConfig(**spark)
    except TypeError as e:
        raise PipelineConfigError(f"spark: {e}", ("spark",)) from None


def _check_table_properties(sink: SinkConfig) -> None:
    """The sink table's properties are checked as ``table create`` checks them, before anything runs."""
    try:
        validated(sink.properties)
    except InvalidProperty as e:
        raise PipelineConfigError(f"sink.properties: {e}", ("sink", "properties", e.name)) from None
