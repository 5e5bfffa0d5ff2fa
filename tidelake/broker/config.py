"""Broker and topic configuration with Kafka's names, defaults, types and synonyms.

Broker configs come from (lowest to highest precedence) built-in defaults, a ``server.properties``
file, ``--set key=value`` overrides, the cluster-wide dynamic defaults (AlterConfigs on the broker resource named
"", ``--entity-default``) and this broker's dynamic updates (AlterConfigs on its id).
A topic config's effective value is the topic override if any, else its broker synonym
(``segment.bytes`` <- ``log.segment.bytes``; ``retention.ms`` <- ``log.retention.ms`` /
``log.retention.minutes`` / ``log.retention.hours``), else Kafka's default. DescribeConfigs reports
that value with its source, exactly as Kafka's ``ConfigSource`` enumerates them. What each name means
and accepts is in ``config_definitions``; listener parsing in ``listeners``. ``listen_address`` /
``advertised_address`` check the command line's ``--listen`` / ``--advertised`` shortcuts against them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from tidelake.broker.config_definitions import (BROKER_CONFIGS, SECURITY_PROTOCOLS, SOURCE_DEFAULT,
                                                SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER,
                                                SOURCE_STATIC_BROKER, SOURCE_TOPIC,
                                                SOURCE_UNKNOWN, TOPIC_CONFIGS, TOPIC_SYNONYMS, TYPE_PASSWORD,
                                                TYPE_STRING, UNIT_TO_MS, ConfigDef, ConfigError,
                                                broker_definition, is_known_static_name, is_secret_name, unknown_name_message)
from tidelake.broker.config_validation import (SCHEMA_VALIDATION_CONFIGS, schema_validation_without_registry,
                                                validate_value)
from tidelake.broker.listeners import Listener, parse_listeners
from tidelake.errors import InvalidConfig


def properties_lines(text: str) -> list[tuple[int, str, str]]:
    """Java ``.properties`` subset: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments.
    Returns (line number, key, value) in file order."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep_pos, ch in enumerate(line):
            if ch in "=:":
                out.append((lineno, line[:sep_pos].strip(), line[sep_pos + 1:].strip()))
                break
        else:
            out.append((lineno, line, ""))
    return out


def parse_properties(text: str) -> dict[str, str]:
    """``properties_lines`` as a dict (a later line wins, as in Java)."""
    return {key: value for _lineno, key, value in properties_lines(text)}


@dataclass
class ConfigEntry:
    """One config as DescribeConfigs reports it."""
    name: str
    value: str | None
    source: int
    read_only: bool
    type: int
    doc: str
    synonyms: list[tuple[str, str | None, int]]  # (name, value, source), highest precedence first

    @property
    def is_default(self) -> bool:
        return self.source == SOURCE_DEFAULT

    @property
    def sensitive(self) -> bool:
        return self.type == TYPE_PASSWORD


class BrokerConfig:
    """The broker's own configs: defaults < static (file, --set) < dynamic (AlterConfigs)."""

    def __init__(self, static: Mapping[str, str] | None = None, dynamic: Mapping[str, str] | None = None):
        self.static: dict[str, str] = {k: str(v) for k, v in (static or {}).items()}
        self.dynamic: dict[str, str] = dict(dynamic or {})
        # the cluster-wide dynamic defaults (Kafka's <default> broker entity), below this broker's dynamic values
        self.dynamic_default: dict[str, str] = {}
        # feature levels UpdateFeatures finalized (the broker's metadata file keeps them): not configs, so the
        # config APIs neither show nor alter them, as Kafka's do not
        self.finalized_features: dict[str, int] = {}
        for name, value in self.static.items():
            defn = broker_definition(name)
            if defn is not None:
                self.static[name] = validate_value(defn, value)

    @classmethod
    def from_file(cls, path: str | Path | None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        """The static configs of ``server.properties`` at ``path`` and ``--set`` ``overrides`` (which win).

        Every name must be one Kafka knows, every value valid for its config, and ``listeners``
        servable: otherwise ``ConfigError`` names the key and where it came from (``FILE:LINE`` or
        ``--set``), before anything starts."""
        where: dict[str, str] = {}
        props: dict[str, str] = {}
        if path:
            for lineno, key, value in properties_lines(Path(path).read_text()):
                props[key], where[key] = value, f"{Path(path).name}:{lineno}"
        for key, value in (overrides or {}).items():
            props[key], where[key] = value, "--set"
        for key, value in props.items():
            if not is_known_static_name(key):
                raise ConfigError(f"{where[key]}: {unknown_name_message(key)}")
            defn = broker_definition(key)
            if defn is not None:
                try:
                    validate_value(defn, value)
                except InvalidConfig as e:
                    raise ConfigError(f"{where[key]}: {e}") from None
        config = cls(props)
        try:
            config.listener()
            config.advertised_listeners()
        except ConfigError as e:
            key = str(e).partition(":")[0]
            raise ConfigError(f"{where[key]}: {e}" if key in where else str(e)) from None
        return config

    def security_protocols(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as listener name -> protocol (a listener named after a
        protocol maps to it by default, as in Kafka)."""
        pairs = (pair.strip().upper().split(":", 1)
                 for pair in self.get_list("listener.security.protocol.map") if ":" in pair)
        return {name.strip(): protocol.strip() for name, protocol in pairs}

    def served_listeners(self) -> list[tuple[Listener, str]]:
        """Every listener the broker serves, with its security protocol, in ``listeners`` order. The
        KRaft controller listener (``controller.listener.names``) has nothing to serve on a single node."""
        controllers = {n.upper() for n in self.get_list("controller.listener.names")}
        protocols = self.security_protocols()
        served: list[tuple[Listener, str]] = []
        for listener in parse_listeners(self.get("listeners"), "listeners"):
            if listener.name in controllers:
                continue
            protocol = protocols.get(listener.name, listener.name)
            if protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(f"listeners: {listener} has no security protocol (got {protocol!r}; map it in "
                                  f"listener.security.protocol.map to one of {', '.join(SECURITY_PROTOCOLS)})")
            for other, _ in served:
                if other.name == listener.name:
                    raise ConfigError(f"listeners: listener name {listener.name} is used twice "
                                      f"({self.get('listeners')!r})")
                if other.port == listener.port and listener.port != 0 and other.host == listener.host:
                    raise ConfigError(f"listeners: {other} and {listener} use the same port")
            served.append((listener, protocol))
        if not served:
            raise ConfigError(f"listeners: no listener to serve ({self.get('listeners')!r})")
        inter = self.get("inter.broker.listener.name")
        if inter and inter.upper() not in {listener.name for listener, _ in served}:
            raise ConfigError(f"inter.broker.listener.name: {inter} is not one of the listeners "
                              f"({self.get('listeners')!r})")
        return served

    def listener(self) -> Listener:
        """The first served listener (the one ``--listen`` stands for)."""
        return self.served_listeners()[0][0]

    def advertised_listeners(self) -> dict[str, Listener]:
        """``advertised.listeners`` by listener name; each must name a served listener."""
        served = {listener.name for listener, _ in self.served_listeners()}
        out: dict[str, Listener] = {}
        for listener in parse_listeners(self.get("advertised.listeners"), "advertised.listeners"):
            if listener.name not in served:
                raise ConfigError(f"advertised.listeners: no entry for listener {listener.name} in listeners "
                                  f"({self.get('listeners')!r})")
            out[listener.name] = listener
        return out

    def advertised_listener(self) -> Listener | None:
        """The first served listener's entry in ``advertised.listeners``, if it has one (a listener
        without one advertises its bound address)."""
        return self.advertised_listeners().get(self.listener().name)

    def lookup(self, name: str) -> tuple[str | None, int]:
        """(value, source) of a broker config; (None, SOURCE_UNKNOWN) if unset and without default."""
        if name in self.dynamic:
            return self.dynamic[name], SOURCE_DYNAMIC_BROKER
        if name in self.dynamic_default:
            return self.dynamic_default[name], SOURCE_DYNAMIC_DEFAULT_BROKER
        if name in self.static:
            return self.static[name], SOURCE_STATIC_BROKER
        defn = BROKER_CONFIGS.get(name)
        if defn is not None:  # Kafka lists unset configs (e.g. log.retention.ms) as null defaults
            return defn.default, SOURCE_DEFAULT
        return None, SOURCE_UNKNOWN

    def get(self, name: str) -> str | None:
        """The value of ``name`` (its definition's default when unset; None when it has none)."""
        return self.lookup(name)[0]

    def get_int(self, name: str) -> int:
        """An INT/LONG/SHORT config's value; its default comes from its definition, never from the caller."""
        return int(self._defined_value(name))

    def get_bool(self, name: str) -> bool:
        """A BOOLEAN config's value: ``true`` or ``false`` (Kafka's rule: anything else is refused, not false)."""
        value = self._defined_value(name).strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{name}={value!r} is not true or false")
        return value == "true"

    def get_list(self, name: str) -> list[str]:
        """A LIST config's elements (stripped, empty ones dropped; unset without default: none)."""
        value = self._value_or_default(name)
        return [] if value is None else [item.strip() for item in value.split(",") if item.strip()]

    def get_string(self, name: str) -> str:
        """A STRING config's value, stripped, its definition's default when unset (empty when it has none)."""
        value = self._value_or_default(name)
        return "" if value is None else value.strip()

    def get_optional(self, name: str) -> str | None:
        """A config without a default (a URL, a class name): its value, None when unset or empty."""
        value = self._value_or_default(name)
        return value.strip() or None if value is not None else None

    def _value_or_default(self, name: str) -> str | None:
        """``name``'s value, else its definition's default (a per-listener name unset: its config's default)."""
        defn = broker_definition(name)
        if defn is None:  # a typed read of a name without a definition is a bug here
            raise KeyError(f"{name} has no definition in config_definitions.BROKER_CONFIGS")
        value = self.get(name)
        return defn.default if value is None else value

    def _defined_value(self, name: str) -> str:
        value = self._value_or_default(name)
        if value is None or value == "":
            raise ConfigError(f"{name} has no value and no default")
        return value

    def node_id(self) -> int:
        """``node.id``, else its older name ``broker.id`` when only that is set (Kafka's synonyms), else the default."""
        given = [name for name in ("node.id", "broker.id") if name in self.dynamic or name in self.static]
        return self.get_int(given[0] if given else "node.id")

    def set_dynamic(self, name: str, value: str | None, *, default: bool = False) -> None:
        """This broker's dynamic value of ``name`` (``default``: the cluster-wide dynamic default); None removes it."""
        normalised = self.validate_dynamic(name, value)
        layer = self.dynamic_default if default else self.dynamic
        if value is None:
            layer.pop(name, None)
        else:
            layer[name] = normalised

    def feature_level(self, name: str) -> int:
        """A feature's level whose config (``transaction.version``) sets it at the first start: the level
        UpdateFeatures finalized since, else the config's (Kafka's format-time level, then its metadata log's)."""
        return self.finalized_features.get(name, self.get_int(name))

    def validate_dynamic(self, name: str, value: str | None) -> str | None:
        """The value to store for a dynamic update of ``name`` (normalised). Raises InvalidConfig for a
        static (read-only) config or a bad value; a name Kafka does not know is kept as given."""
        defn = BROKER_CONFIGS.get(name)
        if defn is None:
            return None if value is None else str(value)
        if defn.read_only:
            raise InvalidConfig(f"Cannot update these configs dynamically: {name} is read-only")
        normalised = validate_value(defn, value)
        if name in SCHEMA_VALIDATION_CONFIGS and normalised == "true" and not has_schema_registry(self):
            raise InvalidConfig(schema_validation_without_registry(name))
        return normalised

    def describe(self, names: Iterable[str] | None = None, with_synonyms: bool = False) -> list[ConfigEntry]:
        keys = list(BROKER_CONFIGS) + sorted(k for k in {*self.static, *self.dynamic, *self.dynamic_default}
                                             if k not in BROKER_CONFIGS)
        wanted = set(names) if names else None
        out = []
        for name in keys:
            if wanted is not None and name not in wanted:
                continue
            defn = BROKER_CONFIGS.get(name) or ConfigDef(name, None,
                                                         TYPE_PASSWORD if is_secret_name(name) else TYPE_STRING)
            value, source = self.lookup(name)
            synonyms = []
            if with_synonyms:
                if name in self.dynamic:
                    synonyms.append((name, self.dynamic[name], SOURCE_DYNAMIC_BROKER))
                if name in self.dynamic_default:
                    synonyms.append((name, self.dynamic_default[name], SOURCE_DYNAMIC_DEFAULT_BROKER))
                if name in self.static:
                    synonyms.append((name, self.static[name], SOURCE_STATIC_BROKER))
                if defn.default is not None:
                    synonyms.append((name, defn.default, SOURCE_DEFAULT))
            if defn.type == TYPE_PASSWORD:  # Kafka never returns a sensitive value
                value, synonyms = None, [(n, None, src) for n, _v, src in synonyms]
            out.append(ConfigEntry(name, value, source, defn.read_only, defn.type, defn.doc, synonyms))
        return out

    def describe_dynamic_defaults(self, names: Iterable[str] | None = None) -> list[ConfigEntry]:
        """The broker resource named "" (the cluster-wide defaults), as Kafka describes it: only the dynamic
        defaults set, each its own one synonym (``DYNAMIC_DEFAULT_BROKER_CONFIG:name=value``)."""
        wanted = set(names) if names else None
        out = []
        for name, value in sorted(self.dynamic_default.items()):
            if wanted is not None and name not in wanted:
                continue
            defn = BROKER_CONFIGS.get(name) or ConfigDef(name, None,
                                                         TYPE_PASSWORD if is_secret_name(name) else TYPE_STRING)
            shown = None if defn.type == TYPE_PASSWORD else value
            out.append(ConfigEntry(name, shown, SOURCE_DYNAMIC_DEFAULT_BROKER, defn.read_only, defn.type, defn.doc,
                                   [(name, shown, SOURCE_DYNAMIC_DEFAULT_BROKER)]))
        return out

    # -- topic defaults ------------------------------------------------------------------------
    def _synonym_chain(self, topic_name: str) -> list[tuple[str, str | None, int]]:
        """Broker-level values backing a topic config, highest precedence first, each in its own name's unit
        (``log.retention.hours=168``, as Kafka lists synonyms; ``topic_default`` converts)."""
        chain = []
        for broker_name in TOPIC_SYNONYMS.get(topic_name, ()):
            for store, source in ((self.dynamic, SOURCE_DYNAMIC_BROKER),
                                  (self.dynamic_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
                                  (self.static, SOURCE_STATIC_BROKER)):
                if broker_name in store:
                    chain.append((broker_name, store[broker_name], source))
        # Kafka's defaults for the broker synonyms, e.g. log.retention.hours=168
        for broker_name in TOPIC_SYNONYMS.get(topic_name, ()):
            defn = BROKER_CONFIGS.get(broker_name)
            if defn is not None and defn.default is not None:
                chain.append((broker_name, defn.default, SOURCE_DEFAULT))
                break
        return chain

    def _listed_synonyms(self, topic_name: str) -> list[tuple[str, str | None, int]]:
        """The broker synonyms DescribeConfigs lists for a topic config, as Kafka's ``ConfigHelper.configSynonyms``
        lists them: layer by layer (dynamic, dynamic default, static, default), each layer's names in synonym order,
        in their own unit, and nothing before the first entry of the topic config's first synonym (Kafka's
        ``dropWhile``): retention.ms lists nothing while log.retention.ms is set nowhere, though its value comes
        from log.retention.hours."""
        names = TOPIC_SYNONYMS.get(topic_name, ())
        listed = [(n, store[n], source) for store, source in ((self.dynamic, SOURCE_DYNAMIC_BROKER),
                                                              (self.dynamic_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
                                                              (self.static, SOURCE_STATIC_BROKER))
                  for n in names if n in store]
        listed += [(n, BROKER_CONFIGS[n].default, SOURCE_DEFAULT) for n in names
                   if n in BROKER_CONFIGS and BROKER_CONFIGS[n].default is not None]
        first = next((i for i, (n, _v, _s) in enumerate(listed) if names and n == names[0]), len(listed))
        return listed[first:]

    def topic_default(self, topic_name: str) -> tuple[str | None, int]:
        """A topic config's value and source when the topic does not set it: the first broker synonym set,
        converted to the topic config's unit (``log.retention.hours`` -> ms), else the topic default."""
        for name, value, source in self._synonym_chain(topic_name):
            if source != SOURCE_DEFAULT:
                return _to_topic_unit(name, value), source
        defn = TOPIC_CONFIGS[topic_name]
        return defn.default, SOURCE_DEFAULT

    def effective_topic_configs(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Every topic config's effective value for a topic with these overrides."""
        out = {}
        for name in TOPIC_CONFIGS:
            out[name] = overrides[name] if name in overrides else self.topic_default(name)[0]
        return out

    def describe_topic(self, overrides: Mapping[str, str], names: Iterable[str] | None = None,
                       with_synonyms: bool = False) -> list[ConfigEntry]:
        wanted = set(names) if names else None
        out = []
        for name, defn in TOPIC_CONFIGS.items():
            if wanted is not None and name not in wanted:
                continue
            if name in overrides:
                value, source = overrides[name], SOURCE_TOPIC
            else:
                value, source = self.topic_default(name)
            synonyms = []
            if with_synonyms:
                if name in overrides:
                    synonyms.append((name, overrides[name], SOURCE_TOPIC))
                synonyms.extend(self._listed_synonyms(name))
            out.append(ConfigEntry(name, value, source, False, defn.type, defn.doc, synonyms))
        return out


def has_schema_registry(config: BrokerConfig) -> bool:
    """Whether broker-side schema validation has a registry to ask: the broker's own or another's."""
    return bool(config.get("schema.registry.listen") or config.get("confluent.schema.registry.url"))


def _to_topic_unit(broker_name: str, value: str) -> str:
    factor = UNIT_TO_MS.get(broker_name)
    if factor is None or value in (None, ""):
        return value
    n = int(value)
    return str(n * factor) if n >= 0 else str(n)


def _address(text: str, option: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{option}: expected HOST:PORT, got {text!r}")
    return host.removeprefix("[").removesuffix("]") or "0.0.0.0", int(port)


def listen_address(config: BrokerConfig, listen: str | None) -> tuple[str, int]:
    """Where to bind: ``--listen HOST:PORT`` (a shortcut) or the served entry of ``listeners``. Both
    given and different is an error: the operator asked for two things."""
    listener = config.listener()
    configured = (listener.host or "0.0.0.0", listener.port)
    if listen is None:
        return configured
    address = _address(listen, "--listen")
    if "listeners" in config.static and address != configured:
        raise ConfigError(f"--listen {listen} disagrees with listeners={config.static['listeners']}")
    return address


def advertised_address(config: BrokerConfig, advertised: str | None) -> tuple[str | None, int | None]:
    """What clients are told: ``--advertised HOST:PORT`` or ``advertised.listeners`` (None: the bind
    address, see ``Broker``)."""
    if advertised is not None:
        return _address(advertised, "--advertised")
    listener = config.advertised_listener()
    return (None, None) if listener is None else (listener.host or None, listener.port)
