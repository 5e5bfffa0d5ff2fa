"""`tidelake configs describe|alter` — Kafka's kafka-configs.sh for topics, brokers and groups (a KIP-848 group's
``consumer.*`` configs, a share group's ``share.*`` ones)
(DescribeConfigs / IncrementalAlterConfigs through confluent-kafka's AdminClient)."""
from __future__ import annotations

import re

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows

# confluent-kafka reports a config's source as an int; these are Kafka's names for them.
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                6: "DYNAMIC_BROKER_LOGGER_CONFIG", 8: "GROUP_CONFIG"}

ENTITY_TYPES = {"topics": "topic", "brokers": "broker", "groups": "group", "topic": "topic", "broker": "broker",
                "group": "group"}


def _resource_type(kind: str):
    from confluent_kafka.admin import ConfigResource, ResourceType
    if kind == "group":
        return ResourceType.GROUP
    return ConfigResource.Type.TOPIC if kind == "topic" else ConfigResource.Type.BROKER


def describe_configs(conn: BrokerConnection, admin, kind: str, name: str) -> dict:
    from confluent_kafka.admin import ConfigResource
    resource = ConfigResource(_resource_type(kind), name)
    return conn.wait(admin.describe_configs([resource], request_timeout=conn.timeout)[resource],
                     f"cannot describe configs of {kind} {name}")


def alter_configs(conn: BrokerConnection, admin, kind: str, name: str, sets: dict[str, str],
                  deletes: tuple[str, ...] | list[str]) -> None:
    """Set and remove configs of one topic, broker or group in one IncrementalAlterConfigs request."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()]
    ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deletes]
    resource = ConfigResource(_resource_type(kind), name, incremental_configs=ops)
    conn.wait(admin.incremental_alter_configs([resource], request_timeout=conn.timeout)[resource],
              f"cannot alter configs of {kind} {name}")


def _split_configs(values: tuple[str, ...], option: str) -> dict[str, str]:
    """kafka-configs' syntax: 'k1=v1,k2=[a,b]' (a list value in brackets), repeatable."""
    out: dict[str, str] = {}
    for value in values:
        for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", value):
            key, sep, val = item.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(f"expected KEY=VALUE[,KEY=VALUE...], got {value!r}", param_hint=option)
            val = val.strip()
            out[key.strip()] = val[1:-1] if val.startswith("[") and val.endswith("]") else val
    return out


def _entity(entity_type: str, entity_name: str | None, conn: BrokerConnection, admin) -> tuple[str, str]:
    kind = ENTITY_TYPES[entity_type]
    if entity_name is None:
        if kind in ("topic", "group"):
            raise click.UsageError(f"--entity-name is required for {kind}s")
        md = conn.reachable(admin)
        entity_name = str(md.controller_id if md.controller_id >= 0 else min(md.brokers))
    return kind, entity_name


entity_options = [
    click.option("--entity-type", type=click.Choice(sorted(set(ENTITY_TYPES))), required=True,
                 help="topics, brokers or groups."),
    click.option("--entity-name", default=None,
                 help="Topic name, broker id (brokers: default the controller) or group id."),
]


def _with_entity(f):
    for option in reversed(entity_options):
        f = option(f)
    return f


@click.group(cls=CommandGroup)
def configs() -> None:
    """Describe and alter topic, broker and group configs (kafka-configs)."""


@configs.command()
@broker_options
@_with_entity
@click.option("--all", "show_all", is_flag=True, help="Every config, not only the ones set explicitly.")
@json_option
def describe(conn: BrokerConnection, entity_type: str, entity_name: str | None, show_all: bool,
             as_json: bool) -> None:
    """The configs of a topic, broker or group: name, value, source, read-only, sensitive."""
    admin = conn.admin()
    kind, name = _entity(entity_type, entity_name, conn, admin)
    entries = describe_configs(conn, admin, kind, name)
    shown = sorted((c for c in entries.values() if show_all or not c.is_default), key=lambda c: c.name)
    rows = [{"name": c.name, "value": None if c.is_sensitive else c.value,
             "source": SOURCE_NAMES.get(c.source, str(c.source)), "read_only": c.is_read_only,
             "sensitive": c.is_sensitive} for c in shown]
    if as_json:
        print_json({"entity_type": kind, "entity_name": name, "configs": rows})
        return
    print_rows(("CONFIG", "VALUE", "SOURCE", "READ-ONLY", "SENSITIVE"),
               [(r["name"], r["value"], r["source"], "yes" if r["read_only"] else "no",
                 "yes" if r["sensitive"] else "no") for r in rows],
               title=f"Configs of {kind} {name}" + ("" if show_all else " (set explicitly; --all for every config)"))


@configs.command()
@broker_options
@_with_entity
@click.option("--add-config", "add", multiple=True, metavar="K=V[,K=V...]",
              help="Configs to set, kafka-configs syntax (a list value in brackets: k=[a,b]); repeatable.")
@click.option("--delete-config", "delete", multiple=True, metavar="K[,K...]",
              help="Configs to remove (back to their defaults); repeatable.")
def alter(conn: BrokerConnection, entity_type: str, entity_name: str | None, add: tuple[str, ...],
          delete: tuple[str, ...]) -> None:
    """Set or remove configs of a topic, broker or group (incrementally; other configs are kept)."""
    sets = _split_configs(add, "--add-config")
    deletes = [k.strip() for value in delete for k in value.split(",") if k.strip()]
    if not sets and not deletes:
        raise click.UsageError("nothing to alter: give --add-config or --delete-config")
    admin = conn.admin()
    kind, name = _entity(entity_type, entity_name, conn, admin)
    if kind == "topic":
        md = conn.reachable(admin)  # all topics: asking for one may create it
        if name not in md.topics or md.topics[name].error is not None:
            raise CliError(f"unknown topic {name}")
    alter_configs(conn, admin, kind, name, sets, deletes)
    click.echo(f"Completed updating config for {kind} {name}.")
