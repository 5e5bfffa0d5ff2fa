"""Checking config values against their definitions: one value (its type, range, pattern, choices; returned
normalised), and a topic's configs as a whole (every name known; tiered storage's rules between them, as Kafka
3.9 and KIP-950 state them). The definitions themselves are ``config_definitions``."""
from __future__ import annotations

import re
from typing import Mapping

from tidelake.broker.config_definitions import (TOPIC_CONFIGS, TYPE_BOOLEAN, TYPE_DOUBLE, TYPE_INT, TYPE_LIST,
                                                TYPE_LONG, TYPE_SHORT, ConfigDef)
from tidelake.errors import InvalidConfig


def validate_value(defn: ConfigDef, value: str | None) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    try:
        if defn.type in (TYPE_INT, TYPE_LONG, TYPE_SHORT):
            n = int(value)
            if defn.minimum is not None and n < defn.minimum:
                raise InvalidConfig(f"{defn.name}={value} is below the minimum {defn.minimum}")
            if defn.type == TYPE_INT and not -2**31 <= n < 2**31:
                raise InvalidConfig(f"{defn.name}={value} is out of int range")
        elif defn.type == TYPE_DOUBLE:
            x = float(value)
            if defn.minimum is not None and x < defn.minimum:
                raise InvalidConfig(f"{defn.name}={value} is below the minimum {defn.minimum}")
        elif defn.type == TYPE_BOOLEAN:
            if value.lower() not in ("true", "false"):
                raise InvalidConfig(f"{defn.name}={value} is not a boolean")
            value = value.lower()
        if defn.maximum is not None and defn.type in (TYPE_INT, TYPE_LONG, TYPE_SHORT, TYPE_DOUBLE) \
                and float(value) > defn.maximum:
            raise InvalidConfig(f"{defn.name}={value} is above the maximum {defn.maximum}")
        if defn.type == TYPE_SHORT and not -2**15 <= int(value) < 2**15:
            raise InvalidConfig(f"{defn.name}={value} is out of short range")
        if defn.type == TYPE_LONG and not -2**63 <= int(value) < 2**63:
            raise InvalidConfig(f"{defn.name}={value} is out of long range")
    except ValueError:
        raise InvalidConfig(f"{defn.name}={value!r} is not a valid {defn.type and 'number'}") from None
    if defn.pattern is not None and not re.fullmatch(defn.pattern, value) or \
            defn.valid is not None and not defn.valid(value):
        raise InvalidConfig(f"{defn.name}={value!r} is not a valid value")
    if defn.choices is not None:
        items = [v.strip() for v in value.split(",")] if defn.type == TYPE_LIST else [value]
        bad = [v for v in items if v not in defn.choices]
        if bad or not items:
            raise InvalidConfig(f"{defn.name}={value!r}: allowed values are {', '.join(defn.choices)}")
        value = ",".join(items)
    return value


SCHEMA_VALIDATION_CONFIGS = ("confluent.key.schema.validation", "confluent.value.schema.validation")


def schema_validation_without_registry(name: str) -> str:
    """Why ``name=true`` is refused on a broker with no registry to validate against (one line)."""
    return (f"{name}=true needs a schema registry to validate against: this broker has neither "
            "schema.registry.listen nor confluent.schema.registry.url set")


def validate_topic_configs(configs: Mapping[str, str | None], *, tiered_storage: bool, schema_registry: bool,
                           previous: Mapping[str, str] | None = None) -> dict[str, str]:
    """Check names and values of topic configs; return them normalised (``tiered_storage``: the broker's
    remote.log.storage.system.enable; ``schema_registry``: whether the broker has a registry that broker-side
    schema validation asks; ``previous``: the overrides these replace, when altering). Raises InvalidConfig."""
    out = {}
    for name, value in configs.items():
        defn = TOPIC_CONFIGS.get(name)
        if defn is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic config {name}")
        out[name] = validate_value(defn, value)
    for name in SCHEMA_VALIDATION_CONFIGS:   # else every record would be taken unvalidated, silently
        if out.get(name) == "true" and not schema_registry:
            raise InvalidConfig(schema_validation_without_registry(name))
    if out.get("remote.storage.enable") == "true":  # Kafka: only with remote.log.storage.system.enable
        if not tiered_storage:
            raise InvalidConfig("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                                "with remote log storage.")
        if "compact" in out.get("cleanup.policy", TOPIC_CONFIGS["cleanup.policy"].default):
            raise InvalidConfig("Remote log storage is unsupported for the compacted topics")
        if out.get("remote.log.copy.disable") == "true":   # KIP-950: nothing more copied, one retention
            for local, whole in (("local.retention.bytes", "retention.bytes"), ("local.retention.ms", "retention.ms")):
                # (only against an override: a broker default is not known here)
                if local in out and out[local] != "-2" and whole in out and int(out[local]) != int(out[whole]):
                    raise InvalidConfig(f"When `remote.log.copy.disable` is set to true, the `{local}` and `{whole}` "
                                        "must be set to the identical value because there will be no more logs "
                                        "copied to the remote storage.")
    elif previous is not None and previous.get("remote.storage.enable") == "true" \
            and out.get("remote.log.delete.on.disable") != "true":  # KIP-950: never a remote part left unread
        raise InvalidConfig("It is invalid to disable remote storage without deleting remote data. If you want to "
                            "keep the remote data and turn to read only, please set `remote.storage.enable=true,"
                            "remote.log.copy.disable=true`. If you want to disable remote storage and delete all "
                            "remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
    return out
